package emulator

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

func small(n int) map[string]any {
	return map[string]any{"input_ids": ids(n, 64), "sampling_params": map[string]any{"max_new_tokens": 2}}
}

// TestFaultErrorRate: all requests fail at rate 1; at rate 0.5 about half,
// the same ones on every run with the same seed.
func TestFaultErrorRate(t *testing.T) {
	s := start(t, Config{TimeScale: 1000, Faults: Faults{ErrorRate: 1}})
	st, b := post(t, s.URL()+"/generate", small(1))
	var e errorResponse
	if json.Unmarshal(b, &e); st != 500 || e.Code != 500 || !strings.Contains(e.Message, "fault injection") {
		t.Fatalf("%d %s", st, b)
	}
	pattern := func() string {
		s := start(t, Config{TimeScale: 1000, Faults: Faults{ErrorRate: 0.5, Seed: 7}})
		var sb strings.Builder
		for i := range 40 {
			st, _ := post(t, s.URL()+"/generate", small(i))
			sb.WriteByte("x."[min(st/500, 1)^1])
		}
		return sb.String()
	}
	a, b2 := pattern(), pattern()
	if a != b2 {
		t.Fatalf("not reproducible: %s vs %s", a, b2)
	}
	if n := strings.Count(a, "x"); n < 10 || n > 30 {
		t.Fatalf("%d of 40 failed at rate 0.5: %s", n, a)
	}
}

// TestFaultStall: a stalled worker takes the request only after the stall
// (fake clock: the answer comes when model time has moved by the stall plus
// the request's own time).
func TestFaultStall(t *testing.T) {
	clk := NewFakeClock()
	s := start(t, Config{Clock: clk, Faults: Faults{StallS: 2}})
	t0 := clk.Now()
	done := make(chan struct{})
	var b []byte
	go func() {
		defer close(done)
		_, b = post(t, s.URL()+"/generate", small(1))
	}()
	driveFake(t, clk, done, 10*time.Second)
	o := decodeOut(t, b)
	if el := clk.Now().Sub(t0).Seconds(); !near(el, 2+o.MetaInfo.E2ELatency, 1e-6) || o.MetaInfo.E2ELatency <= 0 {
		t.Fatalf("answered %.6f s after sending, e2e %.6f s; want the 2 s stall on top", el, o.MetaInfo.E2ELatency)
	}
}

// TestFaultCrashAfter: the worker serves N requests; the next crashes it
// (the hook; without one, the server dies: connections cut, port closed).
func TestFaultCrashAfter(t *testing.T) {
	var crashed atomic.Int32
	s := start(t, Config{TimeScale: 1000, Faults: Faults{CrashAfter: 2}, Crash: func() { crashed.Add(1) }})
	for i := range 2 {
		if st, b := post(t, s.URL()+"/generate", small(i)); st != 200 {
			t.Fatalf("request %d: %d %s", i, st, b)
		}
	}
	if crashed.Load() != 0 {
		t.Fatal("crashed early")
	}
	resp, err := client.Post(s.URL()+"/generate", "application/json", strings.NewReader(`{"input_ids":[1,2,3]}`))
	if err == nil {
		resp.Body.Close()
	}
	if crashed.Load() != 1 {
		t.Fatalf("crash hook ran %d times", crashed.Load())
	}
	// No hook: a long stream in flight is cut, and nothing listens after.
	k := start(t, Config{TimeScale: 1, Faults: Faults{CrashAfter: 1}})
	cut := make(chan error, 1)
	go func() {
		resp, err := client.Post(k.URL()+"/generate", "application/json", strings.NewReader(`{"input_ids":[1,2,3],"stream":true,"sampling_params":{"max_new_tokens":100000}}`))
		if err != nil {
			cut <- err
			return
		}
		cut <- readSSE(resp.Body, func(sseEvent) {})
		resp.Body.Close()
	}()
	waitFor(t, 5*time.Second, "the stream to run", func() bool { return loads(t, k)["num_running_reqs"].(float64) == 1 })
	if _, err := client.Post(k.URL()+"/generate", "application/json", strings.NewReader(`{"input_ids":[1]}`)); err == nil {
		t.Fatal("the crashing request got an answer")
	}
	select {
	case err := <-cut:
		if err == nil {
			t.Log("stream ended without an error (cut at an event boundary)")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream in flight was not cut")
	}
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(k.URL(), "http://"), time.Second)
	if err == nil {
		t.Fatal("the crashed worker still accepts connections")
	}
}

// TestFaultSlowTransfer: dividing P's link bandwidth stretches the exposed
// transfer in D's TTFT by that factor.
func TestFaultSlowTransfer(t *testing.T) {
	prof := testProfile(t)
	p := start(t, Config{Role: engine.RolePrefill, Link: "tcp-loopback", TimeScale: 2, Faults: Faults{SlowTransfer: 4}})
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 2})
	const in = 2000
	body := pdBody(p, "slow", 1, ids(1, in), 2)
	go postQuiet(t, p.URL()+"/generate", copyBody(body))
	st, b := post(t, d.URL()+"/generate", copyBody(body))
	if st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	l := prof.Links["tcp-loopback"]
	xfer := float64(in*prof.Model.KVBytesPerToken()) / l.BandwidthBytes
	want := prof.Timing.PrefillS(in, 0) + l.SetupS + 4*xfer
	got := *decodeOut(t, b).MetaInfo.Emulator.TTFT
	// At least the 4× slower transfer; less than a 6× one would give. The
	// wall clock adds whatever the machine's load does, so the upper bound
	// is the next distinguishable slowdown, not a tight tolerance.
	if got < want || got > want+2*xfer {
		t.Fatalf("TTFT %.4f s with a 4× slower link, model %.4f s (a 6× one: %.4f s)", got, want, want+2*xfer)
	}
}

// TestFaultRefuseAdmissions: a session-aware decoder refuses every
// admission with a reason of its own; a worker without the extension
// answers 404, as stock SGLang does.
func TestFaultRefuseAdmissions(t *testing.T) {
	d := start(t, Config{Role: engine.RoleDecode, Session: engine.SessionConfig{Enabled: true}, Faults: Faults{RefuseAdmissions: true}})
	st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "s", "input_ids": ids(1, 100)})
	var a AdmitResponse
	if json.Unmarshal(b, &a); st != 200 || a.CanAdmit || a.Reason != ReasonFaultInjected || a.Mode != "none" {
		t.Fatalf("%d %s", st, b)
	}
	c := start(t, Config{})
	if st, _ := post(t, c.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "s", "input_ids": []int{1}}); st != http.StatusNotFound {
		t.Fatalf("colocated worker: %d", st)
	}
}

func TestFaultConfigChecked(t *testing.T) {
	for _, f := range []Faults{{ErrorRate: 1.5}, {ErrorRate: -0.1}, {StallS: -1}, {CrashAfter: -1}, {SlowTransfer: 0.5}} {
		if _, err := New(Config{Profile: testProfile(t), Faults: f}); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}
