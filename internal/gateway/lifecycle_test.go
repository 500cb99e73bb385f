package gateway

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Bug 5 (issue 20): the gateway counted a request's prefill until its
// whole answer ended, where the simulator ends it when the KV lands or the
// first token comes, so v3's placement compared different quantities live
// and simulated (PrefillQueued().p[0] 3,000 instead of 0 after the first
// token). Once the first event of a long stream is in, neither the prefill
// worker's nor the decoder's queue counts the request: a seed through P
// (no stall budget), and a seed placed on the decoder (v3's local seed).
func TestPrefillEndsAtFirstToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int
		mode   string
	}{{"through P", 0, "pd-router-turn1-seed"}, {"local on D", 131072, kvc.ModeLocalSeed}} {
		t.Run(tc.name, func(t *testing.T) {
			p := worker(t, engine.RolePrefill, false)
			d := worker(t, engine.RoleDecode, true)
			gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
				c.Dispatch.V3 = kvc.V3Config{DBudgetTokens: tc.budget, ColdRoute: true}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := streamStart(t, ctx, gw.URL, map[string]any{"input_ids": ids(1000, 3000), "session_id": "s", "stream": true,
				"sampling_params": map[string]any{"max_new_tokens": 3000}})
			defer resp.Body.Close()
			if m := resp.Header.Get("X-PDHybrid-Mode"); m != tc.mode {
				t.Fatalf("mode %s, want %s", m, tc.mode)
			}
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(line, "data: {") {
					break // the first token
				}
			}
			var pq, dq []int
			srv.locked(func() { pq, dq = srv.disp.PrefillQueued() })
			if pq[0] != 0 || dq[0] != 0 {
				t.Fatalf("after the first token: %d prefill tokens queued on P, %d on D; want 0 (the prefill is over)", pq[0], dq[0])
			}
		})
	}
}

// Also found (issue 20): single() counted a direct append's or a
// colocated worker's error against the decoder's transfer breaker, though
// nothing crossed the P→D transport. A direct append whose decoder drops
// the connection fails the request (503) and leaves the breaker (one
// failure opens it here) closed.
func TestDirectAppendErrorIsNoTransportFailure(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate" && calls.Add(1) == 2 { // turn 2's direct append
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	cfg := kvc.Defaults(kvc.MechKVC)
	cfg.Breaker = kvc.BreakerConfig{Failures: 1, WindowS: 600, CooldownS: 600}
	gw, srv := serve(t, Config{Prefill: []Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}}, Decode: []string{flaky.URL},
		Health: HealthConfig{Interval: -1}, Dispatch: cfg})
	t1 := ids(1000, 3000)
	a := generate(t, gw.URL, map[string]any{"input_ids": t1, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 8}})
	b := generate(t, gw.URL, map[string]any{"input_ids": append(append(t1, a.outputIDs...), ids(5000, 300)...), "session_id": "s",
		"sampling_params": map[string]any{"max_new_tokens": 8}})
	if a.status != http.StatusOK || b.status != http.StatusServiceUnavailable {
		t.Fatalf("answers %+v %+v", a, b)
	}
	var open bool
	srv.locked(func() { open = srv.disp.BreakerOpen(srv.now(), 0) })
	if open {
		t.Fatal("a direct append's dropped connection opened the decoder's transfer breaker")
	}
}
