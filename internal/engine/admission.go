package engine

// Algorithm 2, the worker's side of an admission RPC: may this decoder take
// the session's next turn, directly or as a seed, and with what pause hint.

// AdmitQuery is an admission RPC: may this worker take the session's next
// turn?
type AdmitQuery struct {
	Session    string
	SessionNum int64 // the owner's number for Session, 0 for none (Request.SessionNum)
	Blocks     []uint64
	Input      int
	Output     int
	// MaxAppend is τ_append: the largest direct append the worker accepts
	// (0 = no limit, when the router gates instead).
	MaxAppend int
	// ForceSeed asks for a seed even if the session is resident (the
	// router's own gate judged the append too large): the old residency is
	// dropped first.
	ForceSeed bool
	// DirectOnly asks for a direct append only (the seed's admission RPC):
	// a session not resident here is refused with session-not-resident.
	DirectOnly bool
}

func (q *AdmitQuery) sessKey() SessionKey { return SessionKey{ID: q.Session, Num: q.SessionNum} }

// AdmitMode is what an admission grants.
type AdmitMode uint8

const (
	AdmitNone   AdmitMode = iota
	AdmitDirect           // the session is resident: append on this worker
	AdmitSeed             // not resident: receive the whole prompt's KV from P and keep it
)

func (m AdmitMode) String() string {
	switch m {
	case AdmitDirect:
		return "direct_append"
	case AdmitSeed:
		return "seed"
	}
	return "none"
}

// AdmitReply is the worker's answer, with a typed reason.
type AdmitReply struct {
	CanAdmit bool
	Mode     AdmitMode
	// Reason: for a refusal "real-large-append", "no-space", "session-cap";
	// for a seed "session-not-resident" or "session-was-evicted" (it was
	// here once); "" for a direct append.
	Reason       string
	CachedTokens int // prompt tokens this worker holds for the request
	// Tier says where the session's prefix is: TierHBM (resident), TierHost
	// (demoted to this worker's host tier: a direct append that loads it
	// back first; HostTokens of CachedTokens come from host), TierStorage
	// (the storage pool below holds StorageTokens of CachedTokens beyond
	// what HBM and host hold: the turn prefetches them storage→host, then
	// loads them back with the HostTokens host holds, if any) or TierNone.
	Tier          string
	HostTokens    int
	StorageTokens int
	// StorageQueueS is how long a shared storage pool's aggregate link is
	// booked past now by the prefetches before (storageQueueS), when the
	// answer names storage tokens: the router adds it to their prefetch.
	StorageQueueS float64
	PauseMs       float64 // recommended_pause_ms: a backpressure hint, 0 when none
	Trimmed       int     // sessions evicted to make room
	TrimmedTok    int64
}

// Reasons of admission replies.
const (
	ReasonLargeAppend = "real-large-append"
	ReasonNoSpace     = "no-space"
	ReasonSessionCap  = "session-cap"
	ReasonNotResident = "session-not-resident"
	ReasonWasEvicted  = "session-was-evicted"
)

// Tiers an admission reply names (AdmitReply.Tier).
const (
	TierHBM     = "hbm"
	TierHost    = "host"
	TierStorage = "storage"
	TierNone    = "none"
)

// AdmitSession answers an admission RPC (Algorithm 2). A granted admission
// reserves nothing: the request that follows is admitted by the scheduler
// like any other, and can still wait for KV.
func (w *Worker) AdmitSession(now float64, q AdmitQuery) AdmitReply {
	if !w.cfg.Session.Enabled || w.tree == nil {
		return AdmitReply{Reason: "no-session-cache"}
	}
	rep := AdmitReply{PauseMs: w.pauseHint()}
	s := w.sess(q.sessKey())
	if q.ForceSeed && s != nil && s.inflight == 0 {
		w.evictSession(now, s)
		s = w.sess(q.sessKey())
	}
	resident, cached := w.residency(now, s, q)
	rep.CachedTokens, rep.Tier = cached, TierNone
	out := int64(max(q.Output, 1))
	if resident {
		rep.Tier = TierHBM
		appendTok := q.Input - cached
		if q.MaxAppend > 0 && appendTok > q.MaxAppend {
			rep.Reason = ReasonLargeAppend
			return rep
		}
		if !w.roomFor(now, int64(appendTok)+out, q.Session, &rep) {
			rep.Reason = ReasonNoSpace
			return rep
		}
		rep.CanAdmit, rep.Mode = true, AdmitDirect
		return rep
	}
	if w.admitFromHost(now, s, q, cached, &rep) {
		return rep
	}
	if q.DirectOnly {
		rep.Reason = ReasonNotResident
		return rep
	}
	// The session takes a place under the cap unless it holds one already
	// (a request of it here): a record of a session evicted earlier holds
	// none.
	if c := w.cfg.Session.Cap; c > 0 && w.residentSessions() >= c && (s == nil || !s.resident()) {
		if !w.trimOne(now, q.Session, &rep) {
			rep.Reason = ReasonSessionCap
			return rep
		}
	}
	if !w.roomFor(now, int64(q.Input)+out, q.Session, &rep) {
		rep.Reason = ReasonNoSpace
		return rep
	}
	rep.CanAdmit, rep.Mode, rep.Reason = true, AdmitSeed, ReasonNotResident
	if s != nil {
		rep.Reason = ReasonWasEvicted
	}
	w.seedFromHost(now, s, q, cached, &rep)
	return rep
}

// seedFromHost tells a seed answer what this worker's host and storage
// tiers hold of the prompt beyond HBM: a prefill of the turn here (a local
// seed or reseed) loads those tokens back (prefetching storage's first)
// instead of computing them (admit's hiMatch, stPrefetch), so the router
// can cost it as such (protocol revision 1.1: host_tokens and
// storage_tokens of cached_tokens, tier host or storage). A shared storage
// pool's match counts for a session this worker never held. A seed
// through P is not changed by it: P's KV crosses the link whole.
func (w *Worker) seedFromHost(now float64, s *dSession, q AdmitQuery, cached int, rep *AdmitReply) {
	host, st := w.hostBeyond(s, q, cached), w.storageBeyond(s, q, cached, true)
	if tier := lowestTier(host, st); tier != TierNone {
		rep.CachedTokens, rep.HostTokens, rep.StorageTokens, rep.Tier = cached+host+st, host, st, tier
		rep.StorageQueueS = w.storageQueueS(now, st)
	}
}

// DefaultHighWater is the share of the pool from which a session-aware
// decoder's admission replies carry a pause (ρ ≈ 0.95 in the seed's spec).
const DefaultHighWater = 0.95

// pauseHint is recommended_pause_ms, after the seed's
// _compute_backpressure_pause_hint(transfer_queue_depth,
// retracted_queue_depth, token_usage_after): once the KV held for requests
// and sessions (the pool's use less the evictable cache, plus the output
// promised to admitted requests) reaches HighWater of the pool, or the
// queue reaches a quarter of MaxRunning, ask the router to hold off 10 ms
// per queued request, plus 10 (the router caps it). The queue is the
// requests waiting for admission or a KV reservation; with
// PauseCountsTransfers also those whose KV transfer has not landed (off by
// default: counting them changes the pauses of a default run). This engine
// never retracts a request (worker.go), so the seed's retracted queue is
// always empty.
func (w *Worker) pauseHint() float64 {
	if w.cfg.Session.NoPauseHint {
		return 0
	}
	hw := w.cfg.Session.HighWater
	if hw <= 0 {
		hw = DefaultHighWater
	}
	q := w.Queued()
	if w.cfg.Session.PauseCountsTransfers {
		q += w.transferring
	}
	if float64(w.Used()-w.CachedTokens()+w.reserved) < hw*float64(w.capacity) && q < max(w.cfg.MaxRunning/4, 1) {
		return 0
	}
	return float64(10 * (q + 1))
}

// roomFor reports whether need tokens can be found, trimming sessions other
// than except in LRU order when the unpinned cache is not enough.
func (w *Worker) roomFor(now float64, need int64, except string, rep *AdmitReply) bool {
	// KV held for dumps in flight is coming free (dump.go).
	for f := w.free() + w.evictable() + w.dumping; f < need; f = w.free() + w.evictable() + w.dumping {
		if !w.trimFor(now, except, need-f, rep) {
			return false
		}
	}
	// The low-watermark: trim on to leave headroom for the next admissions.
	if lw := w.cfg.Session.LowWatermark; lw > 0 && rep.Trimmed > 0 {
		goal := need + int64(lw*float64(w.capacity))
		for f := w.free() + w.evictable() + w.dumping; f < goal && w.trimFor(now, except, goal-f, rep); f = w.free() + w.evictable() + w.dumping {
		}
	}
	return true
}
