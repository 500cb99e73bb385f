package gateway

// Draining: how a replica leaves without losing a request. On the signal
// to stop (SIGTERM from Kubernetes or systemd, SIGINT by hand) the gateway
// stops being ready at once (/health answers 503, so a load balancer's
// health check or a kubelet's readiness probe takes it out), keeps its
// listener open and answers every new request 503 with Retry-After and
// Connection: close — a status nginx (proxy_next_upstream http_503),
// HAProxy (retry-on 503) and any client retry on another replica — while
// the requests already running, streams included, finish, for up to the
// drain timeout. Keeping the listener open matters where endpoint removal
// lags the signal (a Kubernetes Service): a closed port would reset those
// connections, where a 503 tells the client what happened. /livez stays
// 200 throughout, so a liveness probe does not restart a draining pod.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// drainPoll is how often a draining gateway looks whether its last request
// has ended (net/http's own Shutdown polls the same way).
const drainPoll = 20 * time.Millisecond

// DrainCutError is Serve's answer when requests were still running at the
// drain timeout and were cut (their workers' legs aborted).
type DrainCutError struct {
	Cut     int64         // requests cut
	Timeout time.Duration // the drain timeout they had
}

func (e *DrainCutError) Error() string {
	return fmt.Sprintf("gateway: %d requests still running after the drain timeout of %s were cut", e.Cut, e.Timeout)
}

// Serve serves the gateway on ln until ctx ends, then drains (see above):
// it returns nil once the last request in flight has ended, or a
// *DrainCutError when drain ran out first and the rest were cut, as for a
// client that left.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	srv := s.HTTPServer()
	if s.direct != nil {
		ln = directListener{ln} // the direct relay ends a stream's chunked body itself (clientconn.go)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	srv.SetKeepAlivesEnabled(false) // every answer from now on closes its connection
	deadline := time.Now().Add(drain)
	for s.serving.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(drainPoll)
	}
	if n := s.serving.Load(); n > 0 {
		srv.Close() // each handler's context ends: its legs are aborted on the workers
		return &DrainCutError{Cut: n, Timeout: drain}
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // a request that came in the last instant and was being refused
	}
	return nil
}

// Draining reports whether the gateway has begun to drain.
func (s *Server) Draining() bool { return s.draining.Load() }

// drainGuard counts the requests being served and, while draining, refuses
// new ones with a retryable 503 in the API's own error shape. The probes,
// /metrics and /admin/ pass: an operator watches a drain through them.
func (s *Server) drainGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/livez":
			w.WriteHeader(http.StatusOK)
			return
		case p == "/health", p == "/metrics", strings.HasPrefix(p, "/admin/"):
			next.ServeHTTP(w, r)
			return
		}
		s.serving.Add(1)
		defer s.serving.Add(-1)
		if s.draining.Load() {
			refuseDraining(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseDraining answers a request that came during the drain: 503, which
// proxies retry on another replica, in the API's own error shape. Anthropic
// names overload 529, which no proxy retries on its own; its SDKs retry
// any 5xx, so the drain answers 503 there too.
func refuseDraining(w http.ResponseWriter, r *http.Request) {
	const msg = "this gateway replica is shutting down; retry the request (another replica will take it)"
	w.Header().Set("Retry-After", retryAfterS)
	w.Header().Set("Connection", "close")
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		limitError(w, r, http.StatusServiceUnavailable, msg)
		return
	}
	b, _ := anthropicErrorBody(http.StatusServiceUnavailable, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(append(b, '\n'))
}

// handleHealth is the gateway's own /health, its readiness: 200, or 503
// while draining.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
