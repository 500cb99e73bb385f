package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// A round of health checks asks every worker at once. Six workers accept
// connections and never answer, so each check of them times out after
// 200 ms: all six are out of service after one round (about 0.2 s), not
// after six timeouts one after the other (1.2 s), and the healthy worker
// stays in service.
func TestHealthChecksRunTogether(t *testing.T) {
	var hung []string
	release := make(chan struct{})
	for range 6 {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(ts.Close)
		hung = append(hung, ts.URL)
	}
	// Cleanups run last first: the handlers are let go before the servers close.
	t.Cleanup(func() { close(release) })
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) // answers 200
	t.Cleanup(ok.Close)
	_, g := serve(t, Config{Dispatch: kvc.Defaults(kvc.MechColo), Colo: append([]string{ok.URL}, hung...),
		Health: HealthConfig{Interval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond, Failures: 1}, Ops: Ops{LoadPoll: -1}})
	start := time.Now()
	for {
		down, okDown := 0, false
		g.locked(func() {
			for i := 1; i <= len(hung); i++ {
				if g.disp.Down(kvc.RoleDecode, i) {
					down++
				}
			}
			okDown = g.disp.Down(kvc.RoleDecode, 0)
		})
		if okDown {
			t.Fatal("the healthy worker was taken out of service")
		}
		if down == len(hung) {
			t.Logf("all %d hung workers out of service after %v", down, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > 900*time.Millisecond {
			t.Fatalf("%d of %d hung workers out of service after %v: the checks ran one after the other", down, len(hung), time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
