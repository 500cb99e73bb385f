package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The gateway waits out a refusing decoder's recommended_pause_ms before the
// fallback, capped (--backpressure-max-pause-ms), and labels the request
// -d-backpressure; with backpressure off it neither waits nor labels.
func TestGatewayBackpressurePause(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/session_cache/admit_direct_append" {
			// A decoder that refuses every admission and asks for 5 s.
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"can_admit":false,"mode":"none","reason":"queue","recommended_pause_ms":5000}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer busy.Close()
	for _, tc := range []struct {
		name     string
		edit     func(*kvc.DispatchConfig)
		min, max time.Duration
		mode     string
	}{
		{"cap 100 ms", func(c *kvc.DispatchConfig) { c.MaxPauseS = 0.1 }, 100 * time.Millisecond, 1500 * time.Millisecond, "pd-router-turn1-d-backpressure"},
		{"off", func(c *kvc.DispatchConfig) { c.NoBackpressure = true }, 0, time.Second, "pd-router-fallback-session-not-resident"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kvc.Defaults(kvc.MechKVC)
			tc.edit(&cfg)
			gw, _ := serve(t, Config{Prefill: []Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}}, Decode: []string{busy.URL},
				Health: HealthConfig{Interval: -1}, Dispatch: cfg})
			start := time.Now()
			a := generate(t, gw.URL, map[string]any{"input_ids": ids(1, 300), "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 4}})
			took := time.Since(start)
			if a.status != http.StatusOK || a.mode != tc.mode || len(a.outputIDs) != 4 {
				t.Fatalf("answer %+v, want 200 by plain PD labelled %s", a, tc.mode)
			}
			if took < tc.min || took > tc.max {
				t.Fatalf("the request took %v, want between %v and %v", took, tc.min, tc.max)
			}
		})
	}
}
