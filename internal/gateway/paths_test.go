package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
)

// turns replays a three-turn session through gw: each turn resends the
// conversation (prompt, the last answer, an append).
func turns(t *testing.T, gw, session string, n int) []answer {
	t.Helper()
	prompt := ids(7000, 1500)
	var out []answer
	for turn := 1; turn <= n; turn++ {
		a := generate(t, gw, map[string]any{"input_ids": prompt, "session_id": session, "sampling_params": map[string]any{"max_new_tokens": 8}})
		out = append(out, a)
		if a.status != http.StatusOK {
			return out
		}
		prompt = append(append(prompt, a.outputIDs...), ids(90000*turn, 200)...)
	}
	return out
}

// TestKVCOnEveryDecoderKind is the scenario: KVC on decoders as
// SGLang runs them. Every turn answers 200 on the best path the decoder
// allows, named in X-Pdhybrid-Mode; from turn 2 each reports cached tokens
// (the decoder's with the extension, local prefill or the decode radix
// cache; the prefill worker's radix cache on plain PD).
func TestKVCOnEveryDecoderKind(t *testing.T) {
	want := map[string][2]string{ // path → turn 1's mode, turn 2's mode
		PathExtension:    {"pd-router-turn1-seed", "kvcache-direct-to-d-session"},
		PathLocalPrefill: {"pd-router-turn1-seed-via-local-prefill", "kvcache-direct-to-d-session-via-local-prefill"},
		PathDeltaPD:      {"pd-router-turn1-seed-via-delta-pd", "pd-router-d-session-reseed-via-delta-pd"},
		PathPlainPD:      {"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-plain-pd"},
	}
	for _, k := range decoderKinds {
		t.Run(k.name, func(t *testing.T) {
			pEdit := emulatortest.Stock
			if k.path == PathExtension {
				pEdit = nil
			}
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, pEdit)
			d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, k.edit)
			gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Health.Interval = -1 })
			g.Discover(context.Background())
			as := turns(t, gw.URL, "s-"+k.name, 3)
			for i, a := range as {
				w := want[k.path][min(i, 1)]
				if a.status != http.StatusOK || a.mode != w || len(a.outputIDs) != 8 {
					t.Fatalf("turn %d: %+v, want 200 in mode %s", i+1, a, w)
				}
				if i > 0 && a.cached < 1500/64*64 {
					t.Fatalf("turn %d: %d tokens cached, want at least the first prompt's whole blocks (1472)", i+1, a.cached)
				}
			}
			fams := promtest.Scrape(t, gw.URL+"/metrics")
			if n := promtest.Value(fams, "pdhybrid_requests_total", map[string]string{"mode": want[k.path][1], "outcome": "ok"}); n != 2 {
				t.Fatalf("pdhybrid_requests_total{mode=%s, ok} = %v, want 2 (each request once)", want[k.path][1], n)
			}
		})
	}
}

// A decoder the gateway has not learnt yet (discovery off, no answer yet)
// gets the admission RPC; its 404 corrects the belief on the spot, and the
// turn goes on plain PD.
func TestStockDecoderBeforeDiscovery(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Health.Interval = -1 })
	g.locked(func() {
		for _, w := range g.workers {
			w.caps = Capabilities{} // unknown, whatever the start-up discovery found
		}
	})
	for i, a := range turns(t, gw.URL, "early", 2) {
		if a.status != http.StatusOK || !strings.HasSuffix(a.mode, "-via-plain-pd") {
			t.Fatalf("turn %d: %+v", i+1, a)
		}
	}
}

// A decoder whose capabilities were wrong (it lost conditional aggregation
// since the last round) refuses the local prefill with SGLang's 400 — or,
// streamed, with a 200 whose first event is the abort: the client does not
// see it, the request goes once more on delta PD, and the belief is
// corrected.
func TestProtocolRefusalRedispatches(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) { refusalRedispatches(t, stream) })
	}
}

func refusalRedispatches(t *testing.T, stream bool) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) { emulatortest.Stock(c); c.DecodeRadix = true })
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Health.Interval = -1 })
	g.Discover(context.Background())
	as := turns(t, gw.URL, "lied", 1)
	g.locked(func() {
		for _, w := range g.workers {
			if w.Role == roleDecode {
				w.caps.CondAgg = present // stale: it says local prefill
			}
		}
	})
	if g.Capabilities()[1].KVCPath != PathLocalPrefill {
		t.Fatalf("setup: %+v", g.Capabilities())
	}
	prompt := append(append(ids(7000, 1500), as[0].outputIDs...), ids(90000, 200)...)
	body := map[string]any{"input_ids": prompt, "session_id": "lied", "sampling_params": map[string]any{"max_new_tokens": 8}, "stream": stream}
	status, mode, raw := rawGenerate(t, gw.URL, body)
	if status != http.StatusOK || mode != "pd-router-d-session-reseed-via-delta-pd" {
		t.Fatalf("turn 2 after the refusal: %d in mode %q: %s", status, mode, raw)
	}
	if strings.Contains(raw, refusalText) || strings.Contains(raw, `"abort"`) || strings.Contains(raw, `"error"`) {
		t.Fatalf("the refusal reached the client: %s", raw)
	}
	if stream && !strings.HasSuffix(raw, "data: [DONE]\n\n") {
		t.Fatalf("the stream did not end with [DONE]: %s", raw)
	}
	if c := lastCached(t, raw); c < 1472 {
		t.Fatalf("turn 2 after the refusal: %d tokens cached, want at least 1472 (delta PD on the decode radix cache)", c)
	}
	if c := g.Capabilities()[1]; c.KVCPath != PathDeltaPD || c.Capabilities.CondAgg != absent {
		t.Fatalf("capabilities not corrected: %+v", c)
	}
	fams := promtest.Scrape(t, gw.URL+"/metrics")
	if n := promtest.Value(fams, "pdhybrid_retries_total", map[string]string{"worker": d.URL()}); n != 1 {
		t.Fatalf("retries on %s: %v, want 1", d.URL(), n)
	}
	var total float64
	for _, m := range fams["pdhybrid_requests_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if total != 2 {
		t.Fatalf("pdhybrid_requests_total sums to %v, want 2: each request once", total)
	}
}

// rawGenerate posts body and returns the status, the execution mode and
// the answer as the client read it.
func rawGenerate(t *testing.T, gw string, body map[string]any) (int, string, string) {
	t.Helper()
	j, _ := json.Marshal(body)
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-PDHybrid-Mode"), string(b)
}

// lastCached is cached_tokens of a JSON answer, or of a stream's last
// event.
func lastCached(t *testing.T, raw string) int {
	t.Helper()
	last := raw
	if strings.HasPrefix(raw, "data: ") {
		for _, ev := range strings.Split(raw, "\n\n") {
			if strings.HasPrefix(ev, "data: {") {
				last = ev[len("data: "):]
			}
		}
	}
	var out struct {
		MetaInfo struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal([]byte(last), &out); err != nil {
		t.Fatalf("answer %q: %v", last, err)
	}
	return out.MetaInfo.CachedTokens
}
