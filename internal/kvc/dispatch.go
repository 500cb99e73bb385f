package kvc

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// The dispatcher decides, for one request, what the serving system does:
// it yields actions (an admission RPC to a decoder, a direct append on D, a
// seed or reseed through P, plain PD, colocated serving, or a failure with
// its cause) and consumes their outcomes. It has no clock, no goroutines and
// no engine calls: the simulator executes its actions on engines in virtual
// time, the gateway as HTTP calls, and both feed the outcomes back. Times
// are passed in only to be handed back as action delays.

// Mechanism names a deployment (DESIGN §4).
type Mechanism string

const (
	MechPD    Mechanism = "pd-disaggregation" // naive PD
	MechColo  Mechanism = "pd-colo"           // data-parallel colocated
	MechKVC   Mechanism = "kvcache-centric"   // KVC: direct-to-D, seed/reseed, fallbacks
	maxPauseS           = 2.0                 // the router's cap on recommended_pause_ms
)

// Gate says who checks τ_append and the session cap before a direct append.
type Gate string

const (
	GateWorker Gate = "worker" // the decoder's admission RPC decides (ours)
	GateRouter Gate = "router" // the router estimates before the RPC (the seed's code, Δ2)
)

// RejectReset says when a (session, decoder) reject count returns to zero.
type RejectReset string

const (
	ResetDirect RejectReset = "direct" // on a direct-to-D success only (the seed's code)
	ResetAny    RejectReset = "any"    // on any success on that decoder (the spec)
	ResetOff    RejectReset = "off"    // never (v1: a permanent blacklist, F8)
)

// Belief says how the router's picture of decoder residency changes.
type Belief string

const (
	BeliefTrack       Belief = "track"        // follows the workers' eviction reports
	BeliefNeverShrink Belief = "never-shrink" // never forgets (the seed, F9)
)

// DispatchConfig is the control plane's configuration for a run.
type DispatchConfig struct {
	Mechanism Mechanism
	Policy    Policy // decoder choice (Algorithm 1 is kv-aware)
	Options   Options
	// TauReject blacklists a decoder for a session after this many rejects
	// (0 = never); TauAppend is the largest direct append (tokens).
	TauReject int
	TauAppend int
	// MaxRetries is ε, the admission attempts after the first before the
	// fallback to plain PD; −1 takes |D|−1.
	MaxRetries  int
	SeedMinTurn int // turns before this one go plain PD (seed-filter-early-turn)
	Gate        Gate
	Reset       RejectReset
	Belief      Belief
	SessionCap  int // router-gate only: sessions believed on one decoder
	// Breaker guards each decoder against a failing transport (breaker.go).
	Breaker BreakerConfig
	// SeedMaxInflight caps the seeds in flight to one decoder (the seed's
	// --kvcache-seed-max-inflight-decode; 0 = no cap): a decoder at the cap
	// is passed over for seeds, not for direct appends.
	SeedMaxInflight int
	// Peer holds the peer baselines' knobs (peers.go); BlockSize is the
	// tokens per block id, DecodeKVBlocks a decoder's pool in blocks.
	Peer           PeerConfig
	BlockSize      int
	DecodeKVBlocks int
	// V3 holds KVC v3's options (v3.go); the zero value is v2.
	V3 V3Config
}

// ParseGate, ParseReset and ParseBelief check option values.
func ParseGate(s string) (Gate, error) {
	switch g := Gate(s); g {
	case GateWorker, GateRouter:
		return g, nil
	}
	return "", fmt.Errorf("unknown admission gate %q (want worker or router)", s)
}

func ParseReset(s string) (RejectReset, error) {
	switch r := RejectReset(s); r {
	case ResetDirect, ResetAny, ResetOff:
		return r, nil
	}
	return "", fmt.Errorf("unknown reject reset %q (want direct, any or off)", s)
}

func ParseBelief(s string) (Belief, error) {
	switch b := Belief(s); b {
	case BeliefTrack, BeliefNeverShrink:
		return b, nil
	}
	return "", fmt.Errorf("unknown residency belief %q (want track or never-shrink)", s)
}

// Request is what the dispatcher needs to know of one request.
type Request struct {
	Session string
	Turn    int
	Blocks  []uint64 // read during Begin and Reply only
	Input   int
	Output  int
	// Avoid lists decoders (or colocated workers) not to use for this
	// request when another will do: the ones whose failures it is being
	// retried after.
	Avoid []int
	// Parent is the session a sub-agent's session was spawned from
	// (parent.go): its decoder is preferred while Session has none.
	Parent string
}

func (r *Request) avoids(w int) bool {
	for _, a := range r.Avoid {
		if a == w {
			return true
		}
	}
	return false
}

// ActionKind is what the executor must do next.
type ActionKind uint8

const (
	ActAdmit  ActionKind = iota // admission RPC to decoder D (wait Delay first)
	ActDirect                   // direct append on D (KeepSession)
	ActSeed                     // P prefills, the KV goes to D, D keeps the session
	ActPD                       // plain PD on P and D; D keeps nothing
	ActColo                     // colocated worker W serves it whole
	ActLocal                    // decoder D prefills it itself and decodes it (a peer's local prefill)
	ActFail                     // give up with Cause
	ActDone                     // nothing more: the request is running or over
	ActWholeP                   // prefill worker P serves it whole, prefill and decode (v3)
)

// Action is one step of a request's dispatch.
type Action struct {
	Kind      ActionKind
	P, D      int     // worker indices in their pools (−1 when unused)
	Delay     float64 // seconds to wait before acting (backpressure)
	MaxAppend int     // ActAdmit: τ_append for the worker to check (0 = none)
	ForceSeed bool    // ActAdmit: ask for a seed even if the session is resident
	// DirectOnly (ActAdmit, router gate): ask for a direct append only, as
	// the seed's router did for a session it believed resident there; a
	// decoder that does not hold it refuses (session-not-resident).
	DirectOnly bool
	// Inline (ActAdmit, v3): the admission check rides on the request
	// itself, so the executor sends it without a separate round trip.
	Inline bool
	Cause  string // ActFail
}

// AdmitReply is a decoder's structured answer to an admission RPC.
type AdmitReply struct {
	CanAdmit bool
	Direct   bool // a direct append (else a seed)
	Reason   string
	PauseMs  float64
	// Unreachable: the RPC got no answer from the decoder (a timeout, a
	// refused connection, an HTTP error). The request moves on to the next
	// decoder, but it is not the session's reject: a decoder that was slow
	// once is not blacklisted for the session.
	Unreachable bool
	// CachedTokens is the prompt tokens the decoder holds for the request
	// (v3 weighs the rest against the prefill worker's queue).
	CachedTokens int
}

type rejKey struct {
	session string
	d       int
}

type sessState struct {
	seen     bool
	pin      int            // decoder holding the session (router's belief); −1 none
	last     int            // decoder that last held it, evicted or not; −1 none
	resident int            // tokens believed resident on pin (router gate); 0 while unknown
	pending  int            // tokens pin will hold once the request in flight there ends
	inflight int            // its requests direct or seeded, not yet finished
	evicted  bool           // last reported evicting it (labels: session-was-evicted)
	backup   int            // prefill worker keeping a capacity-backup of it; −1 none
	handles  []radix.Handle // per decoder: the path the router believes it holds
	// pd-conditional's session affinity (peers.go): the decoder the session
	// is bound to and when the binding was last used.
	bound   bool
	boundD  int
	boundAt float64
	// onP is 1 + the prefill worker that last served the session whole
	// (KVC v3's whole-on-p), 0 when none.
	onP int
}

// Dispatcher holds the control plane's state for one deployment.
type Dispatcher struct {
	cfg      DispatchConfig
	p, d     *Router // P and D routers (d is the colocated pool for MechColo)
	rejects  map[rejKey]int
	sessions map[string]*sessState
	onD      []int // sessions believed pinned per decoder (router gate cap)
	breakers []breaker
	seeding  []int            // seeds in flight per decoder (SeedMaxInflight)
	autoEps  bool             // MaxRetries follows |D|−1 as decoders are added
	pActive  []int            // the peers: prefill tokens in flight per prefill worker
	dActive  []int            // the peers: blocks of requests in flight per decoder
	dPrefill []int            // pd-conditional: blocks of local prefills in flight per decoder
	backups  map[int][]string // per prefill worker: the sessions it keeps a backup of
	load     v3Load
}

// NewDispatcher makes the control plane over the named prefill and decode
// (or colocated) workers. prefill is empty for MechColo.
func NewDispatcher(cfg DispatchConfig, prefill, decode []string, pOpts, dOpts Options) *Dispatcher {
	auto := cfg.MaxRetries < 0
	if auto {
		cfg.MaxRetries = len(decode) - 1
	}
	x := &Dispatcher{cfg: cfg, rejects: map[rejKey]int{}, sessions: map[string]*sessState{}, onD: make([]int, len(decode)),
		breakers: make([]breaker, len(decode)), seeding: make([]int, len(decode)), autoEps: auto}
	for i := range x.breakers {
		x.breakers[i].cfg = cfg.Breaker
	}
	if len(prefill) > 0 {
		x.p = NewRouter(prefill, cfg.Policy, pOpts)
	}
	x.pActive, x.dActive, x.dPrefill = make([]int, len(prefill)), make([]int, len(decode)), make([]int, len(decode))
	x.d = NewRouter(decode, cfg.Policy, dOpts)
	return x
}

// PRouter and DRouter expose the routers (counters, pins) to the executor.
func (x *Dispatcher) PRouter() *Router { return x.p }
func (x *Dispatcher) DRouter() *Router { return x.d }

// Dispatch is one request's way through the dispatcher.
type Dispatch struct {
	x        *Dispatcher
	r        Request
	act      Action
	tried    []bool
	attempts int
	why      string // why the request did not go direct (first reason)
	suffix   string // the fallback's refinement (-session-cap, ...)
	mode     string
	path     []string
	chosenD  int
	chosenP  int
	kind     ActionKind // the executing action, once decided
	pause    float64
	accepted bool
	seeding  bool    // counted in its decoder's seeds in flight
	probe    bool    // the half-open breaker's probe
	holds    bool    // a direct or seed counted in its session's inflight
	now      float64 // when Begin was called: breakers judge by it
	lastD    int     // the session's decoder before this request
	pTok     int     // the peers: prefill tokens counted in pActive
	dBlk     int     // the peers: blocks counted in dActive
	dPre     int     // pd-conditional: local prefill blocks counted in dPrefill
	// v3 (v3.go): what this request adds to its queues of prefill work.
	cached, dTok, dQ, pQ, pQAt int
	pend, pendD                int  // cold routing's tokens on a decoder until it answers
	inline                     bool // the admission in flight rode on the request
}

// Begin starts a request's dispatch at now; Action says what to do first.
func (x *Dispatcher) Begin(now float64, r Request) *Dispatch {
	t := &Dispatch{x: x, r: r, tried: make([]bool, len(x.d.names)), chosenD: -1, chosenP: -1, now: now, lastD: -1}
	if s := x.sessions[r.Session]; s != nil {
		t.lastD = s.last
	}
	switch x.cfg.Mechanism {
	case MechColo:
		w := x.d.PickAmong(t.routeKey(), r.Blocks, func(i int) bool { return !r.avoids(i) }).Worker
		if w < 0 {
			w = x.d.Pick(r.Session, r.Blocks).Worker
		}
		if w < 0 {
			t.noWorker("colocated")
			break
		}
		t.decide(ActColo, -1, w, "dp-colo-router")
	case MechPD:
		t.plainPD("pd-disaggregation-router")
	case MechConditional, MechPrefixDecider, MechDecodeRadix:
		t.beginPeer()
	default:
		t.beginKVC()
	}
	return t
}

func (t *Dispatch) beginKVC() {
	x := t.x
	if t.r.Session == "" {
		// Nothing to keep on a decoder: no admission RPCs, plain PD.
		t.note("no session: plain PD")
		t.plainPD("pd-router-no-session")
		return
	}
	s := x.session(t.r.Session)
	if t.r.Turn < x.cfg.SeedMinTurn {
		t.note("seed filter: turn %d < seed-min-turn %d", t.r.Turn, x.cfg.SeedMinTurn)
		t.setWhy("session-not-resident")
		t.suffix = "-seed-filter-early-turn"
		t.fallback()
		return
	}
	_ = s
	if t.v3StayOnP() {
		return
	}
	t.route()
}

// route picks the next decoder to ask (Algorithm 1 with the blacklist) and
// asks it, or falls back once ε retries are spent.
func (t *Dispatch) route() {
	x := t.x
	if t.attempts > x.cfg.MaxRetries {
		t.fallback()
		return
	}
	// Breakers do not keep a decoder from direct appends, which move no KV
	// over the failing transport; they hold back seeds and plain PD.
	allowed := func(d int) bool {
		return d < len(t.tried) && !t.tried[d] && !t.r.avoids(d) && (x.cfg.TauReject <= 0 || x.rejects[rejKey{t.r.Session, d}] < x.cfg.TauReject)
	}
	d := x.d.PickAmong(t.routeKey(), t.r.Blocks, allowed).Worker
	if d < 0 {
		// Every untried decoder is blacklisted: the least-rejected one.
		best := -1
		for i := range t.tried {
			if !t.tried[i] && !x.d.Out(i) && (best < 0 || x.rejects[rejKey{t.r.Session, i}] < x.rejects[rejKey{t.r.Session, best}]) {
				best = i
			}
		}
		if best < 0 {
			t.fallback()
			return
		}
		d = best
		t.note("every decoder blacklisted: least-rejected %s", x.d.names[d])
	}
	s := x.session(t.r.Session)
	if t.attempts == 0 && s.pin >= 0 && s.pin != d {
		// The policy (score or blacklist) passed over the decoder believed
		// to hold the session: no bypass of P there.
		t.setWhy("policy-no-bypass")
	}
	if x.cfg.Mechanism == MechKVC && x.cfg.V3.ColdRoute && s.pin < 0 {
		if c := t.v3ColdPick(allowed); c >= 0 {
			d = c // v3: capacity-aware routing of a session no decoder holds (v3.go)
		}
	}
	t.attempts++
	t.tried[d] = true
	t.chosenD = d
	a := Action{Kind: ActAdmit, P: -1, D: d, Delay: t.pause}
	t.pause = 0
	if x.cfg.Mechanism == MechKVC && x.cfg.V3.Inline && t.attempts == 1 {
		a.Inline, t.inline = true, true
	}
	if x.cfg.Gate == GateRouter {
		// The seed's router-side gate: the router estimates the append from
		// what it believes d holds, and checks its session cap, before the RPC.
		switch {
		case s.pin == d && s.resident == 0:
			t.setWhy("no-direct-info") // pinned, but nothing known of what it holds
		case s.pin == d && t.r.Input-s.resident > x.cfg.TauAppend:
			a.ForceSeed = true
			t.setWhy("real-large-append")
		case s.pin == d:
			a.DirectOnly = true
		}
		if x.cfg.SessionCap > 0 && s.pin != d && x.onD[d] >= x.cfg.SessionCap {
			t.reject(d, AdmitReply{Reason: "session-cap"}, "router session cap")
			return
		}
	} else {
		a.MaxAppend = x.cfg.TauAppend
	}
	t.act = a
}

// Action is the next step to execute.
func (t *Dispatch) Action() Action { return t.act }

// Reply feeds the answer to the last ActAdmit.
func (t *Dispatch) Reply(rep AdmitReply) {
	if t.act.Kind != ActAdmit {
		panic("kvc: Reply without an admission in progress")
	}
	d := t.act.D
	x := t.x
	t.cached = rep.CachedTokens
	t.v3Answered()
	if t.inline {
		// The inline check came back without starting the request on d:
		// the answer's round trip is paid before the next step.
		t.inline = false
		if !rep.Direct && !t.v3Placed(d, rep) {
			t.pause += x.cfg.V3.RTTS
		} else if !rep.Direct {
			return
		}
	} else if t.v3Placed(d, rep) {
		return
	}
	if !rep.CanAdmit {
		t.reject(d, rep, "")
		return
	}
	t.note("admit %s: %s", x.d.names[d], map[bool]string{true: "direct", false: "seed (" + rep.Reason + ")"}[rep.Direct])
	if rep.Direct {
		t.decide(ActDirect, -1, d, "kvcache-direct-to-d-session")
		return
	}
	if !x.breakers[d].allows(t.now) {
		// A seed would cross the transport whose failures opened d's
		// breaker: try another decoder (not a reject of the session).
		t.note("skip %s: its transfer breaker is open", x.d.names[d])
		t.route()
		return
	}
	if c := x.cfg.SeedMaxInflight; c > 0 && x.seeding[d] >= c {
		t.note("skip %s: %d seeds in flight (seed-max-inflight-decode %d)", x.d.names[d], x.seeding[d], c)
		t.suffixOnce("-d-backpressure")
		t.route()
		return
	}
	s := x.session(t.r.Session)
	p := x.p.Pick(t.r.Session, t.r.Blocks).Worker
	if p < 0 {
		t.noWorker("prefill")
		return
	}
	after := ""
	if rep.Reason == "session-was-evicted" {
		// The decoder held the session once and evicted it; with a
		// capacity-backup of it on a prefill worker, the seed's
		// -after-prefill-backed-eviction.
		after = "-after-eviction"
		if s.backup >= 0 {
			after = "-after-prefill-backed-eviction"
			t.note("prefill backup of the session on %s", x.p.names[s.backup])
		}
	}
	if rep.Reason == "real-large-append" {
		t.setWhy("real-large-append")
	}
	switch {
	case !s.seen:
		t.decide(ActSeed, p, d, "pd-router-turn1-seed")
	case s.last == d && t.why == "":
		t.decide(ActSeed, p, d, "pd-router-d-session-reseed"+after)
	default:
		t.notResident()
		t.decide(ActSeed, p, d, "pd-router-"+t.why+"-reseed"+after)
	}
}

// notResident sets the reason for a request not going direct that
// has no more specific one: the session was not there, or (the seed's
// session-was-evicted) its last decoder reported evicting it.
func (t *Dispatch) notResident() {
	if s := t.x.session(t.r.Session); s.evicted && s.last >= 0 {
		t.setWhy("session-was-evicted")
		return
	}
	t.setWhy("session-not-resident")
}

// reject counts a refusal from d (from the structured reply, never from a
// label) and moves on to the next decoder.
func (t *Dispatch) reject(d int, rep AdmitReply, detail string) {
	x := t.x
	if !rep.Unreachable && !(x.cfg.Mechanism == MechKVC && x.cfg.V3.TypedRejects && rep.Reason == "no-space") {
		x.rejects[rejKey{t.r.Session, d}]++
	}
	if detail == "" {
		detail = rep.Reason
	}
	t.note("reject %s: %s", x.d.names[d], detail)
	s := x.session(t.r.Session)
	switch rep.Reason {
	case "real-large-append":
		t.setWhy("real-large-append")
	case "session-not-resident":
		t.notResident()
	case "session-cap":
		t.suffixOnce("-session-cap")
	case "no-space":
		t.suffixOnce("-no-d-capacity")
	}
	if rep.PauseMs > 0 {
		t.pause = min(rep.PauseMs/1000, maxPauseS)
		t.suffixOnce("-d-backpressure")
	}
	if t.why == "" {
		if s.pin == d {
			// The decoder holding the session refused an append within
			// τ_append (no space, its session cap, backpressure, no
			// answer): the seed's catch-all other-large-append.
			t.setWhy("other-large-append")
		} else {
			t.notResident()
		}
	}
	t.route()
}

// setWhy records the first reason the request did not go direct; the path
// keeps it with the others that followed.
func (t *Dispatch) setWhy(w string) {
	if t.why == "" {
		t.why = w
		t.note("why: %s", w)
	}
}

func (t *Dispatch) suffixOnce(s string) {
	if t.suffix == "" {
		t.suffix = s
	}
}

// fallback sends the request through plain PD with the reason it could not
// go direct or seed.
func (t *Dispatch) fallback() {
	if t.why == "" && t.attempts == 0 && t.suffix == "" {
		// No decoder could be asked at all (every one out of the pool):
		// the seed's pd-router-fallback-no-d-capacity, decided when its
		// policy found no decoder.
		t.note("no decoder to ask")
		t.mode = "pd-router-fallback-no-d-capacity" // kept if plain PD finds none either
		t.plainPD(t.mode)
		return
	}
	if t.why == "" {
		t.notResident()
	}
	if t.v3Fallback() {
		return
	}
	if !t.x.session(t.r.Session).seen && t.suffix == "-d-backpressure" {
		t.plainPD("pd-router-turn1-d-backpressure")
		return
	}
	t.plainPD("pd-router-fallback-" + t.why + t.suffix)
}

func (t *Dispatch) plainPD(mode string) {
	x := t.x
	p := x.p.Pick(t.r.Session, t.r.Blocks).Worker
	d := x.d.PickAmong(t.routeKey(), t.r.Blocks, func(d int) bool { return !t.r.avoids(d) && x.breakers[d].allows(t.now) }).Worker
	if d < 0 {
		// Every breaker is open: send it anyway to the one that opened
		// first, whose cooldown ends soonest; its outcome is the probe.
		for i := range x.breakers {
			if !x.d.Out(i) && (d < 0 || x.breakers[i].openedAt < x.breakers[d].openedAt) {
				d = i
			}
		}
		if d >= 0 {
			t.note("every decoder's transfer breaker is open: %s opened first", x.d.names[d])
		}
	}
	if p < 0 || d < 0 {
		t.noWorker(map[bool]string{true: "prefill", false: "decode"}[p < 0])
		return
	}
	t.decide(ActPD, p, d, mode)
	t.act.Delay = t.pause
}

func (t *Dispatch) decide(k ActionKind, p, d int, mode string) {
	t.kind, t.chosenP, t.chosenD, t.mode = k, p, d, mode
	t.act = Action{Kind: k, P: p, D: d, Delay: t.pause} // a pause still owed (v3's inline round trip)
}

func (t *Dispatch) note(format string, args ...any) {
	t.path = append(t.path, fmt.Sprintf(format, args...))
}

// Mode is the request's execution-mode label (DESIGN §5); Path the chain of
// reasons that led to it.
func (t *Dispatch) Mode() string   { return t.mode }
func (t *Dispatch) Path() []string { return t.path }

// Accepted tells the dispatcher the workers took the decided action: the
// routers' state moves (only accepted requests pin sessions or enter the
// cache belief).
func (t *Dispatch) Accepted() {
	x := t.x
	t.accepted = true
	t.v3Accepted()
	if t.chosenD >= 0 && (t.kind == ActSeed || t.kind == ActPD) {
		// Only what crosses the transport can probe its breaker.
		t.probe = x.breakers[t.chosenD].sent(t.now)
	}
	if x.cfg.Mechanism.IsPeer() {
		x.bindSession(t)
		x.dActive[t.chosenD] += t.dBlk
		x.dPrefill[t.chosenD] += t.dPre
		if t.kind == ActPD {
			x.pActive[t.chosenP] += t.pTok
		}
	}
	switch t.kind {
	case ActWholeP:
		t.v3AcceptedWholeP()
	case ActColo, ActLocal:
		x.d.Dispatched(t.chosenD, t.r.Session, t.r.Blocks)
	case ActPD:
		x.p.Dispatched(t.chosenP, t.r.Session, t.r.Blocks)
		if x.cfg.Mechanism == MechKVC {
			x.d.Dispatched(t.chosenD, t.r.Session, nil) // D keeps nothing of it
			x.d.Unpin(t.r.Session, t.chosenD)
			x.unpin(t.r.Session)
		} else {
			x.d.Dispatched(t.chosenD, t.r.Session, t.r.Blocks)
		}
	case ActDirect, ActSeed:
		if t.kind == ActSeed {
			x.p.Dispatched(t.chosenP, t.r.Session, t.r.Blocks)
			x.seeding[t.chosenD]++
			t.seeding = true
		}
		h := x.d.Dispatched(t.chosenD, t.r.Session, t.r.Blocks)
		s := x.session(t.r.Session)
		if s.pin != t.chosenD {
			x.unpin(t.r.Session)
			x.onD[t.chosenD]++
		}
		// What d will hold is known once the request ends (router gate:
		// until then a next turn there is no-direct-info).
		s.pin, s.last, s.resident, s.pending, s.evicted = t.chosenD, t.chosenD, 0, t.r.Input+t.r.Output, false
		s.inflight++
		t.holds = true
		if len(s.handles) < len(x.d.names) {
			s.handles = append(s.handles, make([]radix.Handle, len(x.d.names)-len(s.handles))...)
		}
		s.handles[t.chosenD] = h
	}
	x.session(t.r.Session).seen = true
	t.act = Action{Kind: ActDone, P: -1, D: -1}
}

// Refused tells the dispatcher the workers refused the decided action (a
// request larger than a pool, say): the request fails with the cause.
func (t *Dispatch) Refused(cause string) {
	t.note("refused: %s", cause)
	t.act = Action{Kind: ActFail, P: -1, D: -1, Cause: cause}
}

// PrefillDone tells the dispatcher the request left its prefill worker (or,
// prefilled on its decoder, produced its first token there).
func (t *Dispatch) PrefillDone() {
	t.v3PrefillDone()
	if t.accepted && t.dPre > 0 {
		t.x.dPrefill[t.chosenD] -= t.dPre
		t.dPre = 0
	}
	if t.seeding {
		t.x.seeding[t.chosenD]--
		t.seeding = false
	}
	if t.accepted && t.chosenP >= 0 {
		t.x.p.Done(t.chosenP)
		if t.x.cfg.Mechanism.IsPeer() {
			t.x.pActive[t.chosenP] -= t.pTok
		}
		t.chosenP = -1
	}
}

// Finished tells the dispatcher the request ended (ok: completed). Reject
// counts reset per the configured rule.
func (t *Dispatch) Finished(ok bool) {
	x := t.x
	t.v3Answered()
	t.PrefillDone()
	if t.probe {
		// A probe that ended with no transport outcome (cut short before
		// its transfer landed or failed) frees the half-open slot.
		x.breakers[t.chosenD].probing = false
		t.probe = false
	}
	if !t.accepted || t.chosenD < 0 {
		return // not started, or served whole on a prefill worker (v3)
	}
	if t.holds {
		t.holds = false
		if s := x.sessions[t.r.Session]; s != nil {
			s.inflight--
			if ok && s.inflight == 0 && s.pin == t.chosenD {
				s.resident = s.pending
			}
		}
	}
	x.d.Done(t.chosenD)
	if x.cfg.Mechanism.IsPeer() {
		x.dActive[t.chosenD] -= t.dBlk
		t.dBlk = 0
		if s := x.sessions[t.r.Session]; !ok && s != nil && s.bound && s.boundD == t.chosenD {
			s.bound = false // Dynamo: a failure invalidates the binding
		}
	}
	if !ok || x.cfg.Mechanism != MechKVC {
		return
	}
	switch {
	case x.cfg.Reset == ResetDirect && t.kind == ActDirect,
		x.cfg.Reset == ResetAny && (t.kind == ActDirect || t.kind == ActSeed):
		delete(x.rejects, rejKey{t.r.Session, t.chosenD})
	}
}

// LastDecoder is the decoder that held the request's session before this
// request (−1 when none): where a passive D→P snapshot comes from.
func (t *Dispatch) LastDecoder() int { return t.lastD }

// Decoder and Prefill are the chosen workers (−1 when none).
func (t *Dispatch) Decoder() int { return t.chosenD }
func (t *Dispatch) Prefill() int { return t.chosenP }

// SessionEvicted is a decoder's report that it evicted a session. With the
// tracking belief the router forgets it was there; never-shrink keeps
// believing (the seed, F9).
func (x *Dispatcher) SessionEvicted(d int, session string) {
	if x.cfg.Belief != BeliefTrack {
		return
	}
	s := x.sessions[session]
	if s == nil {
		return
	}
	// Forget what d held of it even if the session has moved on: a decoder
	// it left keeps its copy until it evicts it, and says so then.
	if d < len(s.handles) {
		x.d.ForgetBlocks(d, s.handles[d])
		s.handles[d] = radix.Handle{}
	}
	if s.pin == d {
		x.d.Unpin(session, d)
		x.unpin(session)
	}
	if s.last == d {
		s.evicted = true
	}
}

// PrefillBackups is a prefill worker's report of the sessions whose
// capacity-backup it keeps now (engine/backup.go): labels of reseeds after
// an eviction say whether P held the session (-after-prefill-backed-eviction).
func (x *Dispatcher) PrefillBackups(p int, sessions []string) {
	if x.backups == nil {
		x.backups = map[int][]string{}
	}
	for _, id := range x.backups[p] {
		if s := x.sessions[id]; s != nil && s.backup == p {
			s.backup = -1
		}
	}
	x.backups[p] = append(x.backups[p][:0], sessions...)
	for _, id := range sessions {
		x.session(id).backup = p
	}
}

func (x *Dispatcher) unpin(session string) {
	s := x.session(session)
	if s.pin >= 0 {
		x.onD[s.pin]--
		s.pin, s.resident, s.pending = -1, 0, 0
	}
}

func (x *Dispatcher) session(id string) *sessState {
	s := x.sessions[id]
	if s == nil {
		s = &sessState{pin: -1, last: -1, backup: -1}
		x.sessions[id] = s
	}
	return s
}

// Rejects is the (session, decoder) reject count (tests, logs).
func (x *Dispatcher) Rejects(session string, d int) int { return x.rejects[rejKey{session, d}] }
