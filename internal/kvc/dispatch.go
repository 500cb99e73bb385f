package kvc

import (
	"github.com/pdhybrid/pdhybrid/internal/idtable"
	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// The dispatcher decides, for one request, what the serving system does:
// it yields actions (an admission RPC to a decoder, a direct append on D, a
// seed or reseed through P, plain PD, colocated serving, or a failure with
// its cause) and consumes their outcomes. It has no clock, no goroutines and
// no engine calls: the simulator executes its actions on engines in virtual
// time, the gateway as HTTP calls, and both feed the outcomes back. Times
// are passed in only to be handed back as action delays.

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
	// Resident (ActAdmit) is what the router believes D holds of the
	// session, in tokens (0: nothing known): its own admission for a
	// decoder without the session cache checks τ_append against it
	// (RouterAdmit).
	Resident int
	Cause    string // ActFail
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
	// Tier is where the decoder holds the session's prefix: "hbm", "host"
	// (its host KV tier: a direct append loads HostTokens of CachedTokens
	// back first), "storage" (its storage pool below host: a direct append
	// prefetches StorageTokens of CachedTokens storage→host, then loads them
	// back) or "none"; "" from a decoder that does not say (tiers.go).
	Tier          string
	HostTokens    int
	StorageTokens int
	// StorageQueueS is how long the shared storage pool's aggregate link is
	// booked past the answer by prefetches before this one (0 for a pool
	// of the decoder's own or of unlimited bandwidth): tier costing adds it
	// to the prefetch (TierCost.PrefetchDoneS).
	StorageQueueS float64
}

type sessState struct {
	seen     bool
	pin      int            // decoder holding the session (router's belief); −1 none
	last     int            // decoder that last held it, evicted or not; −1 none
	resident int            // tokens believed resident on pin (router gate); 0 while unknown
	pending  int            // tokens pin will hold once the request in flight there ends
	inflight int            // its requests direct or seeded, not yet finished
	evicted  bool           // last reported evicting it (labels: session-was-evicted)
	onHost   bool           // pin reported demoting it to its host tier (tiers.go)
	hostTok  int            // tokens of it believed on that host tier (TierTokens)
	onStore  bool           // pin's storage pool holds it beyond what HBM and host do (tiers.go)
	storeTok int            // tokens of it believed only in that storage pool (TierTokens)
	backup   int            // prefill worker keeping a capacity-backup of it; −1 none
	handles  []radix.Handle // per decoder: the path the router believes it holds
	rejects  []int          // per decoder: its refusals of the session (τ_reject), nil while none
	rejectAt [][]float64    // per decoder: when each counted refusal came (RejectWindowS only)
	// pd-conditional's session affinity (peers.go): the decoder the session
	// is bound to and when the binding was last used.
	bound   bool
	boundD  int
	boundAt float64
	// onP is 1 + the prefill worker that last served the session whole
	// (KVC v3's whole-on-p), 0 when none.
	onP int
	// closed: the session sends nothing more (CloseSession, close.go).
	closed bool
	key    SessionKey // how it is filed in Dispatcher.sessions
	// holds is the pin book's entry of it per decoder (pinbook.go), nil
	// where it never kept KV.
	holds []*pinHold
}

// Dispatcher holds the control plane's state for one deployment.
type Dispatcher struct {
	cfg      DispatchConfig
	p, d     *Router // P and D routers (d is the colocated pool for MechColo)
	sessions idtable.Keyed[*sessState]
	onD      []int // sessions believed pinned per decoder (router gate cap)
	breakers []breaker
	seeding  []int                // seeds in flight per decoder (SeedMaxInflight)
	autoEps  bool                 // MaxRetries follows |D|−1 as decoders are added
	pActive  []int                // the peers: prefill tokens in flight per prefill worker
	dActive  []int                // the peers: blocks of requests in flight per decoder
	dPrefill []int                // pd-conditional: blocks of local prefills in flight per decoder
	backups  map[int][]SessionKey // per prefill worker: the sessions it keeps a backup of
	load     v3Load
	v4       v4State // decode isolation (v4.go)
	pins     pinBook // what each decoder holds pinned, per session (pinbook.go)
	// pinsOn: the pin book is kept, because something reads it (ColdTrimWeight,
	// HomeReseed) or a test asked (KeepPinBook); off, it costs a KVC run
	// nothing (it was 10 % of a 100K v3 run's allocations).
	pinsOn  bool
	noPaths bool // SetQuiet: nobody reads a request's path, so none is written
	// The lifecycle's books (lifecycle.go): dispatches not yet Finished,
	// and the violations seen.
	open         int
	closing      []SessionKey // closed sessions still counted somewhere (close.go)
	closingKept  int          // len(closing) after the last sweep
	trace        func(string) // SetTrace (belief.go)
	lcErr        error
	lcViolations int
	// Ended dispatches handed back for reuse (Recycle), and whether they
	// are poisoned instead (PoisonRecycled).
	spare  []*Dispatch
	poison bool
}

// NewDispatcher makes the control plane over the named prefill and decode
// (or colocated) workers. prefill is empty for MechColo.
func NewDispatcher(cfg DispatchConfig, prefill, decode []string, pOpts, dOpts Options) *Dispatcher {
	auto := cfg.MaxRetries < 0
	if auto {
		cfg.MaxRetries = len(decode) - 1
	}
	x := &Dispatcher{cfg: cfg, onD: make([]int, len(decode)),
		breakers: make([]breaker, len(decode)), seeding: make([]int, len(decode)), autoEps: auto}
	for i := range x.breakers {
		x.breakers[i].cfg = cfg.Breaker
	}
	if len(prefill) > 0 {
		x.p = NewRouter(prefill, cfg.Policy, pOpts)
	}
	x.pActive, x.dActive, x.dPrefill = make([]int, len(prefill)), make([]int, len(decode)), make([]int, len(decode))
	x.d = NewRouter(decode, cfg.Policy, dOpts)
	x.pinsOn = cfg.V3.ColdTrimWeight > 0 || cfg.V3.Isolation.HomeReseed
	return x
}

// PRouter and DRouter expose the routers (counters, pins) to the executor.
func (x *Dispatcher) PRouter() *Router { return x.p }
func (x *Dispatcher) DRouter() *Router { return x.d }

// Dispatch is one request's way through the dispatcher.
type Dispatch struct {
	x         *Dispatcher
	r         Request
	act       Action
	tried     []bool // per decoder: asked already
	triedOf   [8]bool
	attempts  int
	why       string // why the request did not go direct (first reason)
	suffix    string // the fallback's refinement (-session-cap, ...)
	mode      string
	path      []string
	chosenD   int
	chosenP   int
	kind      ActionKind // the executing action, once decided
	pause     float64
	accepted  bool
	stage     stage   // where it is in its lifecycle (lifecycle.go)
	seeding   bool    // counted in its decoder's seeds in flight
	probe     bool    // the half-open breaker's probe
	holds     bool    // a direct or seed counted in its session's inflight
	firstSeen bool    // its Accepted made its session seen (a failure undoes it)
	homeHeld  bool    // HomeHolds: refused by the home, sent plain PD, the session left pinned there
	now       float64 // when Begin was called: breakers judge by it
	lastD     int     // the session's decoder before this request
	pTok      int     // the peers: prefill tokens counted in pActive
	dBlk      int     // the peers: blocks counted in dActive
	dPre      int     // pd-conditional: local prefill blocks counted in dPrefill
	// v3 (v3.go): what this request adds to its queues of prefill work.
	cached, dTok, dQ, pQ, pQAt int
	pend, pendD                int      // cold routing's tokens on a decoder until it answers
	wholeAt                    int      // 1 + the prefill worker serving it whole, until it ends
	inline                     bool     // the admission in flight rode on the request
	dOv, pOv                   overlaps // the prompt's overlaps with the decoders' and prefill workers' indexes
	host                       int      // tier costing: prompt tokens its prefill on the decoder loads back from host
	prefetch                   int      // tier costing: prompt tokens its prefill on the decoder prefetches from storage
	pinFoot                    int      // the pin book: its KV counted on its decoder while it runs
	pinH                       *pinHold // the pin book: its session's hold on its decoder, busy with it
	stQueueS, stAheadS         float64  // tier costing: the shared pool's queue and d's queue when the prefetch was priced (tiered)

	// memo is the one array sizeMemos gave dOv and pOv, kept when the
	// dispatch is recycled (Recycle) for the next request's memos.
	memo []uint64
}

// Begin starts a request's dispatch at now; Action says what to do first.
func (x *Dispatcher) Begin(now float64, r Request) *Dispatch {
	var t *Dispatch
	if n := len(x.spare); n > 0 { // a recycled one (Recycle), emptied
		t = x.spare[n-1]
		x.spare[n-1] = nil
		x.spare = x.spare[:n-1]
		*t = Dispatch{x: x, r: r, chosenD: -1, chosenP: -1, now: now, lastD: -1, memo: t.memo}
	} else {
		t = &Dispatch{x: x, r: r, chosenD: -1, chosenP: -1, now: now, lastD: -1}
	}
	if n := len(x.d.names); n <= len(t.triedOf) {
		t.tried = t.triedOf[:n] // no allocation of its own for a pool of up to 8
	} else {
		t.tried = make([]bool, n)
	}
	x.open++
	if x.trace != nil {
		x.traced("Begin %s/%d in=%d out=%d", r.Session, r.Turn, r.Input, r.Output)
	}
	if s := x.sess(r.key()); s != nil {
		t.lastD = s.last
	}
	switch x.cfg.Mechanism {
	case MechColo:
		w := t.pickD(t.routeKey(), func(i int) bool { return !r.avoids(i) }).Worker
		if w < 0 {
			w = x.d.pick(&t.dOv, r.key(), r.Blocks).Worker
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
	case MechPPD:
		t.beginPPD()
	case MechDeflect:
		t.beginDeflect()
	default:
		t.sizeMemos()
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
	s := x.session(t.r.key())
	t.v4Seen()
	if t.r.Turn < x.cfg.SeedMinTurn {
		if t.paths() {
			t.note("seed filter: turn %d < seed-min-turn %d", t.r.Turn, x.cfg.SeedMinTurn)
		}
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
	s := x.session(t.r.key())
	allowed := func(d int) bool {
		return d < len(t.tried) && !t.tried[d] && !t.r.avoids(d) && !x.blacklisted(s, d, t.now)
	}
	d := t.pickD(t.routeKey(), allowed).Worker
	if d < 0 {
		// Every untried decoder is blacklisted: the least-rejected one.
		best := -1
		for i := range t.tried {
			if !t.tried[i] && !x.d.Out(i) && (best < 0 || x.rejectsAt(s, i, t.now) < x.rejectsAt(s, best, t.now)) {
				best = i
			}
		}
		if best < 0 {
			t.fallback()
			return
		}
		d = best
		if t.paths() {
			t.note("every decoder blacklisted: least-rejected %s", x.d.names[d])
		}
	}
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
	if s.pin == d {
		a.Resident = s.resident
	}
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
	if !t.expect("Reply", t.stage == stDeciding && t.act.Kind == ActAdmit) {
		return
	}
	if t.x.trace != nil {
		t.x.traced("Reply d%d can=%t direct=%t %s", t.act.D, rep.CanAdmit, rep.Direct, rep.Reason)
	}
	d := t.act.D
	x := t.x
	t.cached = rep.CachedTokens
	x.believeTier(d, t.r.key(), rep)
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
	if rep.Direct {
		if t.v3TierPlace(d, rep) {
			return // the reseed through P costs less than the load-back (tiercost.go)
		}
		if t.paths() {
			t.note("admit %s: direct%s", x.d.names[d], fromHost(rep))
		}
		t.decide(ActDirect, -1, d, "kvcache-direct-to-d-session")
		return
	}
	if t.paths() {
		t.note("admit %s: seed (%s)", x.d.names[d], rep.Reason)
	}
	if !x.breakers[d].allows(t.now) {
		// A seed would cross the transport whose failures opened d's
		// breaker: try another decoder (not a reject of the session).
		if t.paths() {
			t.note("skip %s: its transfer breaker is open", x.d.names[d])
		}
		t.route()
		return
	}
	if c := x.cfg.SeedMaxInflight; c > 0 && x.seeding[d] >= c {
		if t.paths() {
			t.note("skip %s: %d seeds in flight (seed-max-inflight-decode %d)", x.d.names[d], x.seeding[d], c)
		}
		t.suffixOnce("-d-backpressure")
		t.route()
		return
	}
	s := x.session(t.r.key())
	p := t.prefillWorker()
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
			if t.paths() {
				t.note("prefill backup of the session on %s", x.p.names[s.backup])
			}
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
	if s := t.x.session(t.r.key()); s.evicted && s.last >= 0 {
		t.setWhy("session-was-evicted")
		return
	}
	t.setWhy("session-not-resident")
}

// reject counts a refusal from d (from the structured reply, never from a
// label) and moves on to the next decoder.
func (t *Dispatch) reject(d int, rep AdmitReply, detail string) {
	x := t.x
	s := x.session(t.r.key())
	if !rep.Unreachable && !(x.cfg.Mechanism == MechKVC && x.cfg.V3.TypedRejects && rep.Reason == "no-space") {
		s.reject(d, t.now, x.cfg.RejectWindowS > 0)
	}
	if detail == "" {
		detail = rep.Reason
	}
	if t.paths() {
		t.note("reject %s: %s", x.d.names[d], detail)
	}
	switch rep.Reason {
	case "real-large-append":
		t.setWhy("real-large-append")
		if t.v4HomeReseed(d) {
			return
		}
	case "session-not-resident":
		t.notResident()
	case "session-cap":
		t.suffixOnce("-session-cap")
	case "no-space":
		t.suffixOnce("-no-d-capacity")
	}
	if rep.PauseMs > 0 && !x.cfg.NoBackpressure {
		t.pause = min(rep.PauseMs/1000, x.maxPauseS())
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
	if x.cfg.HomeHolds && s.pin == d && !rep.Unreachable && !x.blacklisted(s, d, t.now) {
		if t.paths() {
			t.note("home %s refused, not blacklisted: the session stays there", x.d.names[d])
		}
		t.homeHeld = true
		t.fallback()
		return
	}
	t.route()
}

// maxPauseS is the cap on a backpressure wait.
func (x *Dispatcher) maxPauseS() float64 {
	switch c := x.cfg.MaxPauseS; {
	case c == 0:
		return DefaultMaxPauseS
	case c < 0:
		return 0
	default:
		return c
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
	if !t.x.session(t.r.key()).seen && t.suffix == "-d-backpressure" {
		t.plainPD("pd-router-turn1-d-backpressure")
		return
	}
	t.plainPD("pd-router-fallback-" + t.why + t.suffix)
}

func (t *Dispatch) plainPD(mode string) {
	x := t.x
	p := t.prefillWorker()
	d := t.pickD(t.routeKey(), func(d int) bool { return !t.r.avoids(d) && x.breakers[d].allows(t.now) }).Worker
	if d < 0 {
		// Every breaker is open: send it anyway to the one that opened
		// first, whose cooldown ends soonest; its outcome is the probe.
		for i := range x.breakers {
			if !x.d.Out(i) && (d < 0 || x.breakers[i].openedAt < x.breakers[d].openedAt) {
				d = i
			}
		}
		if d >= 0 {
			if t.paths() {
				t.note("every decoder's transfer breaker is open: %s opened first", x.d.names[d])
			}
		}
	}
	if t.v3PlainLocal(d) {
		return
	}
	if p < 0 || d < 0 {
		t.noWorker(verdict(p < 0, "prefill", "decode"))
		return
	}
	t.decide(ActPD, p, d, mode)
	t.act.Delay = t.pause
}

func (t *Dispatch) decide(k ActionKind, p, d int, mode string) {
	t.kind, t.chosenP, t.chosenD, t.mode = k, p, d, mode
	t.act = Action{Kind: k, P: p, D: d, Delay: t.pause} // a pause still owed (v3's inline round trip)
	if k.CrossesTransport() && d >= 0 {
		// The half-open breaker's one probe is taken when the request is
		// decided, not when it is accepted: every dispatch decided in
		// between would pass allows() too.
		t.probe = t.x.breakers[d].sent(t.now)
	}
}
