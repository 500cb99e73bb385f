package sim

import (
	"fmt"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// D→P snapshot sync (DESIGN §5; the seed's D_TO_P_SYNC design): a decoder
// copies a session's KV into a bounded snapshot buffer on a prefill worker
// (prepare_receive → dump → finalize_ingest), so that when the session is
// reseeded later P's prefill hits its cache and mostly only the transfer
// remains. Three modes:
//
//   - passive (the seed's): on a reseed, from the decoder that last held
//     the session, before P prefills; it fails session-not-resident when
//     that decoder already evicted it, which is when reseeds happen (F28);
//   - on-evict: a decoder pushes a session's KV as it evicts it, and keeps
//     that KV pinned until the dump ended (engine/dump.go), so the eviction
//     frees it only then;
//   - active: a decoder pushes after a direct append once the session grew
//     by --d-to-p-delta-tokens since its last push.
//
// The dump crosses the P↔D link, sharing it with P→D traffic. Snapshots are
// keyed by block hashes, as P's radix cache is. Outcomes, by stage: ok;
// skipped at entry (zero-target-tokens, session-not-resident); failed at
// prepare (snapshot-buf-full); failed at dump (transfer-failed: the P↔D
// peer is dead after a hair-trigger timeout, or the dump is still on the
// link after --transfer-timeout); skipped at finalize (stale: a later turn
// of the session no longer extends the snapshot's whole blocks — the
// session was rewritten, compacted say — so P is not given KV no prompt of
// it will match); failed at finalize (kvpool-alloc-failed-at-ingest).

const (
	DToPOff     = "off"
	DToPPassive = "passive"
	DToPOnEvict = "on-evict"
	DToPActive  = "active"
)

// evSync's idx: what the event is for.
const (
	syncTimeout int32 = iota // the dump's transfer timeout
	syncRelease              // an on-evict dump ended: the decoder frees the session's KV
)

// syncOp is one snapshot in flight. The prefill worker's side of it — the
// bounded buffer, staleness, the ingest into P's cache — is P's
// engine.SnapshotStore (engine/snapshot.go); what is here is the
// orchestration in virtual time: which decoder dumps to which prefill
// worker, the dump on the P↔D link, its timeout, the log.
type syncOp struct {
	session  string
	p, d     int // prefill and decode indices in their pools
	blocks   []uint64
	tokens   int64
	start    float64
	id       engine.SnapshotID // its reservation in P's snapshot buffer
	dumpAt   float64           // prepare_receive answered, the dump began
	landedAt float64           // the dump landed on P
	inserted int64             // ok: tokens P's cache got
	done     func(ok bool)     // passive: the reseed waiting for it
	held     bool              // on-evict: the decoder holds the session's KV until the op ends
	ended    bool              // its outcome is recorded (a timed-out dump may land later)
}

// snapStore is prefill worker p's snapshot buffer, made on first use.
func (s *Sim) snapStore(p int) *engine.SnapshotStore {
	for len(s.snaps) <= p {
		s.snaps = append(s.snaps, nil)
	}
	if s.snaps[p] == nil {
		s.snaps[p] = engine.NewSnapshotStore(s.workers[s.prefills[p]], s.cfg.KVC.SnapshotBufBytes)
	}
	return s.snaps[p]
}

// startSync runs prepare_receive and the dump of blocks from decoder d to
// prefill p. prepare_receive costs no virtual time here: the dump begins as
// it is answered.
func (s *Sim) startSync(op *syncOp) {
	op.start = s.now
	if op.tokens <= 0 || len(op.blocks) == 0 {
		s.endSync(op, "skipped", "entry", "zero-target-tokens", 0)
		return
	}
	st := s.snapStore(op.p)
	prep := st.PrepareReceive(op.session, op.tokens)
	if !prep.OK {
		s.endSync(op, "failed", "prepare", fmt.Sprintf("%s: %d tokens asked, %d available", prep.Reason, op.tokens, prep.AvailableTokens), 0)
		return
	}
	op.id, op.dumpAt = prep.ID, s.now
	if s.deadPeer != nil && s.deadPeer[[2]int{op.p, op.d}] {
		st.Release(op.id)
		s.endSync(op, "failed", "dump", fmt.Sprintf("transfer-failed: %s ↔ %s was marked dead after a transfer timeout (--peer-failure hair-trigger)",
			s.workers[s.prefills[op.p]].Name(), s.workers[s.decodes[op.d]].Name()), 0)
		return
	}
	x := &engine.Transfer{Bytes: op.tokens * s.kvBytes, Tag: op}
	s.links[op.p].Start(s.now, x)
	s.reschedLink(op.p)
	if t := s.cfg.TransferTimeoutS; t > 0 {
		s.push(event{t: s.now + t, kind: evSync, idx: syncTimeout, xfer: x})
	}
}

// syncDumped finalizes a snapshot whose dump landed: P's store gives the
// buffer space back and, unless the snapshot went stale, ingests it into
// P's radix cache.
func (s *Sim) syncDumped(op *syncOp) {
	if op.ended {
		return // it timed out: its buffer went back then
	}
	op.landedAt = s.now
	pw := s.prefills[op.p]
	in := s.snapStore(op.p).FinalizeIngest(s.now, s.workers[pw], op.id, op.blocks)
	switch in.Reason {
	case engine.ReasonStale:
		s.endSync(op, "skipped", "finalize", "stale: a later turn of the session no longer extends the snapshot", in.Bytes)
		return
	case engine.ReasonNoPendingIngest:
		panic(fmt.Sprintf("sim: snapshot %d of session %s landed on %s with no reservation", op.id, op.session, s.workers[pw].Name()))
	}
	s.collect(pw)
	if !in.OK {
		s.endSync(op, "failed", "finalize", in.Reason, in.Bytes)
		return
	}
	op.inserted = in.Inserted
	s.endSync(op, "ok", "finalize", fmt.Sprintf("inserted_prefix_len=%d", in.Inserted), in.Bytes)
}

// syncEvent handles evSync: a dump's timeout, or the end of an on-evict
// dump's pin (deferred to its own event: the eviction that started the
// dump is being reported from inside the decoder's event collection).
func (s *Sim) syncEvent(e event) {
	op := e.xfer.Tag.(*syncOp)
	if e.idx == syncRelease {
		dw := s.decodes[op.d]
		s.workers[dw].ReleaseDump(s.now, op.session)
		s.collect(dw)
		return
	}
	if op.ended {
		return
	}
	s.snapStore(op.p).Release(op.id)
	s.endSync(op, "failed", "dump", fmt.Sprintf("transfer-failed: the dump was still on the link after %g s (--transfer-timeout)", s.cfg.TransferTimeoutS), 0)
}

// syncSeeTurn tells the prefill workers' snapshot buffers that a turn of
// r's session was routed: a snapshot of it in flight whose whole blocks
// the turn's prompt does not extend is stale (engine.SnapshotStore.SeeTurn).
func (s *Sim) syncSeeTurn(r *req) {
	for _, st := range s.snaps {
		if st != nil {
			st.SeeTurn(r.t.SessionID, r.t.HashIDs)
		}
	}
}

// endSync records op's outcome at stage, with the stages it reached, and
// hands it to whoever waits. bytes: what crossed the link (0 unless the
// dump landed).
func (s *Sim) endSync(op *syncOp, outcome, stage, reason string, bytes int64) {
	op.ended = true
	key := outcome + ": " + stage
	code := ""
	if outcome != "ok" {
		code = strings.SplitN(reason, ":", 2)[0]
		key += ": " + code
	}
	s.syncOutcomes[key]++
	to := s.workers[s.prefills[op.p]].Name()
	sync := &metrics.SnapshotSync{Outcome: outcome, Stage: stage, Reason: code, To: to,
		Bytes: op.tokens * s.kvBytes, BytesPushed: bytes, KVCommittedLen: op.tokens, InsertedPrefixLen: op.inserted}
	switch stage {
	case "prepare":
		sync.Prepare = metrics.NewSyncStage(op.start, s.now)
	case "dump":
		sync.Prepare = metrics.NewSyncStage(op.start, op.dumpAt)
		sync.Dump = metrics.NewSyncStage(op.dumpAt, s.now)
	case "finalize":
		sync.Prepare = metrics.NewSyncStage(op.start, op.dumpAt)
		sync.Dump = metrics.NewSyncStage(op.dumpAt, op.landedAt)
		sync.Finalize = metrics.NewSyncStage(op.landedAt, s.now)
	}
	s.ev = metrics.Event{TimeS: s.now, Kind: "d-to-p-sync", SessionID: op.session, Worker: s.workers[s.decodes[op.d]].Name(),
		Detail: fmt.Sprintf("event=%s stage=%s reason=%s to=%s dump_ms=%.3f bytes=%d kv_committed_len=%d",
			outcome, stage, reason, to, 1000*(s.now-op.start), bytes, op.tokens),
		Tokens: op.tokens, SnapshotSync: sync}
	if err := s.sink.Event(&s.ev); err != nil && s.err == nil {
		s.err = err
	}
	if op.held {
		s.push(event{t: s.now, kind: evSync, idx: syncRelease, xfer: &engine.Transfer{Tag: op}})
	}
	if op.done != nil {
		op.done(outcome == "ok")
	}
}

// syncPrefill is the prefill worker a session's snapshot goes to: the one
// the router pinned it to, else the first.
func (s *Sim) syncPrefill(session engine.SessionKey) int {
	if p, ok := s.disp.PRouter().PinKey(session); ok {
		return p
	}
	return 0
}

// syncAfterAppend is the active mode's trigger: after a direct append, push
// the session once it grew enough since its last push.
func (s *Sim) syncAfterAppend(r *req) {
	if s.cfg.KVC.DToP != DToPActive || !r.de.KeepSession || r.p >= 0 {
		return
	}
	d := r.d - s.decodes[0]
	grown := int64(r.t.InputLength+r.t.OutputLength) - s.lastSync[r.t.SessionID]
	if grown < int64(s.cfg.KVC.DToPDeltaTokens) {
		return
	}
	blocks, tokens, ok := s.workers[r.d].SessionPathKey(r.sessKey())
	if !ok {
		return
	}
	s.lastSync[r.t.SessionID] = int64(r.t.InputLength + r.t.OutputLength)
	s.startSync(&syncOp{session: r.t.SessionID, p: s.syncPrefill(r.sessKey()), d: d, blocks: blocks, tokens: tokens})
}

// syncBeforeReseed is the passive mode: a reseed first asks the decoder
// that last held the session for a snapshot; P's prefill waits for it.
func (s *Sim) syncBeforeReseed(r *req, p int) {
	last := r.x.LastDecoder()
	if s.cfg.KVC.DToP != DToPPassive || last < 0 {
		return
	}
	op := &syncOp{session: r.t.SessionID, p: p, d: last, start: s.now}
	blocks, tokens, ok := s.workers[s.decodes[last]].SessionPathKey(r.sessKey())
	if !ok {
		s.endSync(op, "skipped", "entry", "session-not-resident", 0)
		return
	}
	r.syncWait = true
	s.startSync(&syncOp{session: r.t.SessionID, p: p, d: last, blocks: blocks, tokens: tokens, done: func(bool) {
		r.alive().syncWait = false
		if r.dReady && !r.dead {
			s.submitPrefill(r)
		}
	}})
}
