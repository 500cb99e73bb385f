package gateway

// Safety limits in front of the serving endpoints: a body cap answered 413
// before any handler reads the body, and a per-client cap on requests in
// flight answered 429 with Retry-After. Headers are capped by the HTTP
// server (HTTPServer: MaxHeaderBytes, which Go answers 431). /metrics,
// /health and /admin/ are not limited: an operator must reach them while
// clients are being refused.

import (
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
	// LogLevel is the least level logged: debug, info (default), warn or
	// error; LogText writes slog's text lines instead of JSON.
	LogLevel string
	LogText  bool
	// MaxInflightBytes caps the request body bytes held at once by the
	// whole gateway (default 256 MiB), MaxClientBytes those of one client
	// (default half of MaxInflightBytes); a body past either is answered
	// 429 with Retry-After (budget.go). A negative value: no cap.
	MaxInflightBytes int64
	MaxClientBytes   int64
	// Timeouts, each phase its own (HTTPServer and the worker client):
	// HeaderTimeout for a request's headers (default 10 s), BodyTimeout
	// for its body (default 30 s; a slower client gets 408 and its
	// connection closed), IdleTimeout for a keep-alive connection between
	// requests (default 120 s); WorkerConnectTimeout to connect to a worker
	// (default 3 s) and WorkerHeaderTimeout for a worker's response headers
	// once the request is sent (default 0: none, a long prefill may take
	// minutes before its first byte). A negative value: no timeout.
	HeaderTimeout, BodyTimeout, IdleTimeout   time.Duration
	WorkerConnectTimeout, WorkerHeaderTimeout time.Duration
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
	if o.MaxInflightBytes == 0 {
		o.MaxInflightBytes = 256 << 20
	}
	if o.MaxClientBytes == 0 {
		o.MaxClientBytes = max(o.MaxInflightBytes/2, 0)
	}
	for _, d := range []struct {
		t   *time.Duration
		def time.Duration
	}{{&o.HeaderTimeout, 10 * time.Second}, {&o.BodyTimeout, 30 * time.Second}, {&o.IdleTimeout, 120 * time.Second},
		{&o.WorkerConnectTimeout, 3 * time.Second}} {
		if *d.t == 0 {
			*d.t = d.def
		}
	}
}

// timeout is d, or 0 (none) for a negative d.
func timeout(d time.Duration) time.Duration { return max(d, 0) }

const (
	rejectBody   = "body_too_large"
	rejectClient = "client_concurrency"
	// retryAfterS is the Retry-After of a 429: a client's requests in
	// flight last seconds, so a second is the shortest useful wait.
	retryAfterS = "1"
)

// HTTPServer is an http.Server for the gateway's handler with its header
// cap.
//
// Go's server answers headers past its own cap in plain text; its cap is
// set above the gateway's, which limited checks and answers in the API's
// JSON shape. No ReadTimeout or WriteTimeout: they would cut streams; the
// body has its own deadline (readLimited).
func (s *Server) HTTPServer() *http.Server {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: timeout(s.cfg.HeaderTimeout), IdleTimeout: timeout(s.cfg.IdleTimeout),
		MaxHeaderBytes: 2*s.cfg.MaxHeaderBytes + 4096, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	if s.direct != nil {
		srv.ConnContext = connContext // the direct relay writes streams to the connection (relaydirect.go)
	}
	return srv
}

// tooLargeHeader says whether r's request line and headers exceed max
// bytes (counted as they came on the wire: "Key: value\r\n").
func tooLargeHeader(r *http.Request, max int) bool {
	n := len(r.Method) + len(r.RequestURI) + 12
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n > max
}

// clientLabel names a client in logs without its secret: an IP as is, a
// header's value (an API key) by a short hash.
func (s *Server) clientLabel(key string) string {
	if strings.HasPrefix(key, "h:") {
		return "key:" + shortHash(key)
	}
	return key
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
		if tooLargeHeader(r, s.cfg.MaxHeaderBytes) {
			s.met.rejected.WithLabelValues(rejectHeader).Inc()
			limitError(w, r, http.StatusRequestHeaderFieldsTooLarge, "request headers larger than the gateway's limit: at most "+itoa(s.cfg.MaxHeaderBytes)+" bytes")
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			key := s.clientOf(r)
			b, taken, refused := s.readLimited(w, r, key)
			if refused != nil {
				if refused.reason != "" {
					s.met.rejected.WithLabelValues(refused.reason).Inc()
				}
				if refused.status == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", retryAfterS)
				}
				if refused.status == http.StatusRequestTimeout {
					w.Header().Set("Connection", "close")
				}
				s.log.Warn("request refused", "path", p, "status", refused.status, "reason", refused.reason, "client", s.clientLabel(key))
				limitError(w, r, refused.status, refused.msg)
				return
			}
			defer s.budget.give(key, taken)
			if taken >= bigBody {
				defer s.returnMemory()
			}
			r.Body = newReadBody(b)
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

func newLogger(w io.Writer, o Ops) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch o.LogLevel {
	case "debug":
		opts.Level = slog.LevelDebug
	case "warn":
		opts.Level = slog.LevelWarn
	case "error":
		opts.Level = slog.LevelError
	}
	if o.LogDebug {
		opts.Level = slog.LevelDebug
	}
	if o.LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
