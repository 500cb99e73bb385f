package kvc

import "math"

// KVC v4 (issue 24): decode isolation as a constraint of every placement.
// v3 runs prefills on decoders (local seeds, reseeds, large appends, local
// fallbacks) and on prefill workers that also decode the sessions they host
// (whole on P) to win TTFT; each such prefill stalls the decode batch of the
// GPU it runs on, step by step, and a request decoding through a 100K-token
// local seed sees seconds of stall spread over a few hundred tokens: v3's
// TPOT p99 on the bench workload is 4.5× naive PD's.
//
// v4 gives every GPU that decodes a stall budget in seconds of decode delay
// derived from the TPOT SLO (--tpot-slo-ms). A request decoding o tokens in
// steps of s seconds meets a TPOT of T when the prefill work that runs on its
// GPU during its decode adds at most (T − s)·(o − 1) seconds, and a stream
// of such requests holds it when the GPU spends at most (T − s)/T of its
// time on prefill. So each GPU keeps a bucket of stall seconds: it holds at
// most (T − s)·(ō − 1) (ō the mean output of the requests seen), refills at
// (T − s)/T seconds a second, and every prefill placed on the GPU while
// requests decode there draws what the engine's cost model says the prefill
// takes (StallCost.PrefillS). A local seed, reseed or large append goes on a
// decoder only when its bucket holds the prefill's stall; otherwise it goes
// through P as plain PD. A prefill worker starts hosting a new session only
// when its bucket holds that session's prefill. Direct appends always go
// (they are KVC's point and are small) but draw from the bucket too, as do
// the prefills a prefill worker runs while it serves requests whole.
// v3's stall budget in tokens is then the bucket's capacity in tokens
// (DerivedBudgetTokens): with the SLO off (0) v4 is v3.

// StallCost is the engine's cost model of a prefill (model.Timing), as the
// router needs it to turn prefill tokens into decode delay: a step's fixed
// overhead, the per-token and attention terms, the chunk budget a prefill
// is cut into, and the decode step a stall is measured against.
type StallCost struct {
	OverheadS   float64 // model.Timing.PrefillOverheadS
	PerTokenS   float64 // model.Timing.PrefillPerTokenS
	AttnS       float64 // model.Timing.PrefillAttnS, per token pair n·(p+n/2)
	ChunkTokens int     // the workers' chunked-prefill budget (0 = one chunk)
	DecodeStepS float64 // a decode step of a typical batch
}

// PrefillS is the time n new tokens after p cached ones take to prefill in
// chunks: one step overhead per chunk plus the work, whose attention sum
// over the chunks, Σ n_i·(p_i + n_i/2) with p_i the tokens before chunk i,
// is n·(p + n/2) however the prompt is cut.
func (c StallCost) PrefillS(n, p int) float64 {
	if n <= 0 {
		return 0
	}
	chunks := 1
	if c.ChunkTokens > 0 {
		chunks = (n + c.ChunkTokens - 1) / c.ChunkTokens
	}
	fn := float64(n)
	return float64(chunks)*c.OverheadS + c.PerTokenS*fn + c.AttnS*fn*(float64(p)+fn/2)
}

// DecodeIsolation is v4's decode isolation (V3Config.Isolation); the zero
// value is off.
type DecodeIsolation struct {
	// TPOTSLOS is the TPOT every GPU's decode batch is held to, in seconds
	// (0 = off: v3).
	TPOTSLOS float64
	Cost     StallCost
	// OutputTokens is the decode length the budget protects; 0 = the mean
	// output (max_tokens) of the requests dispatched so far.
	OutputTokens int
	// MaxPWaitS: a prefill over its decoder's budget still runs there when
	// the prefill worker's queue would hold it longer than this, in
	// seconds of prefill (0 = never): isolation then costs the request
	// more TTFT than the stall costs the decode batch its TPOT.
	MaxPWaitS float64
	// TTFTSLOS: a prefill over its decoder's budget still runs there when
	// through P it would miss this TTFT, in seconds, and on the decoder it
	// would meet it (0 = never).
	TTFTSLOS float64
	// SoonerRatio: with TTFTSLOS, a prefill over its decoder's budget
	// also runs there when through P it would miss the TTFT SLO and on the
	// decoder it would take at most 1/SoonerRatio of P's time, though it
	// misses the SLO there too (0 = never).
	SoonerRatio float64
	// LongPrefillS: with TTFTSLOS, a prefill over its decoder's budget also
	// runs there when through P it would miss the TTFT SLO, on the decoder
	// it would be no later, and its own prefill would hold P longer than
	// this many seconds, delaying every request queued behind it there
	// (0 = never). Measured and not kept in the v4 preset
	// (docs/kvc-v4.md, "Tried: long prefills on the decoder").
	LongPrefillS float64
	// StayClassTokens: a hosted session's turn that needs at most this
	// many tokens on its prefill worker stays there (v3StayOnP) by the
	// queue of the requests there that needed at most as many, not P's
	// whole queue (0 = the whole queue: v3's rule; v4stay.go).
	StayClassTokens int
	// HomeReseed: a large append held off its session's decoder is
	// reseeded through P back to that decoder when every other decoder
	// would push a session out of its pool for it, by the pin book
	// (v4home.go; off: Algorithm 1's next decoder).
	HomeReseed bool
}

// On reports whether decode isolation is configured.
func (c DecodeIsolation) On() bool { return c.TPOTSLOS > 0 }

// slack is the TPOT left over a decode step for stalls, per token.
func (c DecodeIsolation) slack() float64 { return max(c.TPOTSLOS-c.Cost.DecodeStepS, 0) }

// CapS is a bucket's capacity for a decode of out tokens: (T − s)·(out − 1).
func (c DecodeIsolation) CapS(out int) float64 { return c.slack() * float64(max(out-1, 1)) }

// RateS is the stall a bucket regains a second: (T − s)/T.
func (c DecodeIsolation) RateS() float64 { return c.slack() / c.TPOTSLOS }

// DerivedBudgetTokens is v3's stall budget in tokens re-derived from the
// SLO: the largest cold prompt whose prefill fits a full bucket for a
// decode of out tokens (0 when none fits).
func (c DecodeIsolation) DerivedBudgetTokens(out int) int {
	capS := c.CapS(out)
	if c.Cost.PrefillS(1, 0) > capS {
		return 0
	}
	lo, hi := 1, 1<<24
	for lo < hi { // the largest n with PrefillS(n, 0) ≤ capS
		mid := (lo + hi + 1) / 2
		if c.Cost.PrefillS(mid, 0) <= capS {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// stallBucket is one GPU's budget of decode delay, in seconds.
type stallBucket struct {
	level, at float64
	used      bool // level is meaningful (a fresh bucket is full)
}

// v4State is v4's bookkeeping: a bucket per prefill worker and decoder and
// the outputs seen, for the mean.
type v4State struct {
	p, d         []stallBucket
	outSum, outN int64
	drawnS       float64 // stall drawn in all (tests, logs)
	heldN        int     // placements the budget sent elsewhere
}

func (x *Dispatcher) iso() *DecodeIsolation { return &x.cfg.V3.Isolation }

// v4On reports whether v4's decode isolation runs.
func (x *Dispatcher) v4On() bool { return x.v3Counts() && x.cfg.V3.Isolation.On() }

func (x *Dispatcher) v4Grow() {
	if x.p != nil && len(x.v4.p) < len(x.p.names) {
		x.v4.p = append(x.v4.p, make([]stallBucket, len(x.p.names)-len(x.v4.p))...)
	}
	if len(x.v4.d) < len(x.d.names) {
		x.v4.d = append(x.v4.d, make([]stallBucket, len(x.d.names)-len(x.v4.d))...)
	}
}

// v4Seen counts a request's output toward the mean the budget protects.
func (t *Dispatch) v4Seen() {
	if t.x.v4On() {
		t.x.v4.outSum += int64(max(t.r.Output, 1))
		t.x.v4.outN++
	}
}

// v4Out is the decode length the buckets protect.
func (x *Dispatcher) v4Out() int {
	if o := x.iso().OutputTokens; o > 0 {
		return o
	}
	if x.v4.outN == 0 {
		return 1
	}
	return int(x.v4.outSum / x.v4.outN)
}

// level refills b to now and reports its stall seconds. The level is cut
// to the cap on every ask, not only on a refill: the cap follows the mean
// output, which can fall between two asks at the same instant.
func (x *Dispatcher) v4Level(b *stallBucket, now float64) float64 {
	c := x.iso()
	capS := c.CapS(x.v4Out())
	if !b.used {
		b.level, b.at, b.used = capS, now, true
	}
	if now > b.at {
		b.level += c.RateS() * (now - b.at)
		b.at = now
	}
	b.level = math.Min(capS, b.level)
	return b.level
}

// bucket is decoder d's bucket (onP false) or prefill worker p's.
func (x *Dispatcher) v4Bucket(onP bool, w int) *stallBucket {
	x.v4Grow()
	if onP {
		return &x.v4.p[w]
	}
	return &x.v4.d[w]
}

// v4Decoding reports whether a stall on the GPU has victims: requests
// decode there now, or sessions it holds will be back while a long prefill
// runs (their turns are direct appends that decode behind it): requests in
// flight on or sessions held by decoder d, served whole on or hosted by
// prefill worker p. Only a GPU holding nothing prefills for free.
func (x *Dispatcher) v4Decoding(onP bool, w int) bool {
	if onP {
		x.ensureLoad()
		return x.load.whole[w] > 0 || x.load.hosted[w] > 0
	}
	return x.d.Inflight(w) > 0 || x.onD[w] > 0
}

// v4Allows reports whether a prefill of n tokens after p cached ones fits
// the GPU's bucket (always, with no decode there or v4 off); it notes the
// verdict in the path.
func (t *Dispatch) v4Allows(onP bool, w, n, p int) bool {
	x := t.x
	if !x.v4On() || !x.v4Decoding(onP, w) {
		return true
	}
	need := x.iso().Cost.PrefillS(n, p)
	if !onP && t.host+t.prefetch > 0 {
		need = t.loadStallS(n, p) // a local seed loading from host
	}
	have := x.v4Level(x.v4Bucket(onP, w), t.now)
	ok := need <= have
	if !ok && !onP && (t.v4PBusy() || t.v4PMissesTTFT(w, n, p)) {
		ok = true // P's queue costs the request more than the stall costs the batch
	}
	if !ok {
		x.v4.heldN++
	}
	if t.paths() {
		name := x.d.names
		if onP {
			name = x.p.names
		}
		t.note("v4 decode isolation: %s's stall budget %.3f s (TPOT SLO %.1f ms, %d-token decodes), this prefill %.3f s: %s",
			name[w], have, x.iso().TPOTSLOS*1000, x.v4Out(), need, verdict(ok, "fits", "over"))
	}
	return ok
}

// v4PBusy reports whether the prefill worker the request would use
// otherwise has more than MaxPWaitS of prefill queued.
func (t *Dispatch) v4PBusy() bool {
	x := t.x
	c := x.iso()
	if c.MaxPWaitS <= 0 || x.p == nil {
		return false
	}
	p := t.prefillWorker()
	if p < 0 {
		return false
	}
	x.ensureLoad()
	return c.Cost.PrefillS(x.load.p[p], 0) > c.MaxPWaitS
}

// v4PMissesTTFT reports whether the request's prefill through P would
// miss the TTFT SLO (TTFTSLOS) while on decoder d, n tokens after p
// cached behind d's own queue, it would meet it: then isolation would cost
// the request its SLO for a stall the workers' slicing still bounds, and
// the prefill runs on d (prefill deflection's trigger, arXiv 2607.02043,
// with the SLO as the bar on both sides). A prefill that misses the SLO
// either way stays held: running it on d buys a TTFT tail for a TPOT
// cost (docs/kvc-v4.md, "The TTFT escape").
func (t *Dispatch) v4PMissesTTFT(d, n, p int) bool {
	x := t.x
	c := x.iso()
	if c.TTFTSLOS <= 0 || x.p == nil {
		return false
	}
	pw := t.prefillWorker()
	if pw < 0 {
		return false
	}
	x.ensureLoad()
	pu := t.pUncached(pw)
	viaP := c.Cost.queueS(x.load.p[pw]) + c.Cost.PrefillS(pu, t.r.Input-pu)
	local := c.Cost.queueS(x.load.d[d]) + c.Cost.PrefillS(n, p)
	miss := viaP > c.TTFTSLOS && (local <= c.TTFTSLOS || c.SoonerRatio > 0 && local*c.SoonerRatio <= viaP ||
		c.LongPrefillS > 0 && local <= viaP && c.Cost.PrefillS(pu, t.r.Input-pu) > c.LongPrefillS)
	if miss && t.paths() {
		t.note("v4 TTFT SLO %.1f s: through %s %.3f s, on %s %.3f s: local", c.TTFTSLOS, x.p.names[pw], viaP, x.d.names[d], local)
	}
	return miss
}

// v4Draw takes a prefill's stall from the GPU's bucket when requests decode
// there.
func (t *Dispatch) v4Draw(onP bool, w, n, p int) {
	x := t.x
	if !x.v4On() || w < 0 || !x.v4Decoding(onP, w) {
		return
	}
	t.v4DrawS(onP, w, x.iso().Cost.PrefillS(n, p))
}

// v4DrawS takes s seconds of stall from the GPU's bucket when requests
// decode there.
func (t *Dispatch) v4DrawS(onP bool, w int, s float64) {
	x := t.x
	if !x.v4On() || w < 0 || !x.v4Decoding(onP, w) {
		return
	}
	b := x.v4Bucket(onP, w)
	x.v4Level(b, t.now)
	b.level -= s
	x.v4.drawnS += s
}

// v4Accepted draws an accepted request's prefill from the bucket of the GPU
// it runs on (v3Accepted's queues name it).
func (t *Dispatch) v4Accepted() {
	x := t.x
	if !x.v4On() {
		return
	}
	switch t.kind {
	case ActSeed, ActPD, ActWholeP:
		if t.chosenP >= 0 {
			t.v4Draw(true, t.chosenP, t.pQ, t.r.Input-t.pQ)
		}
	case ActDirect:
		if t.host+t.prefetch > 0 {
			t.v4DrawS(false, t.chosenD, t.loadStallS(t.dTok, t.r.Input-t.dTok))
			return
		}
		t.v4Draw(false, t.chosenD, t.dTok, t.r.Input-t.dTok)
	}
}

// V4Stall reports the stall drawn from every bucket in all, in seconds,
// and how many placements the budget sent elsewhere (tests, logs).
func (x *Dispatcher) V4Stall() (drawnS float64, held int) { return x.v4.drawnS, x.v4.heldN }
