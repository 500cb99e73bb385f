package sim

import (
	"fmt"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/engine"
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

// syncOp is one snapshot in flight.
type syncOp struct {
	session string
	p, d    int // prefill and decode indices in their pools
	blocks  []uint64
	tokens  int64
	start   float64
	done    func(ok bool) // passive: the reseed waiting for it
	held    bool          // on-evict: the decoder holds the session's KV until the op ends
	ended   bool          // its outcome is recorded (a timed-out dump may land later)
	stale   bool          // a later turn no longer extends it
}

// startSync runs prepare_receive and the dump of blocks from decoder d to
// prefill p.
func (s *Sim) startSync(op *syncOp) {
	op.start = s.now
	if op.tokens <= 0 || len(op.blocks) == 0 {
		s.endSync(op, "skipped", "entry", "zero-target-tokens", 0)
		return
	}
	if s.snapUsed == nil {
		s.snapUsed = make([]int64, len(s.prefills))
	}
	capTok := s.cfg.KVC.SnapshotBufBytes / s.kvBytes
	if s.snapUsed[op.p]+op.tokens > capTok {
		s.endSync(op, "failed", "prepare", fmt.Sprintf("snapshot-buf-full: %d tokens asked, %d available", op.tokens, capTok-s.snapUsed[op.p]), 0)
		return
	}
	if s.deadPeer != nil && s.deadPeer[[2]int{op.p, op.d}] {
		s.endSync(op, "failed", "dump", fmt.Sprintf("transfer-failed: %s ↔ %s was marked dead after a transfer timeout (--peer-failure hair-trigger)",
			s.workers[s.prefills[op.p]].Name(), s.workers[s.decodes[op.d]].Name()), 0)
		return
	}
	s.snapUsed[op.p] += op.tokens
	x := &engine.Transfer{Bytes: op.tokens * s.kvBytes, Tag: op}
	s.links[op.p].Start(s.now, x)
	s.reschedLink(op.p)
	if s.syncing == nil {
		s.syncing = map[string][]*syncOp{}
	}
	s.syncing[op.session] = append(s.syncing[op.session], op)
	if t := s.cfg.TransferTimeoutS; t > 0 {
		s.push(event{t: s.now + t, kind: evSync, idx: syncTimeout, xfer: x})
	}
}

// syncDumped finalizes a snapshot whose dump landed: P ingests it into its
// radix cache and the buffer space is released.
func (s *Sim) syncDumped(op *syncOp) {
	if op.ended {
		return // it timed out: its buffer went back then
	}
	s.snapUsed[op.p] -= op.tokens
	if op.stale {
		s.endSync(op, "skipped", "finalize", "stale: a later turn of the session no longer extends the snapshot", op.tokens*s.kvBytes)
		return
	}
	pw := s.prefills[op.p]
	added, ok := s.workers[pw].IngestSnapshot(s.now, op.blocks)
	s.collect(pw)
	if !ok {
		s.endSync(op, "failed", "finalize", "kvpool-alloc-failed-at-ingest", op.tokens*s.kvBytes)
		return
	}
	s.endSync(op, "ok", "finalize", fmt.Sprintf("inserted_prefix_len=%d", added), op.tokens*s.kvBytes)
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
	s.snapUsed[op.p] -= op.tokens
	s.endSync(op, "failed", "dump", fmt.Sprintf("transfer-failed: the dump was still on the link after %g s (--transfer-timeout)", s.cfg.TransferTimeoutS), 0)
}

// syncSeeTurn marks the session's snapshots in flight stale when its new
// turn's prompt does not extend their whole blocks (the last block of a
// snapshot may be partial, its hash not the full block's).
func (s *Sim) syncSeeTurn(r *req) {
	for _, op := range s.syncing[r.t.SessionID] {
		if n := len(op.blocks) - 1; n > len(r.t.HashIDs) || !equalIDs(op.blocks[:max(n, 0)], r.t.HashIDs[:max(n, 0)]) {
			op.stale = true
		}
	}
}

func equalIDs(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *Sim) endSync(op *syncOp, outcome, stage, reason string, bytes int64) {
	op.ended = true
	if ops := s.syncing[op.session]; len(ops) > 0 {
		kept := ops[:0]
		for _, o := range ops {
			if o != op {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(s.syncing, op.session)
		} else {
			s.syncing[op.session] = kept
		}
	}
	key := outcome + ": " + stage
	if outcome != "ok" {
		key += ": " + strings.SplitN(reason, ":", 2)[0]
	}
	s.syncOutcomes[key]++
	s.ev.TimeS, s.ev.Kind, s.ev.SessionID, s.ev.RequestID = s.now, "d-to-p-sync", op.session, ""
	s.ev.Worker = s.workers[s.decodes[op.d]].Name()
	s.ev.Detail = fmt.Sprintf("event=%s stage=%s reason=%s to=%s dump_ms=%.3f bytes=%d kv_committed_len=%d",
		outcome, stage, reason, s.workers[s.prefills[op.p]].Name(), 1000*(s.now-op.start), bytes, op.tokens)
	s.ev.Tokens = op.tokens
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
func (s *Sim) syncPrefill(session string) int {
	if p, ok := s.disp.PRouter().Pin(session); ok {
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
	blocks, tokens, ok := s.workers[r.d].SessionPath(r.t.SessionID)
	if !ok {
		return
	}
	s.lastSync[r.t.SessionID] = int64(r.t.InputLength + r.t.OutputLength)
	s.startSync(&syncOp{session: r.t.SessionID, p: s.syncPrefill(r.t.SessionID), d: d, blocks: blocks, tokens: tokens})
}

// syncBeforeReseed is the passive mode: a reseed first asks the decoder
// that last held the session for a snapshot; P's prefill waits for it.
func (s *Sim) syncBeforeReseed(r *req, p int) {
	last := r.x.LastDecoder()
	if s.cfg.KVC.DToP != DToPPassive || last < 0 {
		return
	}
	op := &syncOp{session: r.t.SessionID, p: p, d: last, start: s.now}
	blocks, tokens, ok := s.workers[s.decodes[last]].SessionPath(r.t.SessionID)
	if !ok {
		s.endSync(op, "skipped", "entry", "session-not-resident", 0)
		return
	}
	r.syncWait = true
	s.startSync(&syncOp{session: r.t.SessionID, p: p, d: last, blocks: blocks, tokens: tokens, done: func(bool) {
		r.syncWait = false
		if r.dReady && !r.dead {
			s.submitPrefill(r)
		}
	}})
}
