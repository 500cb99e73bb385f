package engine

import (
	"sort"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
)

// The session-aware decode cache of the KV-cache-centric mechanism (DESIGN
// §5): a decode worker keeps each session's KV between turns, so a follow-up
// turn can append on it directly ("direct append": a prefill of the new
// tokens on this worker, interleaved with its decode batch) instead of
// travelling through a prefill worker. The worker is authoritative for its
// capacity: AdmitSession is Algorithm 2, answered from its own bookkeeping.
//
// Residency is kept at one of two granularities:
//   - EvictSession (the seed's): a session pins its prompt path and output;
//     a trim frees the whole session at once, and a revisit re-prefills all
//     of it (mean 67,726 tokens freed per eviction in the seed's E3);
//   - EvictBlock: session KV lives in the radix cache unpinned and LRU
//     nibbles its oldest leaves; a revisit re-prefills only what was lost.

// Eviction is the granularity at which a session-aware cache frees KV.
type Eviction uint8

const (
	EvictSession Eviction = iota
	EvictBlock
)

// TrimPolicy says which sessions a trim may evict.
type TrimPolicy uint8

const (
	// TrimIdle evicts only sessions with no request on this worker (the
	// seed's evict_idle_streaming_sessions_lru, F10).
	TrimIdle TrimPolicy = iota
	// TrimAny also drops the pins of sessions with a request running here;
	// their running request keeps its own KV until it ends.
	TrimAny
)

// SessionConfig turns a worker into a session-aware decode worker.
type SessionConfig struct {
	Enabled  bool
	Eviction Eviction
	Trim     TrimPolicy
	// TrimTail (with EvictSession): a trim for room frees only the least
	// recently used session's last blocks, as many as the room needs; the
	// session stays pinned on the rest, and its next turn appends what it
	// lost (trimtail.go). TailMaxWaiting: only while at most this many
	// requests wait in the worker's queue; a longer queue wants the whole
	// sessions' KV, and the trim frees whole sessions again.
	TrimTail       bool
	TailMaxWaiting int
	// BypassTokens: a step that continues a long chunked prefill also
	// takes waiting requests whose uncached prompt fits in this many
	// tokens (schedule.go's bypass; 0 = none, SGLang's order).
	BypassTokens int
	// Cap is the most sessions resident at once (0 = no cap); a new
	// session beyond it is refused with "session-cap" unless a trim makes
	// room.
	Cap int
	// LowWatermark is the share of the pool a trim triggered by admission
	// frees beyond what the admitted request needs (the seed's low-watermark
	// trim), so that the next admissions need no trim of their own.
	LowWatermark float64
	// TrimStallS and TrimStallPerTokenS are what a trim costs the worker's
	// scheduler: the seed's trim ran on the scheduler loop and stalled
	// everything behind it (F6). Charged as a stall before the next step.
	TrimStallS         float64
	TrimStallPerTokenS float64
	// HighWater is the share of the pool from which admission replies
	// carry a backpressure hint (recommended_pause_ms; see pauseHint), in
	// (0, 1]; 0 takes DefaultHighWater.
	HighWater float64
	// NoPauseHint: admission replies never carry a pause (backpressure
	// off, the seed's default).
	NoPauseHint bool
	// PauseCountsTransfers: the hint's queue depth also counts the
	// requests whose KV transfer to this worker has not landed (SGLang's
	// decode transfer queue, the seed's transfer_queue_depth).
	PauseCountsTransfers bool
	// ReportPaths attaches an evicted session's block ids to its
	// EvSessionEvicted event (for D→P snapshots on eviction).
	ReportPaths bool
	// DumpOnEvict keeps an evicted session's prompt path locked until the
	// executor's ReleaseDump (dump.go): pinned while its D→P dump runs.
	DumpOnEvict bool
}

// SessionKey names a session to a worker: its id and the owner's number
// for it, 0 for none (Request.SessionNum). The worker files its records
// of a session under it: by number, in a slice, when there is one.
type SessionKey = idtable.Key

// sess is the worker's record of a session, nil for none.
func (w *Worker) sess(k SessionKey) *dSession {
	s, _ := w.dsess.Get(k)
	return s
}

// tail is a session's output tail, nil for none.
func (w *Worker) tail(k SessionKey) *outputTail {
	t, _ := w.tails.Get(k)
	return t
}

// dSession is a session resident on this worker.
type dSession struct {
	id       string
	num      int64 // the owner's number for it (SessionKey)
	node     int32 // EvictSession: the deepest node of its last prompt, pinned
	pinned   bool
	inflight int     // its requests admitted or queued here
	lastUse  float64 // for LRU trims
	tokens   int64   // tokens it last held here (prompt + output), for reports

	trimStamp uint32 // trimorder.go: moves with pinned and lastUse
	forgotten bool   // ForgetSession came while its KV was pinned: dropped at eviction
}

func (s *dSession) key() SessionKey { return SessionKey{ID: s.id, Num: s.num} }

// ForgetSession drops the worker's record of a session its owner will not
// send again (the simulator's --session-idle-forget): an evicted session's
// entry at once, a resident one's when it is evicted, so the records follow
// the sessions with KV here rather than every session ever served. Its KV,
// pinned or cached, stays until evicted as before.
func (w *Worker) ForgetSession(session string) { w.ForgetSessionKey(SessionKey{ID: session}) }

// ForgetSessionKey is ForgetSession of a session the owner numbers.
func (w *Worker) ForgetSessionKey(k SessionKey) {
	s := w.sess(k)
	if s == nil {
		return
	}
	if s.resident() {
		s.forgotten = true
		return
	}
	w.dsess.Delete(k)
}

// Tracked is how many sessions the worker holds a record of.
func (w *Worker) Tracked() int { return w.dsess.Len() }

// resident is whether s counts against the session cap: its KV pinned
// here, or a request of it here. At block granularity an idle session's
// KV is plain cache.
func (s *dSession) resident() bool { return s.pinned || s.inflight > 0 }

// residentChanged keeps nResident in step after s changed from was.
func (w *Worker) residentChanged(s *dSession, was bool) {
	switch now := s.resident(); {
	case now && !was:
		w.nResident++
	case was && !now:
		w.nResident--
	}
}

// evictable is what makeRoom can free: unpinned cache leaves and tails.
func (w *Worker) evictable() int64 {
	if w.tree == nil {
		return 0
	}
	return w.tree.EvictableTokens() - w.windowEvictableLess() + w.tailTokens - w.pinnedTail
}

// ResidentSessions is the sessions this session-aware decoder holds: those
// counted against its session cap (see residentSessions). A decode worker
// reports it in its load (the emulator's /v1/loads extension).
func (w *Worker) ResidentSessions() int { return w.residentSessions() }

// residentSessions is kept as sessions change (residentChanged): the cap
// check asked it on every admission, and it scanned every session the
// worker had ever seen.
func (w *Worker) residentSessions() int { return w.nResident }

// trimOne evicts the least recently used session the trim policy allows,
// other than except, and charges the scheduler stall. It reports whether
// one was evicted.
func (w *Worker) trimOne(now float64, except string, rep *AdmitReply) bool {
	victim := w.trimVictim(except)
	if victim == nil {
		return false
	}
	freed := w.evictSession(now, victim)
	rep.Trimmed++
	rep.TrimmedTok += freed
	w.chargeTrim(now, freed)
	return true
}

// trimFor makes at least short more tokens free for a request of session
// except by one trim: a tail trim with TrimTail, else a whole session.
func (w *Worker) trimFor(now float64, except string, short int64, rep *AdmitReply) bool {
	if w.cfg.Session.TrimTail && w.waiting.len() <= w.cfg.Session.TailMaxWaiting {
		return w.trimTailFor(now, except, short, rep)
	}
	return w.trimOne(now, except, rep)
}

// trimVictim is the least recently used session the trim policy allows,
// other than except; nil when there is none.
func (w *Worker) trimVictim(except string) *dSession {
	if w.cfg.Session.Eviction == EvictBlock {
		return nil // nothing is pinned: LRU frees blocks as the pool needs them
	}
	return w.oldestPinned(except) // at session granularity only pinned sessions hold KV to free
}

// chargeTrim charges the scheduler stall of a trim that freed tokens.
func (w *Worker) chargeTrim(now float64, freed int64) {
	if cost := w.cfg.Session.TrimStallS + w.cfg.Session.TrimStallPerTokenS*float64(freed); cost > 0 {
		// The trim runs on the scheduler loop from now: the next step, and
		// the handling of KV transfers landing here, wait for it.
		w.stallUntil = max(w.stallUntil, now) + cost
		w.stats.StallS += cost
		w.events = append(w.events, Event{Kind: EvStall, Time: now, Stall: cost})
	}
}

// evictSession frees a session's KV on this worker: its pin, its tail and
// (session granularity) the path only it held. It returns the tokens freed.
func (w *Worker) evictSession(now float64, s *dSession) int64 {
	hot := s.inflight > 0 // a request of it admitted or queued here (TrimAny)
	var freed int64
	if t := w.tail(s.key()); t != nil {
		freed += t.tokens
		w.dropTail(t)
	}
	var path []uint64
	var held int64
	demoted, stored := false, false // the host tier, or else storage, holds what HBM frees (hicache.go)
	if s.pinned {
		if w.cfg.Session.ReportPaths || w.cfg.Session.DumpOnEvict {
			path, held = w.tree.PathBlocks(s.node)
		}
		w.setPinned(s, false)
		if w.cfg.Session.DumpOnEvict && len(path) > 0 {
			// Pinned for its dump: freed at ReleaseDump (dump.go).
			w.holdForDump(s.id, s.node, held)
		} else {
			held = 0
			w.tree.Unlock(s.node, now)
			demoted, stored = w.hiDemoteSession(now, s.node, !hot)
			freed += w.tree.EvictPath(s.node)
		}
	}
	if w.cfg.Session.Eviction == EvictBlock {
		if s.resident() {
			w.nResident-- // a request of it still here: no longer counted
		}
		w.dsess.Delete(s.key()) // nothing pinned: forgetting it is the eviction
	} else if s.forgotten && !s.resident() {
		w.dsess.Delete(s.key())
	}
	w.stats.EvictedTokens += freed
	freed += held // what the eviction will have freed once its dump ends (at most)
	w.stats.SessionEvictions++
	w.events = append(w.events, Event{Kind: EvSessionEvicted, Session: s.id, SessionNum: s.num, Time: now, Tokens: int(freed), Blocks: path, Hot: hot, Demoted: demoted, Stored: stored})
	return freed
}

// SessionPath is the block ids of the KV a resident session holds here
// (its pinned prompt path; at block granularity, nothing is pinned and ok
// is false), for a D→P snapshot.
func (w *Worker) SessionPath(session string) (blocks []uint64, tokens int64, ok bool) {
	return w.SessionPathKey(SessionKey{ID: session})
}

// SessionPathKey is SessionPath of a session the owner numbers.
func (w *Worker) SessionPathKey(k SessionKey) (blocks []uint64, tokens int64, ok bool) {
	s := w.sess(k)
	if s == nil || !s.pinned {
		return nil, 0, false
	}
	blocks, tokens = w.tree.PathBlocks(s.node)
	return blocks, tokens, true
}

// IngestSnapshot files a session's KV received from a decoder (a D→P
// snapshot) in this worker's radix cache, unlocked, so the session's next
// prefill here hits it: SGLang's finalize_ingest. tokens is the snapshot's
// length: its last block holds what is left of it after the whole ones
// (0 takes every block whole). It reports the tokens added, or false when
// the pool cannot make room.
func (w *Worker) IngestSnapshot(now float64, blocks []uint64, tokens int64) (int64, bool) {
	if w.tree == nil || len(blocks) == 0 {
		return 0, false
	}
	bs := int64(w.cfg.BlockSize)
	last := bs
	if rest := tokens - int64(len(blocks)-1)*bs; tokens > 0 && rest > 0 && rest < bs {
		last = rest
	}
	m := w.tree.Lock(blocks, last, now)
	defer func() { w.tree.Unlock(m.Node, now) }()
	if m.Blocks >= len(blocks) {
		return 0, true
	}
	add := int64(len(blocks)-m.Blocks-1)*bs + last
	if !w.makeRoomFor(now, add, "") {
		return 0, false
	}
	var adopted int64
	m.Node, adopted = w.tree.Insert(m.Node, blocks, m.Blocks, last, now)
	return adopted, true
}

// unpinFor releases a session's pin when its next request is admitted
// here: a direct append holds what it reuses of the session's KV with its
// own lock (taken before this call) and a reseed replaces it, so the rest —
// the old partial last block, a pinned output tail — becomes evictable
// instead of crowding the request out of its own pool. The request pins the
// session again when it ends (sessionEnd). It returns the session it
// unpinned (nil: none), for repin should the admission fail.
func (w *Worker) unpinFor(now float64, r *Request) *dSession {
	if !w.cfg.Session.Enabled || !r.KeepSession {
		return nil
	}
	s := w.sess(r.sessKey())
	if s == nil {
		return nil
	}
	if t := w.tail(r.sessKey()); t != nil && t.pinned {
		w.dropTail(t)
	}
	if !s.pinned {
		return nil
	}
	w.setPinned(s, false)
	w.tree.Unlock(s.node, now)
	return s
}

// repin pins again a session unpinFor released when its request's
// admission failed after all: the request waits, and meanwhile its
// session's KV must not become room for others without an eviction report
// (the router still believes the session resident here; the KV would be
// lost silently). The path is intact: a failed makeRoomFor evicts no radix
// leaf, it trims only other sessions. The output tail unpinFor dropped is
// not restored: the request does not continue it.
func (w *Worker) repin(now float64, s *dSession) {
	if s == nil || s.pinned {
		return
	}
	w.tree.Relock(s.node, now)
	w.setPinned(s, true)
}

// setPinned pins or unpins a session's prompt path in the books: trimOne
// looks for victims among the pinned sessions only, not every session the
// worker has seen (most of which it evicted long ago).
func (w *Worker) setPinned(s *dSession, on bool) {
	defer w.residentChanged(s, s.resident())
	switch {
	case on && !s.pinned:
		w.nPinned++
	case !on && s.pinned:
		w.nPinned--
	}
	s.pinned = on
	defer w.sessionMoved(s)
}

// sessionStart notes that a request of the session entered this worker.
func (w *Worker) sessionStart(now float64, r *Request) {
	if !w.cfg.Session.Enabled || r.Session == "" || !r.KeepSession {
		return
	}
	s := w.sess(r.sessKey())
	if s == nil {
		s = &dSession{id: r.Session, num: r.SessionNum}
		w.dsess.Put(r.sessKey(), s)
	}
	was := s.resident()
	s.inflight++
	w.residentChanged(s, was)
	s.lastUse = now
	w.sessionMoved(s)
	r.sessCounted = true
}

// sessionEnd keeps a finished request's KV as its session's residency: at
// session granularity the prompt path moves from the request's lock to the
// session's pin (and its output tail is pinned with it).
func (w *Worker) sessionEnd(now float64, r *Request) {
	if !w.cfg.Session.Enabled || r.Session == "" || !r.KeepSession {
		return
	}
	s := w.sess(r.sessKey())
	if s == nil || !r.sessCounted {
		return
	}
	r.sessCounted = false
	was := s.resident()
	s.inflight--
	w.residentChanged(s, was)
	s.lastUse = now
	w.sessionMoved(s)
	s.tokens = int64(r.Input + r.generated)
	if w.cfg.Session.Eviction != EvictSession || !r.locked {
		return
	}
	if s.pinned {
		w.tree.Unlock(s.node, now)
	}
	s.node = r.node
	w.setPinned(s, true)
	r.locked = false // the session holds the lock now
	if t := w.tail(r.sessKey()); t != nil && !t.pinned {
		t.pinned = true
		w.pinnedTail += t.tokens
	}
	w.holdCap(now, s.id)
}

// holdCap trims the least recently used other sessions while more than the
// session cap are resident, as session's admission would have: admissions
// granted before either seed arrived each found room under the cap (a grant
// reserves nothing, and neither session was resident yet), so the later
// seed to end makes room now. The trims are reported (EvSessionEvicted)
// like any other.
func (w *Worker) holdCap(now float64, session string) {
	c := w.cfg.Session.Cap
	if c <= 0 {
		return
	}
	var rep AdmitReply
	for w.residentSessions() > c && w.trimOne(now, session, &rep) {
	}
}

// PinnedTokens is the KV held for resident sessions and not evictable by
// LRU (session granularity): their pinned prompt paths and output tails.
// With no request in flight, Used = CachedTokens + PinnedTokens.
func (w *Worker) PinnedTokens() int64 {
	if w.tree == nil {
		return 0
	}
	return w.tree.Tokens() - w.tree.EvictableTokens() + w.pinnedTail
}

// Sessions lists the sessions resident here, most recently used first (for
// reports and tests).
func (w *Worker) Sessions() []string {
	var ss []*dSession
	w.dsess.Each(func(s *dSession) { ss = append(ss, s) })
	sort.Slice(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if a.lastUse != b.lastUse {
			return a.lastUse > b.lastUse
		}
		return a.id < b.id
	})
	var out []string
	for _, s := range ss {
		out = append(out, s.id)
	}
	return out
}

// adoptPrompt files a DecodeOnly request's received prompt KV in the radix
// cache when its session is to be kept, so the next turn appends on it. The
// request holds the path locked until it ends.
func (w *Worker) adoptPrompt(now float64, r *Request) {
	if w.cfg.DecodeRadix {
		w.adoptDelta(now, r)
		return
	}
	if w.tree == nil || !r.KeepSession || !w.cfg.Session.Enabled || len(r.Blocks) == 0 {
		return
	}
	last := w.lastBlockTokens(r.Input, len(r.Blocks))
	if full := r.Input / w.cfg.BlockSize; full > 0 && full <= len(r.Blocks) {
		r.lastWhole = r.Blocks[full-1] // for its output tail (output.go)
	}
	m := w.tree.Lock(r.Blocks, last, now)
	node, _ := w.insertPrompt(r, m.Node, r.Blocks, m.Blocks, last, now)
	// The tree holds the whole prompt now; the reservation's copy goes.
	r.own -= int64(r.Input)
	w.own -= int64(r.Input)
	r.node, r.locked = node, true
}
