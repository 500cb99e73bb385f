package gateway

// Safety limits in front of the serving endpoints: a body cap answered 413
// before any handler reads the body, and a per-client cap on requests in
// flight answered 429 with Retry-After. Headers are capped by the HTTP
// server (HTTPServer: MaxHeaderBytes, which Go answers 431). /metrics,
// /health and /admin/ are not limited: an operator must reach them while
// clients are being refused.

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Ops configures what runs beside routing.
type Ops struct {
	// MaxHeaderBytes caps a request's headers (HTTPServer; default 1 MiB).
	MaxHeaderBytes int
	// MaxClientConcurrency caps the requests one client has in flight
	// (0: no cap); over it a request is answered 429 with Retry-After.
	MaxClientConcurrency int
	// ClientHeader names the header that identifies a client (an API key,
	// say); a request without it, or with none configured, is its remote
	// IP's.
	ClientHeader string
	// AdminToken is the bearer token /admin/ requires; empty disables the
	// admin API (404).
	AdminToken string
	// LoadPoll is how often each worker's load is polled (0 takes 1 s; a
	// negative value never polls). Close stops it.
	LoadPoll time.Duration
	// LogPrompts logs each request, its prompt included, as one JSON line
	// to Log (default stderr). Off, the gateway logs nothing of requests.
	LogPrompts bool
	Log        io.Writer
	// LogDebug also logs debug events to Log: each D→P sync's outcome,
	// stages and sizes (dtop.go), never prompt content.
	LogDebug bool
}

func (o *Ops) defaults() {
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 1 << 20
	}
	if o.LoadPoll == 0 {
		o.LoadPoll = time.Second
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
}

const (
	rejectBody   = "body_too_large"
	rejectClient = "client_concurrency"
	// retryAfterS is the Retry-After of a 429: a client's requests in
	// flight last seconds, so a second is the shortest useful wait.
	retryAfterS = "1"
)

// HTTPServer is an http.Server for the gateway's handler with its header
// cap.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: s.cfg.MaxHeaderBytes}
}

// limitError answers a refused request in the error shape of the API it
// came to: Anthropic's for /v1/messages, OpenAI's for the other /v1/
// routes, SGLang's otherwise.
func limitError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/v1/messages"):
		writeAnthropicError(w, &anthError{status: status, msg: msg})
	case strings.HasPrefix(p, "/v1/"):
		writeOpenAIError(w, status, msg)
	default:
		writeError(w, status, msg)
	}
}

// limited wraps the serving endpoints in the client cap and the body cap.
func (s *Server) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/metrics" || p == "/health" || strings.HasPrefix(p, "/admin/") {
			next.ServeHTTP(w, r)
			return
		}
		if n := s.cfg.MaxClientConcurrency; n > 0 {
			key := s.clientOf(r)
			if !s.clients.acquire(key, n) {
				s.met.rejected.WithLabelValues(rejectClient).Inc()
				w.Header().Set("Retry-After", retryAfterS)
				limitError(w, r, http.StatusTooManyRequests, "too many requests in flight for this client (at most "+itoa(n)+"); retry after "+retryAfterS+" s")
				return
			}
			defer s.clients.release(key)
		}
		if r.Body != nil && r.Body != http.NoBody {
			limit := s.cfg.MaxBodyBytes
			tooLarge := func() {
				s.met.rejected.WithLabelValues(rejectBody).Inc()
				limitError(w, r, http.StatusRequestEntityTooLarge, "request body larger than the gateway's limit: at most "+itoa(int(limit))+" bytes")
			}
			if r.ContentLength > limit {
				tooLarge()
				return
			}
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge()
				return
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		next.ServeHTTP(w, r)
	})
}

// clientOf is the client a request counts against: the configured
// header's value when present, else the remote IP.
func (s *Server) clientOf(r *http.Request) string {
	if h := s.cfg.ClientHeader; h != "" {
		if v := r.Header.Get(h); v != "" {
			return "h:" + v
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// clientLimiter counts requests in flight per client.
type clientLimiter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *clientLimiter) acquire(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[key] >= max {
		return false
	}
	c.n[key]++
	return true
}

func (c *clientLimiter) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// logRequest writes one request's line (LogPrompts only): what it was,
// how it went, and its prompt.
func (s *Server) logRequest(q *request, mode, outcome string, status int, took time.Duration) {
	prompt := any(q.text)
	if q.ids != nil {
		prompt = q.ids // raw JSON or []any: logged as the list it is
	}
	s.log.Info("request", "session", q.session, "mode", mode, "outcome", outcome, "status", status,
		"seconds", took.Seconds(), "input_tokens", q.tokens, "prompt", prompt)
}

func newLogger(w io.Writer, debug bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if debug {
		opts.Level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
