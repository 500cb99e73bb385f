package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// metric reads one sample of a worker's /metrics (SGLang's names), 0 when
// absent.
func metric(t testing.TB, url, name string) float64 {
	t.Helper()
	return value(scrape(t, url), name, nil)
}

// settled waits (bounded) until a worker has nothing running or queued.
func settled(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if metric(t, url, "sglang:num_running_reqs")+metric(t, url, "sglang:num_queue_reqs")+
			metric(t, url, "sglang:num_decode_prealloc_queue_reqs")+metric(t, url, "sglang:num_decode_transfer_queue_reqs") == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds requests", url)
		}
	}
}

// A prefill worker that is down fails the PD request with its cause at
// once, and the decoder, which had pre-allocated for the room, is told to
// abort it rather than left waiting out its bootstrap timeout (15 s of wall
// time here: the client's 10 s limit would be hit first).
func TestGatewayDeadPrefillAbortsDecode(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	gw := gateway(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d})
	p.Kill()
	j, _ := json.Marshal(map[string]any{"input_ids": ids(1, 300), "sampling_params": map[string]any{"max_new_tokens": 4}})
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(gw.URL+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatalf("the request hung on a dead prefill worker: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	host := strings.TrimPrefix(p.URL(), "http://")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "prefill-failed") || !strings.Contains(string(b), "prefill 0") || strings.Contains(string(b), host) {
		t.Fatalf("status %d body %s, want 503 naming the prefill worker by role, not by its address", resp.StatusCode, b)
	}
	// The gateway told D to drop the room, and D holds nothing within the
	// settle bound, far short of the bootstrap timeout. Whether D counts
	// an abort depends on the race: the abort can find the room, find it
	// already failed by D's own refused KV fetch, or arrive before it.
	if n := value(scrape(t, gw.URL), "pdhybrid_aborts_total", map[string]string{"reason": abortOtherLeg, "worker": d.URL()}); n < 1 {
		t.Fatalf("the gateway sent %v other-leg aborts to %s, want the decoder's room aborted", n, d.URL())
	}
	settled(t, d.URL())
}

// A client that disconnects mid-stream gets both legs aborted: the decoder
// stops generating for it and counts the abort.
func TestGatewayClientDisconnectAbortsLegs(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	gw := gateway(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, _ := json.Marshal(map[string]any{"input_ids": ids(1, 300), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 4000}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/generate", bytes.NewReader(j))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel() // the first token arrived; the client goes away
	resp.Body.Close()
	settled(t, d.URL())
	if n := metric(t, d.URL(), "sglang:num_aborted_requests_total"); n != 1 {
		t.Fatalf("decode worker counted %v aborts, want 1", n)
	}
	if n := metric(t, d.URL(), "sglang:generation_tokens_total"); n >= 4000 {
		t.Fatalf("decode worker generated %v tokens for a client that left", n)
	}
}

// A decoder killed mid-stream: its streams end with an error frame naming
// it, the other decoder's complete, nothing is lost or counted twice; the
// health checks take it out of service (every new request goes to the
// other decoder), and a worker restarted at its address is used again.
func TestGatewayDecoderKilledMidStream(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, false), worker(t, engine.RoleDecode, false)
	gw := gatewayWith(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d0, d1}, func(c *Config) {
		c.Health = HealthConfig{Interval: 40 * time.Millisecond, Failures: 1}
	})
	type result struct {
		worker     string
		done, errd bool
	}
	const n = 4
	results := make(chan result, n)
	started := make(chan string, n)
	for i := range n {
		go func() {
			j, _ := json.Marshal(map[string]any{"input_ids": ids(1000*i, 200), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 20000}})
			resp, err := http.Post(gw.URL+"/generate", "application/json", bytes.NewReader(j))
			if err != nil {
				started <- ""
				results <- result{}
				return
			}
			defer resp.Body.Close()
			r := result{worker: resp.Header.Get("X-PDHybrid-Worker")}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			first := true
			for sc.Scan() {
				if first && strings.HasPrefix(sc.Text(), "data: ") {
					started <- r.worker
					first = false
				}
				r.done = r.done || sc.Text() == "data: [DONE]"
				r.errd = r.errd || strings.HasPrefix(sc.Text(), `data: {"error"`) && !strings.Contains(sc.Text(), "127.0.0.1")
			}
			if first {
				started <- r.worker
			}
			results <- r
		}()
	}
	on := map[string]int{}
	for range n {
		on[<-started]++
	}
	if on[d0.URL()] == 0 || on[d1.URL()] == 0 {
		t.Fatalf("streams per decoder %v: the test needs some on each", on)
	}
	addr := strings.TrimPrefix(d0.URL(), "http://")
	d0.Kill()
	cut := 0
	for range n {
		r := <-results
		switch {
		case r.errd == r.done:
			t.Errorf("a stream ended with %t errors and %t [DONE]: want exactly one terminal event (%+v)", r.errd, r.done, r)
		case r.worker == d1.URL() && !r.done:
			t.Errorf("a stream on the healthy decoder did not complete (%+v)", r)
		case r.worker == d0.URL() && r.errd:
			cut++
		}
	}
	// A stream on d0 may have finished before the kill on a loaded
	// machine (then it ended in [DONE], checked above); 20,000 tokens
	// make that rare, and at least one must have been cut by it.
	if cut == 0 {
		t.Errorf("no stream on the killed decoder ended in its error frame")
	}
	// Out of service: every new request goes to d1.
	time.Sleep(200 * time.Millisecond) // a few health-check intervals
	for i := range 3 {
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(7000*i, 100), "sampling_params": map[string]any{"max_new_tokens": 2}}); a.status != http.StatusOK || a.worker != d1.URL() {
			t.Fatalf("with d0 down, request %d: %+v", i, a)
		}
	}
	// Back: a worker restarted at d0's address gets requests again.
	emulatortest.StartAt(t, addr, engine.RoleDecode, false, emulator.Faults{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := generate(t, gw.URL, map[string]any{"input_ids": ids(9000, 100), "sampling_params": map[string]any{"max_new_tokens": 2}})
		if a.status == http.StatusOK && a.worker == d0.URL() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted decoder was never used again (last answer %+v)", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An admission RPC that stalls times out into the fallback path: the
// request is served by plain PD well before the stall ends, and the stall
// is not counted as the session's reject of that decoder.
func TestGatewayStalledAdmissionFallsBack(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/session_cache/admit_direct_append" {
			select { // a decoder whose admission path hangs
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer stalled.Close()
	gw, g := serve(t, Config{Prefill: []Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}}, Decode: []string{stalled.URL},
		AdmissionTimeout: 100 * time.Millisecond, Health: HealthConfig{Interval: -1},
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechKVC, Policy: kvc.PolicyKVAware, TauReject: 1, TauAppend: 8192,
			MaxRetries: -1, SeedMinTurn: 1, Gate: kvc.GateWorker, Reset: kvc.ResetDirect, Belief: kvc.BeliefTrack}})
	start := time.Now()
	a := generate(t, gw.URL, map[string]any{"input_ids": ids(1, 300), "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 4}})
	if a.status != http.StatusOK || !strings.HasPrefix(a.mode, "pd-router-") || len(a.outputIDs) != 4 {
		t.Fatalf("stalled admission: %+v, want a plain-PD answer", a)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatal("the request waited out the stalled admission")
	}
	var rej int
	g.locked(func() { rej = g.disp.Rejects("s", 0) })
	if rej != 0 {
		t.Fatalf("the stall counted %d rejects of the decoder for the session (τ_reject 1 would blacklist it)", rej)
	}
}

// A transfer that fails opens the decoder's breaker — the retry and the
// requests during its cooldown go to the other decoder — but does not
// blacklist it for good: after the cooldown a probe goes to it, succeeds
// and closes the breaker.
func TestGatewayTransferFailureDoesNotBlacklistForGood(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, false), worker(t, engine.RoleDecode, false)
	target, _ := url.Parse(p.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	failed := false
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate" && !failed {
			failed = true // the first KV transfer fails
			http.Error(w, `{"error":"KV transfer failed: timed out after 300 s"}`, http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	gw, _ := serve(t, Config{Prefill: []Prefill{{URL: flaky.URL, BootstrapPort: p.BootstrapPort()}}, Decode: []string{d0.URL(), d1.URL()},
		Health: HealthConfig{Interval: -1},
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechPD, Policy: kvc.PolicyKVAware,
			Breaker: kvc.BreakerConfig{Failures: 1, WindowS: 60, CooldownS: 0.3}}})
	ask := func(i int) answer {
		return generate(t, gw.URL, map[string]any{"input_ids": ids(100*i, 200), "sampling_params": map[string]any{"max_new_tokens": 2}})
	}
	if a := ask(1); a.status != http.StatusOK || a.worker != d1.URL() {
		t.Fatalf("the request whose transfer to d0 (%s) failed: %+v, want it retried on d1 (%s)", d0.URL(), a, d1.URL())
	}
	if a := ask(2); a.worker != d1.URL() {
		t.Fatalf("during d0's cooldown: %+v, want d1", a)
	}
	time.Sleep(400 * time.Millisecond)
	if a := ask(3); a.status != http.StatusOK || a.worker != d0.URL() {
		t.Fatalf("after the cooldown: %+v, want the probe on d0", a)
	}
	if a := ask(4); a.worker != d0.URL() {
		t.Fatalf("after a good probe: %+v, want d0 (its breaker closed, the tie break)", a)
	}
}
