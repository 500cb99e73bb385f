package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve serves the gateway on ln until ctx ends, then shuts down
// gracefully: /health answers 503 at once (a load balancer stops sending
// new requests), the listener closes, and requests in flight — streams
// included — get up to drain to finish. Streams still running then are
// cut, and their workers' legs aborted explicitly, as for a client that
// left. It returns nil on a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	srv := s.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Cut what did not finish: each handler's context ends, so its
		// legs are aborted on the workers.
		srv.Close()
		return errors.New("gateway: streams still running after the drain timeout were cut")
	}
	return err
}

// handleHealth is the gateway's own /health: 200, or 503 while draining.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
