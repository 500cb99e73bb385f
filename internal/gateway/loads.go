package gateway

// The load poller: every Config.LoadPoll it asks each worker in the pool for
// its load — SGLang's GET /v1/loads?include=core (entrypoints/v1_loads.py;
// internal/emulator serves the same shape), else the older GET /get_load —
// and keeps what it said as the pdhybrid_worker_* gauges and in
// /admin/workers. SGLang reports no session count; the emulated KVC
// decoder adds num_resident_sessions to its loads (an extension), kept as
// pdhybrid_worker_reported_sessions beside the gateway's own belief
// (pdhybrid_worker_sessions).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// workerLoad is one worker's last load report, summed over its DP ranks.
type workerLoad struct {
	OK         bool      `json:"ok"`
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
	Running    int       `json:"running_requests"`
	Waiting    int       `json:"waiting_requests"`
	UsedTokens int64     `json:"kv_used_tokens"`
	TokenUsage float64   `json:"kv_usage"` // mean over ranks; 0 from /get_load, which lacks it
	// Sessions is the decoder's resident sessions (num_resident_sessions,
	// the emulator's extension); nil when the worker does not report it.
	Sessions *int `json:"sessions,omitempty"`
}

// pollLoads runs until stop closes.
func (s *Server) pollLoads(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.pollOnce(min(max(every, time.Second), 2*time.Second)) // a short period must not make a loaded worker look dead
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// pollOnce asks every worker in the pool at once, each within timeout.
func (s *Server) pollOnce(timeout time.Duration) {
	type target struct{ role, url string }
	var ts []target
	s.locked(func() {
		for _, w := range s.workers {
			if !w.removed {
				ts = append(ts, target{w.Role, w.URL})
			}
		}
	})
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			l := s.fetchLoad(ctx, t.url)
			l.At = time.Now()
			s.noteLoad(t.role, t.url, l)
		}()
	}
	wg.Wait()
}

func (s *Server) fetchLoad(ctx context.Context, base string) workerLoad {
	var v1 struct {
		Loads []struct {
			Running    int     `json:"num_running_reqs"`
			Waiting    int     `json:"num_waiting_reqs"`
			Used       int64   `json:"num_used_tokens"`
			TokenUsage float64 `json:"token_usage"`
			Sessions   *int    `json:"num_resident_sessions"`
		} `json:"loads"`
	}
	status, err := s.getJSON(ctx, base+"/v1/loads?include=core", &v1)
	if err == nil && status == http.StatusOK {
		l := workerLoad{OK: true}
		for _, r := range v1.Loads {
			l.Running += r.Running
			l.Waiting += r.Waiting
			l.UsedTokens += r.Used
			l.TokenUsage += r.TokenUsage / float64(len(v1.Loads))
			if r.Sessions != nil {
				l.Sessions = ptr(deref(l.Sessions) + *r.Sessions)
			}
		}
		return l
	}
	if err == nil && status == http.StatusNotFound {
		var old []struct {
			Reqs    int   `json:"num_reqs"`
			Waiting int   `json:"num_waiting_reqs"`
			Tokens  int64 `json:"num_tokens"`
		}
		if status, err = s.getJSON(ctx, base+"/get_load", &old); err == nil && status == http.StatusOK {
			l := workerLoad{OK: true}
			for _, r := range old {
				l.Running += r.Reqs - r.Waiting
				l.Waiting += r.Waiting
				l.UsedTokens += r.Tokens
			}
			return l
		}
	}
	if err == nil {
		err = fmt.Errorf("answered %d", status)
	}
	return workerLoad{Error: err.Error()}
}

func (s *Server) getJSON(ctx context.Context, u string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// noteLoad keeps a report for /admin/workers and the gauges; a failed poll
// keeps the last good figures and sets pdhybrid_worker_up to 0.
func (s *Server) noteLoad(role, url string, l workerLoad) {
	m := s.met
	lv := []string{role, url}
	s.locked(func() {
		w := s.findWorker(url)
		if w == nil || w.Role != role || w.removed {
			return // removed while polled: its gauges are gone
		}
		if !l.OK {
			m.pollErrors.WithLabelValues(lv...).Inc()
			m.up.WithLabelValues(lv...).Set(0)
			if w.load.OK {
				w.load.OK, w.load.Error, w.load.At = false, l.Error, l.At
				return
			}
			w.load = l
			return
		}
		m.up.WithLabelValues(lv...).Set(1)
		m.running.WithLabelValues(lv...).Set(float64(l.Running))
		m.waiting.WithLabelValues(lv...).Set(float64(l.Waiting))
		m.kvUsed.WithLabelValues(lv...).Set(float64(l.UsedTokens))
		m.kvUsage.WithLabelValues(lv...).Set(l.TokenUsage)
		if l.Sessions != nil {
			m.sessions.WithLabelValues(lv...).Set(float64(*l.Sessions))
		} else {
			m.sessions.DeleteLabelValues(lv...) // it does not (or no longer) report one
		}
		w.load = l
	})
}

func ptr(n int) *int { return &n }

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// dropLoadGauges forgets a removed worker's last report.
func (m *metrics) dropLoadGauges(role, url string) {
	for _, g := range []interface{ DeleteLabelValues(...string) bool }{m.running, m.waiting, m.kvUsed, m.kvUsage, m.sessions, m.up, m.pollErrors} {
		g.DeleteLabelValues(role, url)
	}
}
