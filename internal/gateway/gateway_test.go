package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Live-stack tests: real emulated SGLang workers on loopback (the engine
// model on the wall clock, 20× faster than real time) behind the gateway,
// driven over HTTP. Every server started is stopped at the end.

func worker(t *testing.T, role engine.Role, session bool) *emulator.Server {
	t.Helper()
	return emulatortest.Start(t, role, session, emulator.Faults{})
}

func workerWith(t *testing.T, role engine.Role, faults emulator.Faults) *emulator.Server {
	t.Helper()
	return emulatortest.Start(t, role, false, faults)
}

func gateway(t *testing.T, mech kvc.Mechanism, prefill []*emulator.Server, decode []*emulator.Server) *httptest.Server {
	t.Helper()
	return gatewayWith(t, mech, prefill, decode, nil)
}

// gatewayWith is gateway with edit applied to the configuration first.
func gatewayWith(t *testing.T, mech kvc.Mechanism, prefill, decode []*emulator.Server, edit func(*Config)) *httptest.Server {
	t.Helper()
	ts, _ := gatewayServer(t, mech, prefill, decode, edit)
	return ts
}

// gatewayServer is gatewayWith that also returns the gateway itself.
func gatewayServer(t *testing.T, mech kvc.Mechanism, prefill, decode []*emulator.Server, edit func(*Config)) (*httptest.Server, *Server) {
	t.Helper()
	cfg := Config{Dispatch: kvc.Defaults(mech)}
	var urls []string
	for _, p := range prefill {
		cfg.Prefill = append(cfg.Prefill, Prefill{URL: p.URL(), BootstrapPort: p.BootstrapPort()})
		urls = append(urls, p.URL())
	}
	for _, d := range decode {
		if mech == kvc.MechColo {
			cfg.Colo = append(cfg.Colo, d.URL())
		} else {
			cfg.Decode = append(cfg.Decode, d.URL())
		}
		urls = append(urls, d.URL())
	}
	emulatortest.WaitHealthy(t, urls...)
	if edit != nil {
		edit(&cfg)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard // the gateway's log lines: tests that read them set their own
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts := serveGateway(g)
	t.Cleanup(ts.Close)
	return ts, g
}

type answer struct {
	status    int
	mode      string
	worker    string
	outputIDs []int
	cached    int
	events    int
	done      bool // the stream ended with data: [DONE]
}

func generate(t *testing.T, gw string, body map[string]any) answer {
	t.Helper()
	j, _ := json.Marshal(body)
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, mode: resp.Header.Get("X-PDHybrid-Mode"), worker: resp.Header.Get("X-PDHybrid-Worker")}
	var out struct {
		OutputIDs []int `json:"output_ids"`
		MetaInfo  struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Text()
			if line == "data: [DONE]" {
				a.done = true
			}
			if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
				continue
			}
			a.events++
			if err := json.Unmarshal([]byte(line[len("data: "):]), &out); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		if a.status == http.StatusOK {
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("answer %s: %v", b, err)
			}
		}
	}
	a.outputIDs, a.cached = out.OutputIDs, out.MetaInfo.CachedTokens
	return a
}

func ids(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// A session through the KVC mechanism: turn 1 is seeded through P, turns 2
// and 3 go direct to the decoder that holds the session and find their
// previous prompt (and output) in its cache; the third turn is streamed.
func TestGatewayKVCSession(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw := gateway(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})

	prompt := ids(1000, 2000)
	a := generate(t, gw.URL, map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 16}})
	if a.status != http.StatusOK || a.mode != "pd-router-turn1-seed" || len(a.outputIDs) != 16 {
		t.Fatalf("turn 1: %+v", a)
	}
	home := a.worker
	for turn := 2; turn <= 3; turn++ {
		prompt = append(append(prompt, a.outputIDs...), ids(50000*turn, 300)...)
		body := map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 16}}
		if turn == 3 {
			body["stream"] = true
		}
		a = generate(t, gw.URL, body)
		if a.status != http.StatusOK || a.mode != "kvcache-direct-to-d-session" || a.worker != home {
			t.Fatalf("turn %d: %+v, want a direct append on %s", turn, a, home)
		}
		if a.cached < len(prompt)-300-64 {
			t.Fatalf("turn %d: %d of %d tokens cached on the decoder, want all but the append", turn, a.cached, len(prompt))
		}
		// A short decode may reach the client as one event (the worker
		// sends what was generated since its last write); the stream must
		// still carry every token and end with [DONE].
		if turn == 3 && (a.events < 1 || !a.done || len(a.outputIDs) != 16) {
			t.Fatalf("turn 3 streamed %d events, %d tokens, [DONE] %v", a.events, len(a.outputIDs), a.done)
		}
	}
}

// Naive PD: both legs, the same body, the cached tokens P reports; DP: one
// colocated worker.
func TestGatewayPDAndColo(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	gw := gateway(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d})
	prompt := ids(7, 1000)
	for i := range 2 {
		a := generate(t, gw.URL, map[string]any{"input_ids": prompt, "sampling_params": map[string]any{"max_new_tokens": 8}})
		if a.status != http.StatusOK || a.mode != "pd-disaggregation-router" || len(a.outputIDs) != 8 {
			t.Fatalf("PD request %d: %+v", i, a)
		}
		if i == 1 && a.cached < 960 {
			t.Fatalf("second PD request reports %d cached tokens, want P's prefix hit (≥ 960)", a.cached)
		}
	}
	c0, c1 := worker(t, engine.RoleColocated, false), worker(t, engine.RoleColocated, false)
	gwc := gateway(t, kvc.MechColo, nil, []*emulator.Server{c0, c1})
	a := generate(t, gwc.URL, map[string]any{"text": strings.Repeat("hello world ", 200), "stream": true})
	// A loaded machine may deliver the whole answer as one event: the
	// stream must carry every token (128 by default) and end with [DONE].
	if a.status != http.StatusOK || a.mode != "dp-colo-router" || a.events < 1 || !a.done || len(a.outputIDs) != 128 {
		t.Fatalf("colocated: %+v", a)
	}
}

// A decoder that cannot be reached fails the request with its cause (and
// the prefill leg is aborted), never silently.
func TestGatewayDeadDecoder(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	gw := gateway(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d})
	d.Kill()
	j, _ := json.Marshal(map[string]any{"input_ids": ids(1, 100), "sampling_params": map[string]any{"max_new_tokens": 4}})
	resp, err := http.Post(gw.URL+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "decode-unreachable") {
		t.Fatalf("status %d body %s, want 503 naming the unreachable decoder", resp.StatusCode, b)
	}
}

// A worker answering 500 is retried with a fresh dispatch: with one of two
// colocated workers failing every request, every request still succeeds.
func TestGatewayRetriesOnWorkerErrors(t *testing.T) {
	bad := workerWith(t, engine.RoleColocated, emulator.Faults{ErrorRate: 1, Seed: 1})
	good := worker(t, engine.RoleColocated, false)
	gw := gateway(t, kvc.MechColo, nil, []*emulator.Server{bad, good})
	for i := range 4 {
		a := generate(t, gw.URL, map[string]any{"input_ids": ids(100*i, 200), "sampling_params": map[string]any{"max_new_tokens": 4}})
		if a.status != http.StatusOK || a.worker != good.URL() || len(a.outputIDs) != 4 {
			t.Fatalf("request %d: %+v, want it answered by the healthy worker", i, a)
		}
	}
}
