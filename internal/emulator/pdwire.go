package emulator

// The PD wire between emulated workers: P's bootstrap server, the
// per-room sender that delivers KV to D in order, and the JSON calls.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// bootstrapHandler is the prefill worker's bootstrap server.
func (s *Server) bootstrapHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if s.exiting.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	m.HandleFunc("/_pd/register", func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodPost) {
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var reg registration
		if err := strictJSON(body, &reg); err != nil {
			writeValidation(w, "invalid registration: "+jsonMsg(err))
			return
		}
		status, msg := http.StatusServiceUnavailable, "the prefill worker is shutting down"
		s.d.do(func(now float64) { status, msg = s.register(now, reg) })
		if status != http.StatusOK {
			writeHTTPError(w, status, msg)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	return m
}

// sender delivers one room's landed transfers to D, in order.
type sender struct {
	s      *Server
	url    string
	rm     *room
	mu     sync.Mutex
	q      []delivery
	closed bool
	wake   chan struct{}
	runs   bool
}

func newSender(s *Server, url string, rm *room) *sender {
	return &sender{s: s, url: url, rm: rm, wake: make(chan struct{}, 1)}
}

// push queues a delivery (driver goroutine).
func (x *sender) push(d delivery) {
	if x == nil {
		return
	}
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return
	}
	x.q = append(x.q, d)
	start := !x.runs
	x.runs = true
	x.mu.Unlock()
	if start {
		x.s.bg.Add(1)
		go x.loop(x.rm)
	}
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *sender) close() {
	if x == nil {
		return
	}
	x.mu.Lock()
	x.closed = true
	x.q = nil
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *sender) loop(rm *room) {
	defer x.s.bg.Done()
	for {
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			return
		}
		if len(x.q) == 0 {
			x.mu.Unlock()
			select {
			case <-x.wake:
				continue
			case <-x.s.ctx.Done():
				return
			}
		}
		d := x.q[0]
		x.q = x.q[1:]
		x.mu.Unlock()
		d.Prefill = x.s.bootstrapAddr()
		err := x.s.postJSON(x.url, d, nil)
		if !x.s.d.post(func(now float64) { x.s.delivered(now, rm, d, err) }) || err != nil {
			return
		}
	}
}

func (s *Server) bootstrapAddr() string {
	if s.bootLn == nil {
		return ""
	}
	return hostPort(s.bootLn.Addr())
}

// postJSON posts v and decodes a 200 answer into out; any other status is
// an error carrying the answer's message.
func (s *Server) postJSON(url string, v, out any) error {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}
