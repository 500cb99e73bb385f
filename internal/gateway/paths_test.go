package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	// The admission RPC's 404 corrected the belief: no extension there, so
	// later requests do not ask it again.
	g.locked(func() {
		for _, w := range g.workers {
			if w.Role == roleDecode && w.caps.SessionCache != absent {
				t.Errorf("decoder's session cache %v after its admission 404, want absent", w.caps.SessionCache)
			}
		}
	})
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

// refused knows SGLang's two streamed shapes of the refusal — the
// scheduler's abort as the first event's finish_reason (the emulator's),
// and http_server's {"error": {"message"}} event — and leaves any other
// stream as it came, for the relay.
func TestStreamedRefusalShapes(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	_, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Health.Interval = -1 })
	abort := `Invalid request: Disaggregated request received without bootstrap room id. req.rid='x'`
	for name, c := range map[string]struct {
		body    string
		refusal bool
	}{
		"finish-reason abort": {`data: {"text":"","meta_info":{"finish_reason":{"type":"abort","message":"` + abort + `","status_code":400}}}` + "\n\ndata: [DONE]\n\n", true},
		"error event":         {`data: {"error":{"message":"` + abort + `"}}` + "\n\ndata: [DONE]\n\n", true},
		"tokens":              {`data: {"text":"abcd","output_ids":[1]}` + "\n\n" + `data: {"text":"abcdefgh","output_ids":[1,2]}` + "\n\ndata: [DONE]\n\n", false},
	} {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(c.body))}
		q := &request{stream: true}
		if got := g.refused(q, resp, 0, -1); got != c.refusal {
			t.Errorf("%s: refused %t, want %t", name, got, c.refusal)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != c.body {
			t.Errorf("%s: the relay reads %q, want the stream as it came", name, b)
		}
	}
}

// The D→P snapshot sync asks only workers that offer its RPCs: stock
// SGLang's are skipped (not-offered), the extension's are asked.
func TestSnapshotOffered(t *testing.T) {
	for _, c := range []struct {
		name   string
		pEdit  func(*emulator.Config)
		dEdit  func(*emulator.Config)
		offers bool
	}{
		{"stock", emulatortest.Stock, emulatortest.Stock, false},
		{"stock decoder", nil, emulatortest.Stock, false},
		{"stock prefill", emulatortest.Stock, func(c *emulator.Config) { c.Session = engine.SessionConfig{Enabled: true} }, false},
		{"extended", nil, func(c *emulator.Config) { c.Session = engine.SessionConfig{Enabled: true} }, true},
	} {
		p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, c.pEdit)
		d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, c.dEdit)
		_, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Health.Interval = -1 })
		g.Discover(context.Background())
		if got := g.snapshotOffered(0, 0); got != c.offers {
			t.Errorf("%s: snapshot sync offered %t, want %t (%+v)", c.name, got, c.offers, g.Capabilities())
		}
	}
}

// TestStockDecodersSpreadSharedPrompt: new sessions sharing a system
// prompt go to all three stock decoders, not all to the first: a decoder
// that keeps nothing is credited with no prefix (kvc.WorkerCaps.KeepsOnD),
// so the shared prompt pulls no session to it. Each session's next turn
// still goes to its own decoder (session-affine plain PD).
func TestStockDecodersSpreadSharedPrompt(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	ds := []*emulator.Server{worker(t, engine.RoleDecode, false), worker(t, engine.RoleDecode, false), worker(t, engine.RoleDecode, false)}
	gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, ds, nil)
	home, on := map[int]string{}, map[string]int{}
	for turn := range 2 {
		for i := range 6 {
			in := append(ids(1, 640), ids(10000*(i+1), 128+64*turn)...)
			a := generate(t, gw.URL, map[string]any{"input_ids": in, "session_id": fmt.Sprint("s", i),
				"sampling_params": map[string]any{"max_new_tokens": 2}})
			if a.status != http.StatusOK || !strings.HasSuffix(a.mode, "-via-plain-pd") {
				t.Fatalf("turn %d, session %d: %+v", turn+1, i, a)
			}
			if turn == 0 {
				home[i] = a.worker
				on[a.worker]++
			} else if a.worker != home[i] {
				t.Errorf("session %d moved from %s to %s", i, home[i], a.worker)
			}
		}
	}
	if len(on) != 3 {
		t.Errorf("new sessions on %v, want them on all three decoders", on)
	}
}
