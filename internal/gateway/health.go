package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// HealthConfig sets up active health checks: every Interval the gateway
// asks each worker's /health; Failures answers in a row that are not 200
// (or none within Timeout) take the worker out of service — the dispatcher
// passes it over — and one 200 puts it back and closes its breaker. This
// is what routes around a dead worker and brings it back without waiting
// for a request to fail on it (the passive breaker, fed by failed calls,
// is the other half).
type HealthConfig struct {
	Interval time.Duration // 0 takes 2 s; negative: no health checks
	Timeout  time.Duration // 0 takes 2 s (a dead worker refuses at once; a slow one is not dead)
	Failures int           // 0 takes 3
}

// timeout is one check's bound (also discovery's, capabilities.go).
func (h *HealthConfig) timeout() time.Duration {
	if h.Timeout <= 0 {
		return 2 * time.Second
	}
	return h.Timeout
}

func (h *HealthConfig) defaults() {
	if h.Interval == 0 {
		h.Interval = 2 * time.Second
	}
	if h.Timeout <= 0 {
		h.Timeout = 2 * time.Second
	}
	if h.Failures <= 0 {
		h.Failures = 3
	}
}

// healthLoop runs until stop is closed. It reads the worker table each
// round, so workers added at run time are checked too and removed ones are
// not. A round asks every worker at once: one after the other, each hung
// worker added a Timeout to the round, and a pool with several down took
// several times Failures × Timeout to notice them.
func (s *Server) healthLoop(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	fails := map[*workerInfo]int{}
	tick := time.NewTicker(s.cfg.Health.Interval)
	defer tick.Stop()
	s.Discover(ctx) // the capabilities, at once (capabilities.go)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var ws []*workerInfo
		s.locked(func() {
			for _, w := range s.workers {
				if !w.removed {
					ws = append(ws, w)
				}
			}
		})
		oks := make([]bool, len(ws))
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				oks[i] = s.healthy(ctx, w.URL)
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
		for i, w := range ws {
			s.noteHealth(w, oks[i], fails)
		}
		// Capabilities change when a worker restarts with other flags;
		// learn them again every round.
		s.Discover(ctx)
	}
}

// healthy is one GET /health.
func (s *Server) healthy(ctx context.Context, base string) bool {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Health.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// noteHealth takes a worker out of service after Failures bad checks in a
// row and puts it back (its breaker closed) on a good one.
func (s *Server) noteHealth(w *workerInfo, ok bool, fails map[*workerInfo]int) {
	if ok {
		fails[w] = 0
	} else {
		fails[w]++
	}
	role := kvc.RoleDecode
	if w.Role == rolePrefill {
		role = kvc.RolePrefill
	}
	s.locked(func() {
		switch down := s.disp.Down(role, w.idx); {
		case ok && down:
			s.log.Info("worker up", "role", w.Role, "worker", w.URL)
			// Back in service; its transfer breaker, if open, closes only
			// on its half-open probe's landed transfer (kvc/breaker.go):
			// a worker that answers /health may still lose KV on the way.
			s.disp.SetDown(role, w.idx, false)
		case !ok && !down && fails[w] >= s.cfg.Health.Failures:
			s.log.Warn("worker down", "role", w.Role, "worker", w.URL, "failed_checks", fails[w])
			s.disp.SetDown(role, w.idx, true)
		}
	})
}

// decoderAt is decoder d's URL (held lock): the colocated pool's under
// pd-colo.
func (s *Server) decoderAt(d int) string {
	pool := s.cfg.Decode
	if s.cfg.Dispatch.Mechanism == kvc.MechColo {
		pool = s.cfg.Colo
	}
	if d < 0 || d >= len(pool) {
		return ""
	}
	return pool[d]
}

// prefillRefused takes prefill worker p out of service at once when it
// refused a connection (its process is gone): the requests behind this one
// are not sent to it while the health checks count their Failures, and
// KVC v3 prefills on the decoders meanwhile (kvc.Dispatcher's v3NoP). Its
// next good health check puts it back, so this is done only while the
// health checks run.
func (s *Server) prefillRefused(p int, url string, err error) {
	var op *net.OpError
	if s.cfg.Health.Interval <= 0 || !errors.As(err, &op) || op.Op != "dial" {
		return
	}
	s.locked(func() {
		if !s.disp.Down(kvc.RolePrefill, p) {
			s.log.Warn("worker down", "role", rolePrefill, "worker", url, "cause", "connection refused")
			s.disp.SetDown(kvc.RolePrefill, p, true)
		}
	})
}
