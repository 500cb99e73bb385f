package gateway

// The admin API under /admin/, behind a bearer token (Config.AdminToken;
// none configured: 404, the API is off): the sessions the gateway knows,
// and the worker pools, which an operator can change while the gateway
// runs — drain a worker (no new requests; those in flight finish),
// undrain it, add one, remove one. A worker still running requests is not
// removed: remove answers 409 and says to drain it first and wait for its
// in_flight to reach 0. A removed worker keeps its slot in the control
// plane (indices name workers in every dispatch in flight), excluded, with
// its sessions and cache belief forgotten; adding the same URL again takes
// the slot back.

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

const (
	rolePrefill = "prefill"
	roleDecode  = "decode"
	roleColo    = "colo"
)

// opsState is the Server's state beside routing; workers and seen are
// guarded by Server.mu.
type opsState struct {
	met     *metrics
	workers []*workerInfo
	seen    map[string]time.Time // session → when its last request came
	clients clientLimiter
	budget  byteBudget // request bytes in flight (budget.go)
	// discovered: the workers discovery added (URL → its target), the
	// only ones it drains and removes (discover.go).
	discovered map[string]string
	log        *slog.Logger
	stop       chan struct{}
	polling    sync.WaitGroup
	closeOnce  sync.Once
}

// workerInfo is one worker of a pool as the admin API shows it.
type workerInfo struct {
	Role          string
	URL           string
	BootstrapPort int
	idx           int // its index in its pool (the dispatcher's name for it)
	draining      bool
	removed       bool
	load          workerLoad
	caps          Capabilities // capabilities.go
}

// startOps builds the metrics and the worker table, registers /metrics and
// /admin/, and starts the load poller.
func (s *Server) startOps() {
	s.seen = map[string]time.Time{}
	// The pools grow under the lock from here on: own their arrays.
	s.cfg.Prefill, s.cfg.Decode, s.cfg.Colo = slices.Clone(s.cfg.Prefill), slices.Clone(s.cfg.Decode), slices.Clone(s.cfg.Colo)
	s.log = newLogger(s.cfg.Log, s.cfg.Ops)
	for i, p := range s.cfg.Prefill {
		s.workers = append(s.workers, &workerInfo{Role: rolePrefill, URL: p.URL, BootstrapPort: p.BootstrapPort, idx: i})
	}
	for i, u := range s.cfg.Decode {
		s.workers = append(s.workers, &workerInfo{Role: roleDecode, URL: u, idx: i})
	}
	for i, u := range s.cfg.Colo {
		s.workers = append(s.workers, &workerInfo{Role: roleColo, URL: u, idx: i})
	}
	s.met = newMetrics(s)
	s.badFields = newBadFields(s.met.reg)
	s.mux.Handle("/metrics", s.met.handler())
	s.mux.HandleFunc("/admin/", s.handleAdmin)
	s.stop = make(chan struct{})
	if s.cfg.LoadPoll > 0 {
		s.polling.Add(1)
		go func() {
			defer s.polling.Done()
			s.pollLoads(s.cfg.LoadPoll, s.stop)
		}()
	}
}

// Close stops the load poller and the background D→P syncs and waits for
// them; requests in flight are the HTTP server's to drain. It is safe to
// call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.stop) })
	s.polling.Wait()
	s.stopDToP()
	if s.direct != nil {
		s.direct.pool.closeIdle()
	}
}

// The URLs of pool members, read under the lock: the pools grow at run time.
func (s *Server) decodeURL(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Decode[i]
}

func (s *Server) coloURL(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Colo[i]
}

func (s *Server) prefillAt(i int) Prefill {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Prefill[i]
}

// router is the control plane's router of a role's pool (held lock).
func (s *Server) router(role string) *kvc.Router {
	if role == rolePrefill {
		return s.disp.PRouter()
	}
	return s.disp.DRouter()
}

// findWorker is the pool member at u, removed or not (held lock).
func (s *Server) findWorker(u string) *workerInfo {
	for _, w := range s.workers {
		if w.URL == u {
			return w
		}
	}
	return nil
}

// sessionsPerDecoder counts the sessions pinned to each decoder (held lock).
func (s *Server) sessionsPerDecoder() map[int]int {
	out := map[int]int{}
	for id := range s.turns {
		if d, ok := s.disp.DRouter().Pin(id); ok {
			out[d]++
		}
	}
	return out
}

// authorized checks the bearer token: 404 when the admin API is off, 401
// without a token, 403 with a wrong one.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.AdminToken == "" {
		writeError(w, http.StatusNotFound, "the admin API is off: the gateway has no admin token (serve --admin-token or PDHYBRID_ADMIN_TOKEN)")
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pdhybrid-admin"`)
		writeError(w, http.StatusUnauthorized, "the admin API needs Authorization: Bearer <token>")
		return false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) != 1 {
		writeError(w, http.StatusForbidden, "wrong admin token")
		return false
	}
	return true
}

func (s *Server) handleAdmin(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	method := http.MethodPost
	switch p := r.URL.Path; p {
	case "/admin/sessions", "/admin/workers":
		method = http.MethodGet
		if r.Method == method {
			if p == "/admin/sessions" {
				s.adminSessions(w)
			} else {
				s.adminWorkers(w)
			}
			return
		}
	case "/admin/workers/drain", "/admin/workers/undrain", "/admin/workers/add", "/admin/workers/remove":
		if r.Method == method {
			s.adminChange(w, r, strings.TrimPrefix(p, "/admin/workers/"))
			return
		}
	default:
		writeError(w, http.StatusNotFound, "no admin endpoint "+p+" (GET /admin/sessions, GET /admin/workers, POST /admin/workers/{drain,undrain,add,remove})")
		return
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, r.URL.Path+" takes "+method)
}

type sessionView struct {
	ID       string    `json:"session_id"`
	Decoder  string    `json:"decoder"` // "" when bound to none
	Turns    int       `json:"turns"`
	LastSeen time.Time `json:"last_seen"`
}

func (s *Server) adminSessions(w http.ResponseWriter) {
	var out []sessionView
	s.locked(func() {
		for id, n := range s.turns {
			v := sessionView{ID: id, Turns: n, LastSeen: s.seen[id]}
			if d, ok := s.disp.DRouter().Pin(id); ok {
				v.Decoder = s.disp.DRouter().Names()[d]
			}
			out = append(out, v)
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastSeen.Equal(out[j].LastSeen) {
			return out[i].LastSeen.After(out[j].LastSeen)
		}
		return out[i].ID < out[j].ID
	})
	if out == nil {
		out = []sessionView{}
	}
	writeJSONBody(w, http.StatusOK, map[string]any{"sessions": out})
}

type workerView struct {
	URL           string      `json:"url"`
	Role          string      `json:"role"`
	BootstrapPort int         `json:"bootstrap_port,omitempty"`
	State         string      `json:"state"` // active or draining
	InFlight      int         `json:"in_flight"`
	Sessions      int         `json:"sessions"`
	BreakerOpen   bool        `json:"breaker_open"`
	Load          *workerLoad `json:"load,omitempty"` // the last poll; absent before the first
	// Capabilities is what discovery last learnt (capabilities.go);
	// KVCPath the path a kvcache-centric gateway's requests take on this
	// decoder.
	Capabilities Capabilities `json:"capabilities"`
	KVCPath      string       `json:"kvc_path,omitempty"`
}

// MarshalJSON shows the capabilities that apply to the worker's role only
// (Capabilities.forRole), as the startup line and /metrics do.
func (v workerView) MarshalJSON() ([]byte, error) {
	type plain workerView
	return json.Marshal(struct {
		plain
		Capabilities map[string]any `json:"capabilities"`
	}{plain(v), v.Capabilities.forRole(v.Role)})
}

// view is w as the admin API shows it (held lock).
func (s *Server) view(w *workerInfo, bound map[int]int) workerView {
	v := workerView{URL: w.URL, Role: w.Role, BootstrapPort: w.BootstrapPort, State: "active",
		InFlight: s.router(w.Role).Inflight(w.idx), Capabilities: w.caps, KVCPath: s.kvcPath(w)}
	if w.draining {
		v.State = "draining"
	}
	if w.Role != rolePrefill {
		v.Sessions = bound[w.idx]
		v.BreakerOpen = s.disp.BreakerOpen(s.now(), w.idx)
	}
	if !w.load.At.IsZero() {
		l := w.load
		v.Load = &l
	}
	return v
}

func (s *Server) adminWorkers(w http.ResponseWriter) {
	out := []workerView{}
	s.locked(func() {
		bound := s.sessionsPerDecoder()
		for _, wk := range s.workers {
			if !wk.removed {
				out = append(out, s.view(wk, bound))
			}
		}
	})
	writeJSONBody(w, http.StatusOK, map[string]any{"mechanism": s.cfg.Dispatch.Mechanism, "workers": out})
}

// workerChange is the body of POST /admin/workers/{drain,undrain,add,remove}.
type workerChange struct {
	URL           string `json:"url"`
	Role          string `json:"role"`           // add: prefill, decode or colo
	BootstrapPort int    `json:"bootstrap_port"` // add, prefill: default 8998
}

func (s *Server) adminChange(w http.ResponseWriter, r *http.Request, op string) {
	var in workerChange
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)) // /admin/ is outside the body cap
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "body: want {\"url\": ...}: "+err.Error())
		return
	}
	in.URL = strings.TrimRight(in.URL, "/")
	if _, err := url.ParseRequestURI(in.URL); err != nil || in.URL == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("url %q is not a worker URL", in.URL))
		return
	}
	var (
		status = http.StatusOK
		msg    string
		v      workerView
	)
	s.locked(func() {
		wk := s.findWorker(in.URL)
		if op == "add" {
			status, msg, wk = s.addWorker(wk, in)
			if status < 300 {
				s.met.workerSeries(wk.URL)
			}
		} else if wk == nil || wk.removed {
			status, msg = http.StatusNotFound, "no worker "+in.URL+" in the pool"
		} else {
			status, msg = s.changeWorker(wk, op)
		}
		if status < 300 {
			v = s.view(wk, s.sessionsPerDecoder())
		}
	})
	if status >= 300 {
		writeError(w, status, msg)
		return
	}
	if op == "remove" {
		v.State = "removed"
	}
	writeJSONBody(w, status, map[string]any{"worker": v})
}

// addWorker puts a worker into its pool, or takes its old slot back (held
// lock).
func (s *Server) addWorker(wk *workerInfo, in workerChange) (int, string, *workerInfo) {
	colo := s.cfg.Dispatch.Mechanism == kvc.MechColo
	switch {
	case colo && in.Role != roleColo, !colo && in.Role != rolePrefill && in.Role != roleDecode:
		want := "prefill or decode"
		if colo {
			want = "colo"
		}
		return http.StatusBadRequest, fmt.Sprintf("role %q: %s takes %s", in.Role, s.cfg.Dispatch.Mechanism, want), nil
	case in.BootstrapPort < 0 || in.BootstrapPort > 65535:
		return http.StatusBadRequest, fmt.Sprintf("bootstrap_port %d: want a TCP port in [1, 65535]", in.BootstrapPort), nil
	case wk != nil && !wk.removed:
		return http.StatusConflict, "worker " + in.URL + " is already in the pool (as " + wk.Role + ")", nil
	case wk != nil && wk.Role != in.Role:
		return http.StatusConflict, "worker " + in.URL + " was a " + wk.Role + " worker; its slot cannot change role", nil
	}
	if in.Role == rolePrefill && in.BootstrapPort == 0 {
		in.BootstrapPort = 8998
	}
	if wk != nil { // back into its old slot
		wk.removed, wk.draining, wk.load = false, false, workerLoad{}
		if in.Role == rolePrefill {
			wk.BootstrapPort = in.BootstrapPort
			s.cfg.Prefill[wk.idx].BootstrapPort = in.BootstrapPort
		}
		s.router(in.Role).SetExcluded(wk.idx, false)
		return http.StatusOK, "", wk
	}
	wk = &workerInfo{Role: in.Role, URL: in.URL, BootstrapPort: in.BootstrapPort}
	switch in.Role {
	case rolePrefill:
		wk.idx = s.disp.AddPrefill(in.URL)
		s.cfg.Prefill = append(s.cfg.Prefill, Prefill{URL: in.URL, BootstrapPort: in.BootstrapPort})
	case roleDecode:
		wk.idx = s.disp.AddDecoder(in.URL)
		s.cfg.Decode = append(s.cfg.Decode, in.URL)
		s.streamKVEvents(wk.idx, in.URL) // with --kv-events (kvevents.go)
	default:
		wk.idx = s.disp.AddDecoder(in.URL)
		s.cfg.Colo = append(s.cfg.Colo, in.URL)
	}
	s.workers = append(s.workers, wk)
	return http.StatusCreated, "", wk
}

// changeWorker drains, undrains or removes a pool member (held lock).
func (s *Server) changeWorker(wk *workerInfo, op string) (int, string) {
	r := s.router(wk.Role)
	switch op {
	case "drain":
		wk.draining = true
		r.SetExcluded(wk.idx, true)
	case "undrain":
		wk.draining = false
		r.SetExcluded(wk.idx, false)
	case "remove":
		if n := r.Inflight(wk.idx); n > 0 {
			return http.StatusConflict, fmt.Sprintf("worker %s has %d requests in flight: drain it (POST /admin/workers/drain), wait until its in_flight is 0 (GET /admin/workers), then remove it", wk.URL, n)
		}
		wk.removed, wk.draining = true, false
		r.SetExcluded(wk.idx, true)
		if wk.Role == rolePrefill {
			r.Reset(wk.idx)
		} else {
			s.disp.ForgetDecoder(wk.idx)
		}
		s.met.dropLoadGauges(wk.Role, wk.URL)
		s.met.dropWorkerSeries(wk.URL)
	}
	return http.StatusOK, ""
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
