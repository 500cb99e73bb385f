package sim

import (
	"fmt"
	"io"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/idtable"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// replay is the closed-loop driver: it reads the trace as simulated time
// reaches each request, holds a turn until its parent has finished (plus
// think time), applies the client's concurrency limit and timeouts.
//
// Memory follows what is live: a request exists from its trace time until
// it ends; per session only the last finished turn is remembered.
type replay struct {
	hasNext       bool
	next          trace.Request
	nextLast      bool    // next is its session's last request (SessionEnds)
	nextAt        float64 // scaled trace time of next
	lastTS        float64
	nextSlot      int32 // the checker's session slot of next (trace.Checker.SessionSlot)
	nextForgotten bool  // next's session was forgotten after next was read (sessionAt)
	// The sessions by the checker's slot: the checker hashes a request's
	// session id once, and the replay indexes by the slot it found (it
	// kept a map by id of its own before, a second hash a request). A
	// slot is freed, here and in the checker, when its session is closed
	// or forgotten, and the checker gives it to a later session.
	sessions []*session
	inflight idtable.Table[*req] // ingested, not yet ended, by chat id (a slice while chat ids come in order)
	gate     []*req
	gateHead int
	active   int // sent and not ended
	live     int // ingested and not ended
	sampling bool
	stats    ReplayStats
}

type session struct {
	id   string
	slot int32 // its index in replay.sessions and the checker's slot
	// num is its number for the workers and the control plane
	// (engine.Request.SessionNum): the order it entered in, from 1, never
	// given to another session, so their records of it are filed by number
	// in slices that slide as sessions end, not hashed by id.
	num      int64
	lastChat int64   // last ended turn
	lastEnd  float64 // when it ended

	chain       []uint64 // the session's hash chain; turns hold prefixes of it (chain.go)
	live        int      // requests ingested and not ended
	readers     int      // requests still reading their view of chain
	idleGen     uint32
	hasLast     bool
	frozen      bool // chain's array is never written again: caches key on it (chain.go)
	idleCounted bool
	closing     bool // its last request has been ingested (SessionEnds)
	gone        bool // closed: its records are dropped (sessionend.go)
	// Bit i: a request of it went to worker i (Submit or Reserve, which
	// alone make a worker's record of a session), so that closing it asks
	// those workers only (sessionend.go). Pools of over 64 ask every one.
	onWorkers uint64
}

// reqTrace is what the replay reads of a request's trace line once it is
// ingested: trace.Request less its type and parent session, which only
// the trace checker reads (32 bytes less a request).
type reqTrace struct {
	SessionID    string
	ChatID       int64
	ParentChatID int64 // -1 for the session's root
	Turn         int
	Timestamp    float64
	InputLength  int
	OutputLength int
	HashIDs      []uint64
	ThinkTimeS   *float64
}

func newReqTrace(t *trace.Request) reqTrace {
	return reqTrace{SessionID: t.SessionID, ChatID: t.ChatID, ParentChatID: t.ParentChatID,
		Turn: t.Turn, Timestamp: t.Timestamp, InputLength: t.InputLength,
		OutputLength: t.OutputLength, HashIDs: t.HashIDs, ThinkTimeS: t.ThinkTimeS}
}

// readyAt is r's scaled trace time: the same division ingest made for
// s.nextAt, so the same float.
func (r *req) readyAt(s *Sim) float64 { return r.t.Timestamp / s.cfg.TimeScale }

// IsRoot reports whether the request opens its session.
func (t *reqTrace) IsRoot() bool { return t.ParentChatID < 0 }

// req is one request's life in the simulator, allocated once per request
// and so kept small: 632 bytes (the 640-byte size class, which
// TestRecordSizeClass holds; it was 752, in the 768-byte class), with its
// flags in one word, the trace fields the replay reads only, its scaled
// trace time and TTFT computed where they are read instead of kept, and
// engine.Request's state for the sliding-window share count and the storage
// prefetch behind one pointer (inline it took req to 696 bytes).
type req struct {
	t        reqTrace
	sess     *session
	released float64 // handed to the client (parent done, think time over)
	sent     float64 // left the concurrency gate
	waiters  []*req  // next turns waiting for this one to end

	p, d int // worker indices (p = -1 for colocated)
	// The request on its prefill worker (PD paths only: a colocated or
	// direct request has none, and its record is 40 % smaller without
	// one) and on its decoder or colocated worker.
	pe       *engine.Request
	de       engine.Request
	x        *kvc.Dispatch // the control plane's decisions for it
	startAt  float64       // its final action started (after admission RPCs)
	sentKV   int           // prompt tokens whose KV P has started sending
	xferLive int32         // transfers of r's chunks still on the link
	// gen is the record's life: bumped each time it is recycled for
	// another request (recycle.go), and written into the events queued for
	// it, so that an event of an earlier life is known stale.
	gen     uint32
	xferEnd float64
	firstAt float64 // first token out (D's join in PD)

	ended    bool
	dead     bool // timed out or failed: ignore late engine events
	reading  bool // still reads its view of the session's chain (chain.go)
	shared   bool // its view is of a frozen chain: caches keep it uncopied
	delayed  bool // waited out the current action's backpressure delay
	pDone    bool // prefill done on P: every chunk's KV is on its way
	dReady   bool // D pre-allocated its KV (EvReserved)
	syncWait bool // P waits for a passive D→P snapshot (dtop.go)
}

func (s *Sim) initReplay() {
	s.stats.TraceBlockSize = s.src.Header().BlockSize
	s.readNext()
}

// readNext peeks the next trace request.
func (s *Sim) readNext() {
	err := s.src.Next(&s.next) // reuses the buffer: requests hold views of their session's chain
	if err == io.EOF {
		s.hasNext = false
		return
	}
	if err != nil {
		s.hasNext = false
		s.err = err
		return
	}
	if s.next.Timestamp < s.lastTS {
		s.hasNext = false
		s.err = fmt.Errorf("sim: trace not in timestamp order at chat %d (%.3f s after %.3f s); sort it first (trace convert writes sorted files)",
			s.next.ChatID, s.next.Timestamp, s.lastTS)
		return
	}
	s.lastTS = s.next.Timestamp
	s.hasNext = true
	s.nextLast = s.closeEnded && s.checked.ends.LastOfSession()
	s.nextSlot = s.checked.chk.SessionSlot()
	s.nextAt = s.next.Timestamp / s.cfg.TimeScale
}

// ingest takes the peeked request into the simulation at its trace time.
func (s *Sim) ingest() error {
	if s.now < s.nextAt {
		s.now = s.nextAt
	}
	s.forgetIdle()
	r := s.newReq()
	r.t = newReqTrace(&s.next)
	sess := s.sessionAt(s.nextSlot, r.t.SessionID)
	s.sessionBusy(sess)
	r.t.HashIDs, r.shared = s.adoptChain(sess, r.t.HashIDs, s.nextLast)
	sess.closing = sess.closing || s.nextLast
	s.readNext()
	s.stats.Requests++
	s.live++
	sess.live++
	sess.readers++
	r.reading = true
	r.sess = sess
	s.inflight.Put(r.t.ChatID, r)
	if !s.sampling && !s.quiet { // samples go only to the sink
		s.sampling = true
		s.push(event{t: s.now, kind: evSample})
	}
	switch {
	case r.t.IsRoot():
		s.schedRelease(r, s.now)
	case sess.hasLast && sess.lastChat == r.t.ParentChatID:
		s.schedRelease(r, max(s.now, sess.lastEnd+s.think(r)))
	default:
		if parent, ok := s.inflight.Get(r.t.ParentChatID); ok && parent != r {
			parent.alive()
			parent.waiters = append(parent.waiters, r)
		} else {
			s.stats.OrphanTurns++
			s.schedRelease(r, s.now)
		}
	}
	return s.err
}

// sessionAt is the session in the checker's slot, opened when the slot
// holds none. A slot's session is the request's own: the checker gave the
// slot to this session id, and the replay empties a slot exactly when the
// checker frees it (dropSession). One case differs: a session forgotten
// (--session-idle-forget) after its next request was read and before that
// request was ingested. The checker freed the slot and may give it to a
// later session, so the session opened for that request is kept off the
// table (its requests reach it through their records, and the checker
// refuses any later turn of it).
func (s *Sim) sessionAt(slot int32, id string) *session {
	if int(slot) < len(s.sessions) {
		if sess := s.sessions[slot]; sess != nil {
			return sess
		}
	}
	s.stats.Sessions++
	sess := &session{id: id, slot: slot, num: int64(s.stats.Sessions)}
	if s.nextForgotten {
		s.nextForgotten = false
		sess.slot = -1
		return sess
	}
	for int(slot) >= len(s.sessions) {
		s.sessions = append(s.sessions, nil)
	}
	s.sessions[slot] = sess
	return sess
}

// heldSessions is how many sessions the table holds (for tests).
func (s *Sim) heldSessions() int {
	n := 0
	for _, sess := range s.sessions {
		if sess != nil {
			n++
		}
	}
	return n
}

// key names the session to the workers.
func (sess *session) key() engine.SessionKey { return engine.SessionKey{ID: sess.id, Num: sess.num} }

// sessKey names r's session to the workers.
func (r *req) sessKey() engine.SessionKey { return r.sess.key() }

// dropSession empties sess's slot and frees it in the checker.
func (s *Sim) dropSession(sess *session) {
	if sess.slot < 0 {
		return
	}
	s.sessions[sess.slot] = nil
	s.checked.chk.ForgetSlot(sess.slot)
	if s.hasNext && s.nextSlot == sess.slot {
		s.nextForgotten = true // see sessionAt
	}
	sess.slot = -1
}

func (s *Sim) think(r *req) float64 {
	if s.cfg.IgnoreThink || r.t.ThinkTimeS == nil {
		return 0
	}
	return *r.t.ThinkTimeS / s.cfg.TimeScale
}

func (s *Sim) schedRelease(r *req, at float64) {
	if at <= s.now {
		s.release(r)
		return
	}
	s.pushFor(r, event{t: at, kind: evRelease})
}

// release hands r to the client: it is sent now, or queued behind the
// concurrency limit.
func (s *Sim) release(r *req) {
	r.alive()
	r.released = s.now
	if s.cfg.Concurrency > 0 && (s.active >= s.cfg.Concurrency || s.gateHead < len(s.gate)) {
		s.stats.GateWaits++
		s.gate = append(s.gate, r)
		return
	}
	s.send(r)
}

func (s *Sim) send(r *req) {
	r.sent = s.now
	s.active++
	s.stats.MaxInflight = max(s.stats.MaxInflight, s.active)
	if s.cfg.TimeoutS > 0 {
		s.pushFor(r, event{t: s.now + s.cfg.TimeoutS, kind: evTimeout})
	}
	if why := tooLong(r.t.InputLength, r.t.OutputLength, s.cfg.MaxInputLen); why != "" {
		s.fail(r, metrics.StatusFailed, why)
		return
	}
	s.dispatch(r)
}

// tooLong is SGLang's context check at tokenization: a prompt of the whole
// context or more is refused, and so is one whose prompt plus requested
// output does not fit. An emulated worker answers the same requests with
// the same refusal, so a live replay and a simulated run fail the same ones.
func tooLong(input, output, max int) string {
	switch {
	case max <= 0:
		return ""
	case input >= max:
		return "input-too-long: " + strconv.Itoa(input) + " tokens, context " + strconv.Itoa(max)
	case input+output > max:
		return "input-too-long: " + strconv.Itoa(input) + " + " + strconv.Itoa(output) + " output tokens > context " + strconv.Itoa(max)
	}
	return ""
}

func (s *Sim) timeout(r *req) {
	if r.alive().ended {
		return
	}
	s.abortLegs(r)
	s.fail(r, metrics.StatusTimeout, fmt.Sprintf("timeout: no completion within %gs of sending", s.cfg.TimeoutS))
}

// end closes r's life: metrics, the gate, and its waiting next turns.
func (s *Sim) end(r *req) {
	r.ended = true
	s.doneReading(r)
	s.active--
	s.live--
	if r.sess.live--; r.sess.live == 0 && !r.sess.closing {
		s.sessionIdle(r.sess) // a closing one is closed below, not filed idle
	}
	s.forgetIdle()
	s.inflight.Delete(r.t.ChatID)
	r.sess.lastChat, r.sess.lastEnd, r.sess.hasLast = r.t.ChatID, s.now, true
	// The gate first: requests already waiting there go before next turns
	// released by this ending (FIFO).
	for s.gateHead < len(s.gate) && (s.cfg.Concurrency == 0 || s.active < s.cfg.Concurrency) {
		g := s.gate[s.gateHead]
		s.gate[s.gateHead] = nil
		s.gateHead++
		s.send(g)
	}
	if s.gateHead > 1024 && s.gateHead*2 > len(s.gate) {
		s.gate = append(s.gate[:0], s.gate[s.gateHead:]...)
		s.gateHead = 0
	}
	for _, w := range r.waiters {
		s.schedRelease(w, max(w.readyAt(s), s.now+s.think(w)))
	}
	clear(r.waiters)
	r.waiters = r.waiters[:0]
	if r.sess.closing && r.sess.live == 0 && !r.sess.gone {
		s.closeSession(r.sess)
	}
	s.finished++
	if s.progress != nil && s.finished%2048 == 0 {
		s.progress(s.finished, s.now)
	}
	s.retired = append(s.retired, r) // recycled once the drain is over (recycle.go)
}

// fail ends r with a status other than completed and its cause.
func (s *Sim) fail(r *req, st metrics.Status, cause string) {
	r.dead = true
	s.record(r, st, cause)
	s.end(r)
}

// sampleWorkers logs every worker's occupancy and schedules the next sample
// while anything is live.
func (s *Sim) sampleWorkers() {
	for _, w := range s.workers {
		s.sample = w.Sample(s.now)
		if err := s.sink.Worker(&s.sample); err != nil && s.err == nil {
			s.err = err
		}
	}
	switch {
	case s.live > 0 && !s.hasNext && len(s.events) == 0:
		// Nothing left can advance the live requests: fail loudly rather
		// than sample an idle cluster forever.
		s.stuck()
	case s.live > 0 || s.hasNext:
		s.push(event{t: s.now + s.cfg.SampleIntervalS, kind: evSample})
	default:
		s.sampling = false
	}
}

// stuck records that live requests can never finish: no event is left to
// advance them.
func (s *Sim) stuck() {
	if s.err == nil {
		s.err = fmt.Errorf("sim: %d requests can never finish: no event is left to advance them (an engine bug)", s.live)
	}
}

func (s *Sim) logEvent(kind, worker string, r *req, detail string, tokens int64) {
	if s.quiet {
		return
	}
	s.ev = metrics.Event{TimeS: s.now, Kind: kind, Worker: worker, SessionID: r.t.SessionID,
		RequestID: strconv.FormatInt(r.t.ChatID, 10), Detail: detail, Tokens: tokens}
	if err := s.sink.Event(&s.ev); err != nil && s.err == nil {
		s.err = err
	}
}

// logEventW logs an event of a worker with no request attached.
func (s *Sim) logEventW(kind, worker, detail string) {
	if s.quiet {
		return
	}
	s.ev = metrics.Event{TimeS: s.now, Kind: kind, Worker: worker, Detail: detail}
	if err := s.sink.Event(&s.ev); err != nil && s.err == nil {
		s.err = err
	}
}
