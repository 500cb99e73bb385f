package emulator

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// The emulator as upstream SGLang: stock (no extension flag), the decode
// radix cache, conditional aggregation.

// extensionPaths are the KVC contract's routes (docs/worker-protocol.md).
var extensionPaths = []string{"/session_cache/admit_direct_append", "/session_cache/lookup",
	"/_snapshot/prepare_receive", "/_snapshot/dump", "/_snapshot/finalize_ingest", "/_snapshot/release"}

func serverInfo(t *testing.T, s *Server) map[string]any {
	t.Helper()
	st, b := get(t, s.URL()+"/server_info")
	var info map[string]any
	if st != 200 || json.Unmarshal(b, &info) != nil {
		t.Fatalf("/server_info: %d %s", st, b)
	}
	return info
}

// TestStockWorkerHasNoExtension: with no extension flag every extension
// path is FastAPI's 404 and /server_info advertises no contract.
func TestStockWorkerHasNoExtension(t *testing.T) {
	for _, role := range []engine.Role{engine.RolePrefill, engine.RoleDecode, engine.RoleColocated} {
		s := start(t, Config{Role: role, TimeScale: 20})
		for _, p := range extensionPaths {
			st, b := post(t, s.URL()+p, map[string]any{"session_id": "S", "input_ids": []int{1, 2}, "num_tokens": 2})
			if st != 404 || strings.TrimSpace(string(b)) != `{"detail":"Not Found"}` {
				t.Errorf("%v %s: %d %s, want FastAPI's 404", role, p, st, b)
			}
		}
		info := serverInfo(t, s)
		if _, ok := info["kvc_protocol"]; ok {
			t.Errorf("%v: stock worker advertises %v", role, info["kvc_protocol"])
		}
		if role == engine.RoleDecode && (info["disaggregation_decode_enable_radix_cache"] != false || info["disaggregation_decode_enable_conditional_agg"] != false) {
			t.Errorf("decode server_info flags: %v %v", info["disaggregation_decode_enable_radix_cache"], info["disaggregation_decode_enable_conditional_agg"])
		}
	}
	// The extended workers advertise what they offer.
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: engine.SessionConfig{Enabled: true}})
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20, SnapshotSync: true})
	for s, want := range map[*Server]string{d: "session_cache,snapshot_dump", p: "snapshot_ingest"} {
		kp, _ := serverInfo(t, s)["kvc_protocol"].(map[string]any)
		var fs []string
		for _, f := range kp["features"].([]any) {
			fs = append(fs, f.(string))
		}
		if kp["version"] != float64(KVCProtocolVersion) || strings.Join(fs, ",") != want {
			t.Errorf("kvc_protocol %v, want version %d features %s", kp, KVCProtocolVersion, want)
		}
	}
}

// pdTurn runs one PD request through p and d and returns D's answer.
func pdTurn(t *testing.T, p, d *Server, rid string, room uint64, prompt []int, out int) GenerateOut {
	t.Helper()
	body := pdBody(p, rid, room, prompt, out)
	done := make(chan struct{})
	go func() { defer close(done); postQuiet(t, p.URL()+"/generate", copyBody(body)) }()
	st, b := post(t, d.URL()+"/generate", copyBody(body))
	<-done
	if st != 200 {
		t.Fatalf("%s on D: %d %s", rid, st, b)
	}
	return decodeOut(t, b)
}

// lastTransfer is the bytes of the last transfer that landed on p's link
// (sglang:kv_transfer_total_mb × 10⁶).
func lastTransfer(p *Server) float64 {
	var b int64
	p.d.do(func(float64) { b = p.kv.lastBytes })
	return float64(b)
}

// TestDecodeRadixSendsDelta: with --disaggregation-decode-enable-radix-cache
// a follow-up turn finds the first turn's prompt and output on D (its
// cached_tokens, whole blocks) and P sends only the KV past them.
func TestDecodeRadixSendsDelta(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, DecodeRadix: true})
	if serverInfo(t, d)["disaggregation_decode_enable_radix_cache"] != true {
		t.Fatal("server_info does not report the decode radix cache")
	}
	prompt := ids(5, 1000)
	o1 := pdTurn(t, p, d, "r1", 1, prompt, 16)
	if o1.MetaInfo.CachedTokens != 0 {
		t.Fatalf("turn 1 cached %d on D", o1.MetaInfo.CachedTokens)
	}
	full := lastTransfer(p)
	next := append(append(append([]int{}, prompt...), o1.OutputIDs...), ids(7, 200)...)
	o2 := pdTurn(t, p, d, "r2", 2, next, 4)
	if want := (1000 + 16) / 64 * 64; o2.MetaInfo.CachedTokens != want {
		t.Fatalf("turn 2 cached %d on D, want %d (turn 1's prompt and output, whole blocks)", o2.MetaInfo.CachedTokens, want)
	}
	delta := lastTransfer(p)
	if want := full * float64(len(next)-960) / 1000; delta > want*1.01 || delta < want*0.99 {
		t.Fatalf("turn 2 moved %.0f bytes, want %.0f (only the %d tokens past D's prefix; turn 1 moved %.0f)", delta, want, len(next)-960, full)
	}
	// A stock decoder keeps nothing: the same two turns move everything.
	d2 := start(t, Config{Role: engine.RoleDecode, TimeScale: 20})
	pdTurn(t, p, d2, "s1", 3, prompt, 16)
	if o := pdTurn(t, p, d2, "s2", 4, next, 4); o.MetaInfo.CachedTokens != 0 {
		t.Fatalf("stock decoder cached %d", o.MetaInfo.CachedTokens)
	}
}

// TestConditionalAgg: do_local_prefill runs on a decoder with
// --disaggregation-decode-enable-conditional-agg (no P, no room); with the
// decode radix cache too the next turn reuses the first; a stock decoder
// refuses it as any raw request (400, no bootstrap room).
func TestConditionalAgg(t *testing.T) {
	local := func(s *Server, rid string, prompt []int) (int, GenerateOut, string) {
		st, b := post(t, s.URL()+"/generate", map[string]any{"input_ids": prompt, "rid": rid, "do_local_prefill": true,
			"sampling_params": map[string]any{"max_new_tokens": 8}})
		if st != 200 {
			return st, GenerateOut{}, string(b)
		}
		return st, decodeOut(t, b), ""
	}
	prompt := ids(11, 700)
	for _, c := range []struct {
		name   string
		cfg    Config
		cached int
	}{
		{"conditional agg", Config{ConditionalAgg: true}, 0},
		{"conditional agg + decode radix", Config{ConditionalAgg: true, DecodeRadix: true}, (700 + 8) / 64 * 64},
	} {
		c.cfg.Role, c.cfg.TimeScale = engine.RoleDecode, 20
		d := start(t, c.cfg)
		st, o1, msg := local(d, "a", prompt)
		if st != 200 || o1.MetaInfo.CompletionTokens != 8 {
			t.Fatalf("%s: turn 1 %d %s", c.name, st, msg)
		}
		next := append(append(append([]int{}, prompt...), o1.OutputIDs...), ids(13, 100)...)
		if st, o2, msg := local(d, "b", next); st != 200 || o2.MetaInfo.CachedTokens != c.cached {
			t.Fatalf("%s: turn 2 %d cached %d %s, want %d", c.name, st, o2.MetaInfo.CachedTokens, msg, c.cached)
		}
	}
	stock := start(t, Config{Role: engine.RoleDecode, TimeScale: 20})
	if st, _, msg := local(stock, "c", prompt); st != 400 || !strings.Contains(msg, "Disaggregated request received without bootstrap room id") {
		t.Fatalf("stock decoder took do_local_prefill: %d %s", st, msg)
	}
}
