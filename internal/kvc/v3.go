package kvc

// KVC v3 (issue 13): where a request's prefill runs is a choice, not a
// consequence of the session's residency. KVC v2 sends every prompt its
// decoder cannot append directly — a session's first turn, a reseed after
// an eviction, an append over τ_append — through the prefill pool, so with
// one P in 1P3D the tail is the P queue (docs/kvc-v3.md attributes it by
// execution mode). v3 keeps v2's direct appends and adds, each off unless
// configured (the zero V3Config is v2):
//
//   - a bounded stall budget for prefill on a decoder (the seed's P5,
//     extended to cold prompts): a decoder takes the prefill of a seed,
//     reseed or large append itself, keeping the session, when the local
//     prefill tokens queued on it, this request's included, stay within
//     DBudgetTokens and the estimated wait there is below P's by Margin
//     tokens. The wait is counted in prompt tokens queued for prefill — P
//     and D are the same GPU — from dispatch until the first token;
//   - capacity-aware routing for a session no decoder holds (P7): the
//     decoder with the least prefill work queued, less what the router
//     believes it caches of the prompt, instead of Algorithm 1's score;
//   - inline admission: the admission check rides on the request to the
//     decoder, so the first attempt pays no separate round trip; a refusal
//     or a seed answer costs the round trip before the next step;
//   - local fallback and whole-on-P for requests every decoder refused
//     for space, and prefill workers hosting their share of new sessions
//     whole (PHosts), so that a PD cluster decodes on every GPU.

// V3Config holds KVC v3's options (DispatchConfig.V3).
type V3Config struct {
	// DBudgetTokens is the most local prefill tokens (direct appends and
	// local seeds) queued on one decoder for a local seed or large append
	// to be placed there (0 = never: v2).
	DBudgetTokens int
	// Margin: a decoder takes the prefill only when its queued prefill
	// tokens plus this request's uncached ones, plus Margin, are at most
	// what the prefill worker would have queued with it (tokens; may be
	// negative to favour the decoder).
	Margin int
	// TransferTokens is what moving one prompt token's KV from a prefill
	// worker to a decoder costs, in prefill tokens (the link's time per
	// token over the prefill's); a session's first turn through P counts
	// it for the whole prompt beside P's queue, as local prefill on D
	// moves nothing (0 = the queues alone). Later turns do not: counted
	// there it moved long sessions' large appends onto decoders whose
	// decode batches they stall (seed-inferact's TTFT p99 ×6).
	TransferTokens float64
	// ColdRoute picks the least-loaded decoder for a session with no
	// decoder pinned (P7).
	ColdRoute bool
	// ColdInflightTokens is what each request in flight on a decoder adds
	// to its cold-routing cost, in prompt tokens: the decode batch a new
	// session would join, beside the prefill queued there (0 = prefill
	// only). Without it, prompts that share a prefix pull every new
	// session to the decoder that holds it.
	ColdInflightTokens int
	// ColdTrimWeight: with ColdRoute, each token of the sessions a cold
	// placement would push out of a decoder's pool by the pin book
	// (pinbook.go: the least recently used idle sessions, whole, until the
	// room holds the prompt and its output) adds this many tokens to that
	// decoder's cold-routing cost: their next turns are reseeds of all of
	// it (0 = off). It needs every decoder's eviction reports: without
	// them the book never frees a session and over-counts.
	ColdTrimWeight float64
	// Inline: the first admission attempt rides on the request (no round
	// trip first); RTTS is the round trip a refusal or seed answer costs.
	Inline bool
	RTTS   float64
	// LocalFallback: a request every decoder refused for space queues on
	// the decoder with the least queued prefill instead of going through P
	// as plain PD; its scheduler admits it when KV frees, as a colocated
	// worker's would.
	LocalFallback bool
	// TypedRejects (P8): a no-space refusal, a decoder's transient state,
	// does not count toward the session's τ_reject blacklist.
	TypedRejects bool
	// WholeOnP: with LocalFallback, such a request is served whole on the
	// prefill worker instead when P's queue is the shorter (an idle P
	// takes decode work); a session served whole on P stays there while
	// P's queue is the shorter.
	WholeOnP bool
	// ColdOnP: with WholeOnP, a new session also starts whole on P when
	// P's queue is no longer than every decoder's.
	ColdOnP bool
	// PHosts: with WholeOnP, a new session starts whole on a prefill
	// worker when that worker serves fewer requests whole than every
	// decoder has in flight: P hosts its share of the sessions, as one
	// more colocated worker, and keeps them while its queue allows.
	PHosts bool
	// BalanceStarts spreads new sessions by the count each GPU started,
	// as DP's round robin does (v3starts.go): cold routing's ties go to
	// the decoder that started the fewest, and with PHosts a prefill
	// worker starts a session while it has started at most its equal share
	// of them and has at most PHostQueueTokens of prefill queued (this
	// replaces PHosts' in-flight rule).
	BalanceStarts    bool
	PHostQueueTokens int
	// BalanceHalfLifeS: with BalanceStarts, cold routing's ties go first
	// to the decoder that took the fewest requests lately, counted with
	// this half-life in seconds (0 = sessions started only). A session
	// that is active now brings its decoder load for a while; one started
	// an hour ago may have ended.
	BalanceHalfLifeS float64
	// Isolation is v4's decode isolation (v4.go): every prefill placed on
	// a GPU that decodes draws from its stall budget, derived from the
	// TPOT SLO; the zero value is off.
	Isolation DecodeIsolation
	// Tiers costs a decoder's host-tier answers (tiercost.go): load-back
	// against a reseed through P; the zero value counts host tokens as
	// cached.
	Tiers TierCost
}

// On reports whether any v3 option is set.
func (c V3Config) On() bool {
	return c.DBudgetTokens > 0 || c.ColdRoute || c.Inline || c.LocalFallback || c.TypedRejects
}

// Execution-mode labels of v3's placements.
const (
	ModeLocalSeed   = "kvcache-local-seed-on-d"          // a turn-1 seed prefilled on its decoder
	ModeLocalReseed = "kvcache-local-reseed-on-d"        // a reseed prefilled on its decoder
	ModeLargeDirect = "kvcache-direct-to-d-large-append" // an append over τ_append, on its decoder
	ModeLocalFall   = "kvcache-local-fallback-on-d"      // refused for space everywhere: queued on a decoder
	ModeWholeOnP    = "kvcache-whole-on-p"               // refused for space everywhere: served whole on P
)

// v3Load is v3's bookkeeping of queued prefill work: prompt tokens
// dispatched to each prefill worker and decoder and not yet past their
// prefill (a request counts from Accepted to PrefillDone).
type v3Load struct {
	p, d []int
	// pend is what cold routing sent each decoder's way and the decoder
	// has not answered yet, so that a burst of cold sessions routed before
	// any is admitted spreads over the decoders.
	pend []int
	// whole is the requests each prefill worker serves whole, in flight;
	// hosted the sessions whose last turn it served whole.
	whole, hosted []int
	// short is p's part in the stay's short size class (v4stay.go).
	short   []int
	started v3Starts // BalanceStarts (v3starts.go)
}

func (x *Dispatcher) v3() *V3Config { return &x.cfg.V3 }

// v3Counts reports whether the dispatcher keeps v3's load bookkeeping.
func (x *Dispatcher) v3Counts() bool { return x.cfg.Mechanism == MechKVC && x.cfg.V3.On() }

func (x *Dispatcher) ensureLoad() {
	if x.p != nil && len(x.load.p) < len(x.p.names) {
		x.load.p = append(x.load.p, make([]int, len(x.p.names)-len(x.load.p))...)
		x.load.whole = append(x.load.whole, make([]int, len(x.p.names)-len(x.load.whole))...)
		x.load.hosted = append(x.load.hosted, make([]int, len(x.p.names)-len(x.load.hosted))...)
		x.load.short = append(x.load.short, make([]int, len(x.p.names)-len(x.load.short))...)
	}
	if len(x.load.d) < len(x.d.names) {
		x.load.d = append(x.load.d, make([]int, len(x.d.names)-len(x.load.d))...)
		x.load.pend = append(x.load.pend, make([]int, len(x.d.names)-len(x.load.pend))...)
	}
	nP := 0
	if x.p != nil {
		nP = len(x.p.names)
	}
	x.load.started.grow(nP, len(x.d.names))
}

// PrefillQueued is v3's queued prefill tokens on prefill worker p and
// decoder d (tests, logs).
func (x *Dispatcher) PrefillQueued() (p, d []int) {
	x.ensureLoad()
	return append([]int(nil), x.load.p...), append([]int(nil), x.load.d...)
}

// pUncached is what prefill worker p would compute of the prompt: the
// prompt less what P's router believes p caches.
func (t *Dispatch) pUncached(p int) int {
	bs := max(t.x.cfg.BlockSize, 1)
	ov := t.pickPAmong(func(i int) bool { return i == p }).Overlap
	return max(t.r.Input-ov*bs, 1)
}

// v3Local decides, on decoder d's admission answer, whether d prefills the
// request itself: uncached is what d would compute (the prompt less what d
// holds), p the prefill worker the request would use otherwise. It notes
// the comparison in the path.
func (t *Dispatch) v3Local(d, p, uncached int) bool {
	x := t.x
	c := x.v3()
	if x.v3NoP() {
		// No prefill worker in service: the decoder prefills it, past
		// the stall budget, rather than the request failing on a dead P.
		if t.paths() {
			t.note("v3 placement: no prefill worker in service: local on %s", x.d.names[d])
		}
		t.dTok = uncached
		return true
	}
	if c.DBudgetTokens <= 0 || p < 0 {
		return false
	}
	x.ensureLoad()
	dq := x.load.d[d] + uncached
	pq := x.load.p[p] + t.pUncached(p)
	if !x.session(t.r.key()).seen {
		pq += int(c.TransferTokens * float64(t.r.Input))
	}
	ok := dq <= c.DBudgetTokens && dq+c.Margin <= pq && t.v4Allows(false, d, uncached, t.r.Input-uncached)
	if t.paths() {
		t.note("v3 placement: %s queue %d tokens with this (budget %d), %s %d (margin %d): %s",
			x.d.names[d], dq, c.DBudgetTokens, x.p.names[p], pq, c.Margin, verdict(ok, "local", "through P"))
	}
	if ok {
		t.dTok = uncached
	}
	return ok
}

// v3ColdPick is P7: for a session no decoder holds, the allowed decoder
// with the least queued prefill work less its believed overlap with the
// prompt, plus ColdInflightTokens per request in flight there (ties to
// Algorithm 1's order); −1 when none is allowed.
func (t *Dispatch) v3ColdPick(allowed func(int) bool) int {
	x := t.x
	x.ensureLoad()
	t.v3Answered() // a refusal the router made itself (its session cap) asked no decoder
	bs := max(x.cfg.BlockSize, 1)
	first := t.pickD(t.r.key(), allowed).Worker
	best, bestCost := first, 0
	cost := func(d int) int {
		uncached := max(t.r.Input-t.overlapOn(d)*bs, 0)
		return x.load.d[d] + x.load.pend[d] + uncached + x.cfg.V3.ColdInflightTokens*x.d.Inflight(d) + t.coldTrimCost(d, uncached)
	}
	if first >= 0 {
		bestCost = cost(first)
	}
	for d := range x.d.names {
		if !allowed(d) || x.d.Out(d) || d == first {
			continue
		}
		if c := cost(d); best < 0 || c < bestCost || c == bestCost && t.v3FewerStarts(d, best) {
			best, bestCost = d, c
		}
	}
	if best >= 0 {
		t.pend = max(t.r.Input-t.overlapOn(best)*bs, 1)
		t.pendD = best
		x.load.pend[best] += t.pend
	}
	return best
}

// coldTrimCost is ColdTrimWeight times the sessions' tokens a cold
// placement of uncached new prompt tokens and the output would push out of
// decoder d's pool (pushedOut), 0 when the weight is off.
func (t *Dispatch) coldTrimCost(d, uncached int) int {
	w := t.x.cfg.V3.ColdTrimWeight
	if w <= 0 {
		return 0
	}
	tok, _ := t.x.pushedOut(d, uncached+max(t.r.Output, 1), t.x.sess(t.r.key()))
	return int(w * float64(tok))
}

// v3Answered takes a cold-routed request's pending tokens off its decoder
// once the decoder has answered (or the request ended unanswered).
func (t *Dispatch) v3Answered() {
	if t.pend > 0 {
		t.x.load.pend[t.pendD] -= t.pend
		t.pend = 0
	}
}

func (t *Dispatch) overlapOn(d int) int {
	if t.x.d.index == nil {
		return 0
	}
	return t.x.d.overlap(&t.dOv, d, t.r.Blocks)
}

// v3Accepted counts an accepted request's prefill in the queue it joins.
func (t *Dispatch) v3Accepted() {
	x := t.x
	if !x.v3Counts() {
		return
	}
	x.ensureLoad()
	t.v3Started()
	if t.kind != ActWholeP {
		x.setOnP(x.session(t.r.key()), 0)
	}
	switch t.kind {
	case ActSeed, ActPD, ActWholeP:
		if t.chosenP >= 0 {
			t.pQ = t.pUncached(t.chosenP)
			x.load.p[t.chosenP] += t.pQ
			t.pQAt = t.chosenP
			t.v4QueueShort(+1)
		}
	case ActDirect:
		if t.dTok == 0 {
			t.dTok = max(t.r.Input-t.cached, 1)
		}
		x.load.d[t.chosenD] += t.dTok
		t.dQ = t.dTok
	}
	t.v4Accepted()
}

// v3PrefillDone takes the request's prefill out of its queue.
func (t *Dispatch) v3PrefillDone() {
	x := t.x
	if t.pQ > 0 {
		x.load.p[t.pQAt] -= t.pQ
		t.v4QueueShort(-1)
		t.pQ = 0
	}
	if t.dQ > 0 {
		x.load.d[t.chosenD] -= t.dQ
		t.dQ = 0
	}
}

// v3LocalSeed places a seed or reseed d answered for on d itself when the
// stall budget and the queues allow (v3Local); it reports whether it did.
func (t *Dispatch) v3LocalSeed(d int, rep AdmitReply) bool {
	x := t.x
	if x.cfg.Mechanism != MechKVC || x.p == nil {
		return false
	}
	p := t.prefillWorker()
	// A seed answer names what d's host tier holds of the prompt (counted
	// in CachedTokens): a prefill there loads it back, so only the rest is
	// computed, and v4's stall is the load-back's (tiercost.go).
	t.tiered(d, rep, rep.StorageTokens)
	if !x.localOnD(d) || !t.v3Local(d, p, max(t.r.Input-rep.CachedTokens, 1)) {
		t.untiered()
		return false
	}
	mode := ModeLocalReseed
	if !x.session(t.r.key()).seen {
		mode = ModeLocalSeed
	}
	t.decide(ActDirect, -1, d, mode)
	return true
}

// v3LargeAppend keeps an append over τ_append on the decoder that holds the
// session (P5) when the stall budget and the queues allow; it reports
// whether it did. The decoder's refusal carried what it holds.
func (t *Dispatch) v3LargeAppend(d int, rep AdmitReply) bool {
	x := t.x
	if x.cfg.Mechanism != MechKVC || x.p == nil || x.cfg.V3.DBudgetTokens <= 0 && !x.v3NoP() {
		return false
	}
	p := t.prefillWorker()
	if !x.localOnD(d) || !t.v3Local(d, p, max(t.r.Input-rep.CachedTokens, 1)) {
		return false
	}
	t.setWhy("real-large-append")
	t.decide(ActDirect, -1, d, ModeLargeDirect)
	return true
}

// v3Placed places the request on d itself when d's answer was a seed or a
// large-append refusal and v3's budget and queues allow; it reports whether
// it did.
func (t *Dispatch) v3Placed(d int, rep AdmitReply) bool {
	switch {
	case rep.CanAdmit && !rep.Direct:
		return t.v3LocalSeed(d, rep)
	case !rep.CanAdmit && rep.Reason == "real-large-append":
		return t.v3LargeAppend(d, rep)
	}
	return false
}

// v3Fallback queues a request every decoder refused for space on the
// session's home decoder, or else the one with the least queued prefill,
// when LocalFallback is on; it reports whether it did.
func (t *Dispatch) v3Fallback() bool {
	x := t.x
	c := x.v3()
	if x.cfg.Mechanism != MechKVC || x.p == nil || !c.LocalFallback {
		return false
	}
	x.ensureLoad()
	if t.suffix != "-no-d-capacity" {
		return t.v3WarmOnP()
	}
	d := -1
	if s := x.session(t.r.key()); s.pin >= 0 && !x.d.Out(s.pin) && !t.r.avoids(s.pin) {
		d = s.pin // the session's home: only the append is new there
	}
	for i := range x.d.names {
		if d >= 0 && d == x.session(t.r.key()).pin {
			break
		}
		if !x.d.Out(i) && !t.r.avoids(i) && (d < 0 || x.load.d[i] < x.load.d[d]) {
			d = i
		}
	}
	if d < 0 {
		return false
	}
	if p := t.prefillWorker(); c.WholeOnP && p >= 0 && !x.v3NoP() && x.wholeOnP(p) && x.load.p[p]+t.pUncached(p) < x.load.d[d]+t.r.Input &&
		t.v4Allows(true, p, t.pUncached(p), t.r.Input-t.pUncached(p)) {
		// An idle P takes decode work: its KV pool is free for it, and
		// its queue is the shorter.
		if t.paths() {
			t.note("v3 fallback: every decoder refused for space; %s serves it whole (%d prefill tokens queued, %s %d)",
				x.p.names[p], x.load.p[p], x.d.names[d], x.load.d[d])
		}
		t.decide(ActWholeP, p, -1, ModeWholeOnP)
		return true
	}
	if !x.localOnD(d) {
		return false // the decoder cannot prefill it: plain PD
	}
	// No budget or margin here: the request has to wait for a decoder's
	// KV either way, and through P it would hold that KV reserved while
	// it waits in P's queue too (SGLang's order), which starves the
	// decoders further.
	if t.paths() {
		t.note("v3 fallback: every decoder refused for space; queued on %s (%d prefill tokens queued)", x.d.names[d], x.load.d[d])
	}
	t.dTok = max(t.r.Input-t.overlapOn(d)*max(x.cfg.BlockSize, 1), 1)
	t.decide(ActDirect, -1, d, ModeLocalFall)
	return true
}

// v3NoP reports whether KVC v3 runs without its prefill pool: every
// prefill worker failing its health checks, drained or removed. The
// decoders then prefill what P would have (local seeds, reseeds, large
// appends, plain PD's requests), as colocated workers; P's whole-request
// paths are off until one is back.
func (x *Dispatcher) v3NoP() bool {
	return x.v3Counts() && x.p != nil && (x.p.allDown || x.p.nOut == len(x.p.names))
}

// v3PlainLocal places a request bound for plain PD on decoder d itself
// when v3 runs without P (v3NoP); it reports whether it did.
func (t *Dispatch) v3PlainLocal(d int) bool {
	x := t.x
	if d < 0 || !x.v3NoP() {
		return false
	}
	x.ensureLoad()
	if t.paths() {
		t.note("v3: no prefill worker in service: %s prefills it itself", x.d.names[d])
	}
	t.dTok = max(t.r.Input-t.overlapOn(d)*max(x.cfg.BlockSize, 1), 1)
	t.decide(ActDirect, -1, d, ModeLocalFall)
	return true
}

// V3Idle reports whether v3's bookkeeping is back to empty: no prefill
// queued or pending anywhere (once every request has ended; the property
// test holds it to that).
func (x *Dispatcher) V3Idle() bool {
	for _, q := range [][]int{x.load.p, x.load.d, x.load.pend, x.load.whole} {
		for _, v := range q {
			if v != 0 {
				return false
			}
		}
	}
	return true
}
