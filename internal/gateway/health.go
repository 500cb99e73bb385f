package gateway

import (
	"context"
	"net/http"
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
	Timeout  time.Duration // 0 takes 1 s
	Failures int           // 0 takes 2
}

func (h *HealthConfig) defaults() {
	if h.Interval == 0 {
		h.Interval = 2 * time.Second
	}
	if h.Timeout <= 0 {
		h.Timeout = time.Second
	}
	if h.Failures <= 0 {
		h.Failures = 2
	}
}

// checked is one worker the health loop watches.
type checked struct {
	role  kvc.Role
	index int
	url   string
	fails int
}

// healthLoop runs until ctx ends.
func (s *Server) healthLoop(ctx context.Context) {
	var ws []*checked
	for i, p := range s.cfg.Prefill {
		ws = append(ws, &checked{role: kvc.RolePrefill, index: i, url: p.URL})
	}
	pool := s.cfg.Decode
	if s.cfg.Dispatch.Mechanism == kvc.MechColo {
		pool = s.cfg.Colo
	}
	for i, u := range pool {
		ws = append(ws, &checked{role: kvc.RoleDecode, index: i, url: u})
	}
	tick := time.NewTicker(s.cfg.Health.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, w := range ws {
			s.checkOnce(ctx, w)
		}
	}
}

func (s *Server) checkOnce(ctx context.Context, w *checked) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Health.Timeout)
	defer cancel()
	ok := false
	if req, err := http.NewRequestWithContext(cctx, http.MethodGet, w.url+"/health", nil); err == nil {
		if resp, err := s.cfg.Client.Do(req); err == nil {
			ok = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	if ctx.Err() != nil {
		return
	}
	if ok {
		w.fails = 0
	} else {
		w.fails++
	}
	s.locked(func() {
		switch down := s.disp.Down(w.role, w.index); {
		case ok && down:
			s.disp.SetDown(w.role, w.index, false)
			if w.role == kvc.RoleDecode {
				s.disp.PeerOK(w.index) // healthy again: its breaker closes too
			}
		case !ok && !down && w.fails >= s.cfg.Health.Failures:
			s.disp.SetDown(w.role, w.index, true)
		}
	})
}
