package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// --home-holds live: the session's decoder refuses one admission (no
// space). With the retry chain (the default) the turn seeds the other
// decoder, which becomes the session's home; with HomeHolds the turn goes
// plain PD and the next turn goes direct to the first decoder again.
func TestGatewayHomeHolds(t *testing.T) {
	for _, holds := range []bool{false, true} {
		p := worker(t, engine.RolePrefill, false)
		d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
		emulatortest.WaitHealthy(t, p.URL(), d0.URL(), d1.URL())
		var mu sync.Mutex
		refuse := map[string]bool{} // proxy URL → refuse its next admission
		proxy := func(base string) *httptest.Server {
			target, _ := url.Parse(base)
			rp := httputil.NewSingleHostReverseProxy(target)
			var ts *httptest.Server
			ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				no := r.URL.Path == "/session_cache/admit_direct_append" && refuse[ts.URL]
				refuse[ts.URL] = refuse[ts.URL] && !no
				mu.Unlock()
				if no {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"can_admit": false, "mode": "", "reason": "no-space", "recommended_pause_ms": 0}`))
					return
				}
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			return ts
		}
		x0, x1 := proxy(d0.URL()), proxy(d1.URL())
		cfg := Config{Dispatch: kvc.Defaults(kvc.MechKVC), Prefill: []Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}},
			Decode: []string{x0.URL, x1.URL}, Health: HealthConfig{Interval: -1}}
		cfg.Dispatch.HomeHolds = holds
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		gw := serveGateway(g)
		prompt := ids(1000, 2000)
		turn := func(n int) answer {
			if n > 1 {
				prompt = append(prompt, ids(50000*n, 300)...)
			}
			return generate(t, gw.URL, map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 8}})
		}
		a := turn(1)
		if a.status != http.StatusOK || a.mode != "pd-router-turn1-seed" {
			t.Fatalf("holds %v, turn 1: %+v", holds, a)
		}
		home := a.worker
		prompt = append(prompt, a.outputIDs...)
		mu.Lock()
		refuse[home] = true
		mu.Unlock()
		a = turn(2)
		other := x0.URL
		if home == x0.URL {
			other = x1.URL
		}
		switch {
		case a.status != http.StatusOK:
			t.Fatalf("holds %v, turn 2: %+v", holds, a)
		case !holds && (a.worker != other || a.mode != "pd-router-other-large-append-reseed"):
			t.Fatalf("retry chain, turn 2 refused by its decoder: %+v, want it reseeded on %s", a, other)
		case holds && a.mode != "pd-router-fallback-other-large-append-no-d-capacity":
			t.Fatalf("home holds, turn 2 refused by its decoder: %+v, want plain PD", a)
		}
		prompt = append(prompt, a.outputIDs...)
		want := home
		if !holds {
			want = other
		}
		if a = turn(3); a.status != http.StatusOK || a.mode != "kvcache-direct-to-d-session" || a.worker != want {
			t.Fatalf("holds %v, turn 3: %+v, want a direct append on %s", holds, a, want)
		}
		gw.Close()
		g.Close()
	}
}
