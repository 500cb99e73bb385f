// Package gateway is the live router in front of SGLang workers (real, or
// emulated by internal/emulator): it takes SGLang's native /generate, asks
// the same control-plane dispatcher the simulator runs (internal/kvc) what
// to do with each request, and executes its actions as HTTP calls — the
// admission RPC, a direct append on a decoder, a seed or plain PD over
// SGLang's PD protocol, a colocated request — relaying the answer (SSE
// unbuffered when streamed).
//
// The gateway owns the wall clock: it passes the time since it started to
// the dispatcher, which has none of its own. The dispatcher is not safe for
// concurrent use, so every call into it holds one mutex; the HTTP calls to
// workers run outside it.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Prefill is a prefill worker: its API and the host and port of its
// bootstrap server (SGLang --disaggregation-bootstrap-port).
type Prefill struct {
	URL           string
	BootstrapPort int
}

// Config sets a gateway up.
type Config struct {
	Prefill []Prefill
	Decode  []string // decode workers' URLs
	Colo    []string // colocated workers' URLs (pd-colo)
	// Dispatch is the control plane's configuration; its Mechanism picks
	// which pools are used.
	Dispatch kvc.DispatchConfig
	// BlockSize is the tokens per prefix block the router hashes prompts
	// into (its belief of what each worker caches).
	BlockSize int
	// Client does the HTTP calls to workers (default: a client with no
	// overall timeout: streams last as long as generation does).
	Client *http.Client
	// MaxBodyBytes caps a request body (default 64 MiB).
	MaxBodyBytes int64
	// Retries is how many times a request a worker answered 408, 429 or
	// 5xx (before anything reached the client) is dispatched again, with
	// exponential backoff from 50 ms and a fresh pair and bootstrap room
	// each time; 0 takes 2, a negative value none.
	Retries int
	// NoResidencyProbe turns off the residency probe (residency.go): a
	// kvcache-centric gateway asks every decoder whether it holds a session
	// this gateway has no belief about — one another replica routed.
	NoResidencyProbe bool
	// AdmissionTimeout bounds the admission RPC (default 1 s; the seed
	// measured 5–10 ms round trips): a decoder that does not answer in time
	// is passed over for this request, not counted as the session's reject.
	AdmissionTimeout time.Duration
	// SessionIdle is how long a session may go unseen before the gateway
	// forgets it (default 1 h; its next turn is routed by the residency
	// probe and the decoders' answers, as on a fresh replica).
	SessionIdle time.Duration
	// Health sets up active health checks of every worker (health.go).
	Health HealthConfig
	// Ops: request limits, the admin API, load polling (limits.go, admin.go).
	Ops
	// SessionHeader and SessionField (a dotted path into the JSON body)
	// name a request's session before every built-in source (identity.go).
	SessionHeader string
	SessionField  string
	// DToP sets up D→P snapshot sync (dtop.go; off by default).
	DToP DToPConfig
	// ContextTokens is the model's context length: a prompt that, with its
	// max_new_tokens, does not fit is a 400 before any worker sees it
	// (0: unknown, left to the workers).
	ContextTokens int
	// Model is the model name GET /v1/models answers ("default" if empty).
	Model string
	// Tokenizer, when set, tokenizes text prompts with the model's own
	// tokenizer (tokenize.go) and sends the workers input_ids; nil: the
	// 4-bytes-a-token estimate, the workers tokenizing for themselves.
	Tokenizer Tokenizer
	// RelayDirect relays streamed /generate answers below net/http, on
	// the gateway's own event loops (relaydirect.go; off by default).
	RelayDirect bool
	// KVEvents reads every decoder's KV event stream into the residency
	// belief (kvevents.go; off by default: the belief learns evictions
	// from admission replies only).
	KVEvents bool
}

// Server is a running gateway.
type Server struct {
	cfg   Config
	start time.Time
	mu    sync.Mutex // guards disp and turns
	disp  *kvc.Dispatcher
	turns map[string]int // requests seen per session (the dispatcher's turn numbers)
	own   ownPrefixes    // with API keys: the prefix blocks each key sent (ownprefix.go)
	mux   *http.ServeMux
	// probes counts sessions whose decoder this gateway learnt from a
	// residency probe.
	probes   atomic.Int64
	draining atomic.Bool  // shutting down: /health answers 503 (drain.go)
	serving  atomic.Int64 // requests being served, the probes and /admin/ aside (drain.go)
	dtop     dtopState    // D→P snapshot sync (dtop.go)
	// dispatched counts dispatches (atomic: a request without a session
	// takes the lock only for the sweep): every 1024th sweeps out
	// sessions idle longer than SessionIdle.
	dispatched atomic.Int64
	opsState                // metrics, workers' states, limits, the load poller (admin.go)
	direct     *directRelay // the direct relay, nil when off
	// sources is the session resolution order, built once (identity.go).
	sources []sessionSource
	kvm     *kvEventMetrics // the decoders' eviction reports (kvevents.go); nil when off
	kvOrder kvEventOrder    // reports against admission replies, per decoder (kvevents.go; under mu)
	// badFields counts admission replies' optional fields read as absent
	// (admitreply.go).
	badFields *badFields
}

// New checks cfg and builds the gateway's handler.
func New(cfg Config) (*Server, error) {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 64
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	cfg.Ops.defaults()
	// The direct relay has its own worker client; a caller's Client (a
	// test's faults) keeps every call on the ordinary path.
	direct := (cfg.RelayDirect || forceRelayDirect) && cfg.Client == nil
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: workerTransport(cfg.Ops)}
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = time.Hour
	}
	if cfg.AdmissionTimeout <= 0 {
		cfg.AdmissionTimeout = time.Second
	}
	if cfg.Dispatch.Breaker.Failures == 0 {
		// The simulator's defaults: 3 failed calls within 60 s open a
		// decoder's breaker for 30 s (a health check closes it sooner).
		cfg.Dispatch.Breaker = kvc.BreakerConfig{Failures: 3, WindowS: 60, CooldownS: 30}
	}
	var pNames, dNames []string
	switch cfg.Dispatch.Mechanism {
	case kvc.MechColo:
		if len(cfg.Colo) == 0 {
			return nil, errors.New("gateway: pd-colo needs at least one colocated worker")
		}
		dNames = cfg.Colo
	case kvc.MechPD, kvc.MechKVC, kvc.MechConditional, kvc.MechPrefixDecider, kvc.MechDecodeRadix, kvc.MechPPD, kvc.MechDeflect:
		if len(cfg.Prefill) == 0 || len(cfg.Decode) == 0 {
			return nil, fmt.Errorf("gateway: %s needs prefill and decode workers", cfg.Dispatch.Mechanism)
		}
		for _, p := range cfg.Prefill {
			pNames = append(pNames, p.URL)
		}
		dNames = cfg.Decode
	default:
		return nil, fmt.Errorf("gateway: unknown mechanism %q", cfg.Dispatch.Mechanism)
	}
	for _, u := range append(append([]string(nil), pNames...), dNames...) {
		if _, err := url.ParseRequestURI(u); err != nil {
			return nil, fmt.Errorf("gateway: worker URL %q: %v", u, err)
		}
	}
	// The routers' options as configured (serve's --floor-k, say), with
	// the sticky bonus α 1 and a bounded belief where unset.
	opts := cfg.Dispatch.Options
	if opts.Alpha == 0 {
		opts.Alpha = 1
	}
	if opts.IndexBlocks == 0 {
		opts.IndexBlocks = 1 << 20
	}
	dOpts := opts
	// A sliding view (serve's --max-total-tokens) sizes the decoders'
	// pools and counts the outputs they keep; prefill workers keep prompts
	// in pools of their own: no view there.
	opts.SlidingRunBlocks, opts.SlidingPoolBlocks, opts.SlidingTails = 0, 0, false
	opts.SlidingLayers, opts.Layers = 0, 0
	dOpts.NoCache = cfg.Dispatch.Mechanism == kvc.MechPD // naive PD decoders keep nothing
	s := &Server{cfg: cfg, start: time.Now(), mux: http.NewServeMux(), turns: map[string]int{}}
	if direct {
		s.direct = newDirectRelay(cfg.Ops)
	}
	s.sources = s.sessionSources()
	dc := cfg.Dispatch
	dc.Workers = s.workerCaps() // paths.go
	if dc.BlockSize == 0 {
		dc.BlockSize = cfg.BlockSize // the peers count overlap in tokens
	}
	if dc.Mechanism.IsPeer() {
		peerDefaults(&dc.Peer)
	}
	s.disp = kvc.NewDispatcher(dc, pNames, dNames, opts, dOpts)
	if err := s.startDToP(); err != nil {
		return nil, err
	}
	s.mux.HandleFunc("/generate", postOnly(s.handleGenerate))
	s.mux.HandleFunc("/v1/completions", postOnly(s.handleCompletions))
	s.mux.HandleFunc("/v1/chat/completions", postOnly(s.handleChat))
	s.mux.HandleFunc("/v1/messages", postOnly(s.handleMessages))
	s.mux.HandleFunc("/v1/messages/count_tokens", postOnly(s.handleCountTokens))
	s.mux.HandleFunc("/v1/models", getOnly(s.handleModels))
	s.mux.HandleFunc("/v1/models/", getOnly(s.handleModels))
	s.mux.HandleFunc("/version", getOnly(handleVersion))
	s.mux.HandleFunc("/get_server_info", getOnly(handleVersion))
	s.mux.HandleFunc("/health", getOnly(s.handleHealth))
	s.mux.HandleFunc("/health_generate", getOnly(s.handleHealthGenerate))
	s.mux.HandleFunc("/", handleNotFound)
	s.startOps()
	s.startKVEvents()
	if cfg.Health.Interval >= 0 {
		s.cfg.Health.defaults()
		s.polling.Add(1)
		go func() {
			defer s.polling.Done()
			s.healthLoop(s.stop)
		}()
	} else {
		// No health rounds: the capabilities are learnt once, at start,
		// and corrected by refusals.
		s.polling.Add(1)
		go func() {
			defer s.polling.Done()
			ctx, cancel := s.untilStop()
			defer cancel()
			s.Discover(ctx)
		}()
	}
	return s, nil
}

// workerTransport keeps connections to the workers open for reuse: Go's
// default keeps 2 idle per host, so under a few hundred concurrent streams
// nearly every request to a worker would pay a new TCP connection (and
// leave one in TIME_WAIT). Connecting and the response headers have their
// own timeouts (Ops), so a stopped worker is noticed, not waited on.
func workerTransport(o Ops) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 4096, 1024
	d := &net.Dialer{Timeout: timeout(o.WorkerConnectTimeout), KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.ResponseHeaderTimeout = timeout(o.WorkerHeaderTimeout)
	return t
}

// forceRelayDirect turns the direct relay on in every gateway (tests: the
// package's tests under both relays, main_test.go).
var forceRelayDirect bool

// Handler serves the gateway's API, behind the request limits.
func (s *Server) Handler() http.Handler { return s.drainGuard(s.limited(s.mux)) }

// expireSessions forgets the sessions not seen since SessionIdle before
// now (held lock): the gateway's memory follows its live sessions.
func (s *Server) expireSessions(now time.Time) {
	for id, t := range s.seen {
		if now.Sub(t) > s.cfg.SessionIdle {
			delete(s.seen, id)
			delete(s.turns, id)
			s.disp.ForgetSession(id)
			s.forgetDToP(id)
		}
	}
}

// now is the gateway's clock for the dispatcher: seconds since it started.
// kvc reports whether this gateway runs the kvcache-centric mechanism.
func (s *Server) kvc() bool { return s.cfg.Dispatch.Mechanism == kvc.MechKVC }

func (s *Server) now() float64 { return time.Since(s.start).Seconds() }

// locked runs f with the dispatcher held.
func (s *Server) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// newRoom is a fresh 63-bit bootstrap room, as SGLang's routers draw one.
func newRoom() int64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// newRID is the gateway's request id, sent on both legs of a PD request.
func newRID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	var h [24]byte
	hex.Encode(h[:], b[:]) // as fmt's %x, with one allocation (the string) instead of two
	return string(h[:])
}

// abort asks a worker to drop a request (SGLang /abort_request), so a
// decoder is never left waiting on a room whose other leg failed. It is
// counted against base, the worker it goes to.
func (s *Server) abort(base, rid, why string) {
	s.met.aborts.WithLabelValues(why, base).Inc()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/abort_request",
		jsonReader(map[string]any{"rid": rid}))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := s.cfg.Client.Do(req); err == nil {
		resp.Body.Close()
	}
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Hostname()
}

func itoa(n int) string { return strconv.Itoa(n) }

// untilStop is a context that ends when the server stops (Close) or when
// cancel is called, whichever comes first: for the background loops that
// make requests of their own.
func (s *Server) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
