// Package emulator is an HTTP server that behaves like one SGLang worker
// (colocated, prefill or decode) and is timed by the engine model in wall
// clock time: the live stack's stand-in for a GPU. It speaks SGLang's
// native API (/generate, sessions, aborts, health, loads, Prometheus
// metrics), SGLang's PD protocol between emulated workers (bootstrap
// rooms, D pre-allocates, P streams KV per chunk over a modelled link) and
// the KVC extension /session_cache/admit_direct_append. docs/emulator.md
// describes the wire behaviour and what is approximated.
//
// One goroutine, the driver (driver.go), owns the engine; handlers talk to
// it over a channel. Nothing here but the driver and the handlers' waits
// reads the clock, and they read the injected Clock.
package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// Server is one emulated worker.
type Server struct {
	cfg     Config
	kvBytes int64
	d       *driver
	mux     *http.ServeMux
	metrics *metrics
	faults  *faultState
	client  *http.Client // PD traffic to other workers
	ctx     context.Context
	cancel  context.CancelFunc // ends PD traffic when the server stops

	httpSrv, bootSrv *http.Server
	ln, bootLn       net.Listener
	url              string
	started          atomic.Bool
	ready            atomic.Bool
	exiting          atomic.Bool
	killed           atomic.Bool
	closeOnce        sync.Once
	bg               sync.WaitGroup // PD goroutines

	// Owned by the driver goroutine.
	w         *engine.Worker
	base      engine.Stats // counters of workers replaced by /flush_cache
	reqs      map[string]*reqState
	nextID    int64
	rooms     map[uint64]*room      // prefill: bootstrap rooms
	drooms    map[uint64]*reqState  // decode: requests waiting for KV, by room
	beats     map[string]*heartbeat // decode: prefill workers waited on
	beatTimer *dtimer
	sessions  map[string]*session
	snap      *engine.SnapshotStore        // prefill: the D→P snapshot buffer (snapshot.go)
	snapIDs   map[string]engine.SnapshotID // prefill: each session's snapshot reserved and not yet ingested
	tails     tailKeys
	load      loadWindow
	kv        kvStats
	kvEvents  *kvEventLog // the KV event stream (kvevents.go); nil when off
}

// New builds a worker; Start serves it.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, kvBytes: cfg.Profile.Model.KVBytesPerToken(),
		reqs: map[string]*reqState{}, rooms: map[uint64]*room{}, drooms: map[uint64]*reqState{},
		beats: map[string]*heartbeat{}, sessions: map[string]*session{},
		tails: tailKeys{cap: 1 << 16},
	}
	w, err := s.newWorker()
	if err != nil {
		return nil, err
	}
	s.w = w
	var link *engine.Link
	if cfg.Role == engine.RolePrefill {
		s.snap, s.snapIDs = engine.NewSnapshotStore(w, cfg.SnapshotBufBytes), map[string]engine.SnapshotID{}
		spec := cfg.Profile.Links[cfg.Link]
		spec.BandwidthBytes /= max(cfg.Faults.SlowTransfer, 1)
		link = engine.NewLink(spec)
	}
	if cfg.KVEvents {
		s.kvEvents = newKVEventLog()
	}
	s.d = newDriver(cfg.Clock, cfg.TimeScale, w, link)
	s.d.hooks = s
	s.faults = newFaultState(cfg.Faults)
	s.metrics = newMetrics(s)
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

func (s *Server) newWorker() (*engine.Worker, error) {
	c := s.cfg
	pool := c.PoolTokens
	if pool <= 0 {
		pool = c.Profile.KVPoolTokens(c.MemFraction)
	}
	if pool <= 0 {
		return nil, fmt.Errorf("emulator: profile %s leaves no KV pool at memory fraction %v", c.Profile.Name, c.MemFraction)
	}
	return engine.New(engine.Config{
		Name: c.Role.String(), Role: c.Role, Profile: c.Profile, BlockSize: c.BlockSize,
		PoolTokens: pool, ChunkTokens: c.ChunkTokens, MaxRunning: c.MaxRunning,
		PrefixCache: c.Role != engine.RoleDecode, MixedChunk: c.MixedChunk, Session: c.Session,
		PriorityEviction: c.PriorityEviction && c.Role == engine.RolePrefill,
		DecodeRadix:      c.DecodeRadix, LocalPrefill: c.ConditionalAgg,
		ShortestFirst: c.ShortestFirst, MaxWaitS: c.MaxWaitS,
		PrefillBypassTokens: c.PrefillBypassTokens, PrefillBypassAhead: c.PrefillBypassAhead,
		SliceTPOTS: c.SliceTPOTS,
		HiCache:    c.HiCache,
	})
}

// Start listens on addr (host:port; port 0 picks a free one) and, on a
// prefill worker, bootstrapAddr for the PD bootstrap server, then serves in
// the background.
func (s *Server) Start(addr, bootstrapAddr string) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("emulator: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.ln = ln
	if s.cfg.Role == engine.RolePrefill {
		bl, err := net.Listen("tcp", bootstrapAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("bootstrap server: listen on %s: %w", bootstrapAddr, err)
		}
		s.bootLn = bl
	}
	s.url = s.cfg.AdvertiseURL
	if s.url == "" {
		s.url = "http://" + hostPort(ln.Addr())
	}
	go s.d.run()
	if c, ok := s.cfg.HiCache.Storage.Index.(*StoreClient); ok {
		// Bookings on a shared pool's aggregate link carry this worker's
		// clock (store.go).
		s.d.do(func(float64) { c.SetClock(s.d.start, s.cfg.TimeScale) })
	}
	if d := s.cfg.StartupDelay; d > 0 {
		s.d.do(func(now float64) { s.d.after(now+d, func(float64) { s.ready.Store(true) }) })
	} else {
		s.ready.Store(true)
	}
	s.httpSrv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	if s.kvEvents != nil {
		s.httpSrv.RegisterOnShutdown(s.kvEvents.close) // the streams never end else
	}
	go s.httpSrv.Serve(ln)
	if s.bootLn != nil {
		s.bootSrv = &http.Server{Handler: s.bootstrapHandler(), ReadHeaderTimeout: 10 * time.Second}
		go s.bootSrv.Serve(s.bootLn)
	}
	return nil
}

// hostPort is a listener's address as a URL host, 127.0.0.1 for a wildcard
// bind.
func hostPort(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}

// URL is the worker's base URL (after Start).
func (s *Server) URL() string { return s.url }

// BootstrapPort is the prefill worker's bootstrap port (after Start), or 0.
func (s *Server) BootstrapPort() int {
	if s.bootLn == nil {
		return 0
	}
	return s.bootLn.Addr().(*net.TCPAddr).Port
}

// Handler is the worker's HTTP API, for serving it elsewhere (tests).
func (s *Server) Handler() http.Handler { return s.mux }

// Shutdown stops accepting requests, lets those in flight finish until ctx
// ends, then stops the driver. /health answers 503 meanwhile.
func (s *Server) Shutdown(ctx context.Context) error {
	s.exiting.Store(true)
	var err error
	if s.httpSrv != nil {
		err = s.httpSrv.Shutdown(ctx)
	}
	if s.bootSrv != nil {
		s.bootSrv.Shutdown(ctx)
	}
	s.stop()
	return err
}

// Kill drops every connection and stops at once, as a crashed process
// would.
func (s *Server) Kill() {
	s.killed.Store(true)
	s.exiting.Store(true)
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
	if s.bootSrv != nil {
		s.bootSrv.Close()
	}
	s.stop()
}

func (s *Server) stop() {
	s.closeOnce.Do(func() {
		if s.kvEvents != nil {
			s.kvEvents.close()
		}
		if s.started.Load() {
			s.d.stop()
		}
		s.cancel()
		s.bg.Wait()
		s.client.CloseIdleConnections()
	})
}

// routes wires the API. Paths and methods follow SGLang's http_server.py
// and v1_loads.py; /_pd/kv is the emulator's own PD delivery endpoint.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("/generate", s.handleGenerate)
	m.HandleFunc("/health", s.handleHealth)
	m.HandleFunc("/health_generate", s.handleHealth)
	m.HandleFunc("/server_info", s.handleServerInfo)
	m.HandleFunc("/get_server_info", s.handleServerInfo)
	m.HandleFunc("/get_model_info", s.handleModelInfo)
	m.HandleFunc("/v1/loads", s.handleLoads)
	m.HandleFunc("/get_load", s.handleGetLoad)
	m.Handle("/metrics", s.metrics.handler())
	m.HandleFunc("/flush_cache", s.handleFlushCache)
	m.HandleFunc("/abort_request", s.handleAbort)
	m.HandleFunc("/open_session", s.handleOpenSession)
	m.HandleFunc("/close_session", s.handleCloseSession)
	// The KVC extension (docs/worker-protocol.md) exists only where this
	// worker offers it; elsewhere its paths fall through to FastAPI's 404,
	// as on stock SGLang.
	if s.cfg.Session.Enabled {
		m.HandleFunc("/session_cache/admit_direct_append", s.handleAdmit)
		m.HandleFunc("/session_cache/lookup", s.handleLookup)
	}
	if s.kvEvents != nil {
		m.HandleFunc("/kvc/kv_events", s.handleKVEvents)
	}
	if s.cfg.Session.Enabled || s.cfg.SnapshotSync {
		m.HandleFunc("/_snapshot/prepare_receive", s.handlePrepareReceive)
		m.HandleFunc("/_snapshot/dump", s.handleDump)
		m.HandleFunc("/_snapshot/finalize_ingest", s.handleFinalizeIngest)
		m.HandleFunc("/_snapshot/release", s.handleReleaseSnapshot)
	}
	m.HandleFunc("/v1/models", s.handleModels)
	m.HandleFunc("/_pd/kv", s.handleKVDelivery)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"}) // FastAPI's 404
	})
	s.mux = m
}

// maxBody bounds a request body (a 262K-token prompt as JSON ids is about
// 2 MB).
const maxBody = 64 << 20

// readBody reads a request body, answering 413 or 400 itself on failure.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorResponse{Object: "error", Message: fmt.Sprintf("request body over %d bytes", maxBody), Type: "Payload Too Large", Code: 413})
		} else {
			writeValidation(w, "reading the request body: "+err.Error())
		}
		return nil, false
	}
	return body, true
}

func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", joinComma(methods))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
	return false
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"error":{"message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeValueError is SGLang's _create_error_response: 400 and
// {"error": {"message": ...}}.
func writeValueError(w http.ResponseWriter, msg string) {
	var e errorBody
	e.Error.Message = msg
	writeJSON(w, http.StatusBadRequest, e)
}

// writeValidation is FastAPI's validation error as SGLang rewrites it (400).
func writeValidation(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, errorResponse{Object: "error", Message: msg, Type: "Bad Request", Code: 400})
}

// writeHTTPError is an HTTPException through SGLang's handler.
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{Object: "error", Message: msg, Type: strconv.Itoa(status), Code: status})
}

// writeRequestError answers a refused request in SGLang's shape.
func writeRequestError(w http.ResponseWriter, err error) {
	var re *requestError
	if errors.As(err, &re) {
		switch {
		case re.validation:
			writeValidation(w, re.msg)
		case re.status == http.StatusBadRequest:
			writeValueError(w, re.msg)
		default:
			writeHTTPError(w, re.status, re.msg)
		}
		return
	}
	writeHTTPError(w, http.StatusInternalServerError, err.Error())
}

// unavailable answers requests the worker cannot serve: starting, stopping
// or stopped.
func (s *Server) unavailable(w http.ResponseWriter) bool {
	switch {
	case s.exiting.Load():
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
	case !s.ready.Load():
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is starting")
	default:
		return false
	}
	return true
}

// engineType is SGLang's engine_type label and disaggregation mode.
func (s *Server) engineType() string {
	switch s.cfg.Role {
	case engine.RolePrefill:
		return "prefill"
	case engine.RoleDecode:
		return "decode"
	}
	return "unified"
}

// roleName is the role as pdhybrid worker --role names it.
func (s *Server) roleName() string {
	if s.cfg.Role == engine.RoleColocated {
		return "colo"
	}
	return s.cfg.Role.String()
}

func (s *Server) disaggMode() string {
	if s.cfg.Role == engine.RoleColocated {
		return "null"
	}
	return s.engineType()
}
