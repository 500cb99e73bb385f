package sim

import (
	"fmt"

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
//   - on-evict: a decoder pushes a session's KV as it evicts it;
//   - active: a decoder pushes after a direct append once the session grew
//     by --d-to-p-delta-tokens since its last push.
//
// The dump crosses the P↔D link, sharing it with P→D traffic. Snapshots are
// keyed by block hashes, as P's radix cache is. Simplification: on-evict
// frees the decoder's KV at once rather than pinning it until the dump ends.

const (
	DToPOff     = "off"
	DToPPassive = "passive"
	DToPOnEvict = "on-evict"
	DToPActive  = "active"
)

// syncOp is one snapshot in flight.
type syncOp struct {
	session string
	p, d    int // prefill and decode indices in their pools
	blocks  []uint64
	tokens  int64
	start   float64
	done    func(ok bool) // passive: the reseed waiting for it
}

// startSync runs prepare_receive and the dump of blocks from decoder d to
// prefill p.
func (s *Sim) startSync(p, d int, session string, blocks []uint64, tokens int64, done func(bool)) {
	op := &syncOp{session: session, p: p, d: d, blocks: blocks, tokens: tokens, start: s.now, done: done}
	if tokens <= 0 || len(blocks) == 0 {
		s.endSync(op, "skipped", "entry", "zero-target-tokens", 0)
		return
	}
	if s.snapUsed == nil {
		s.snapUsed = make([]int64, len(s.prefills))
	}
	capTok := s.cfg.KVC.SnapshotBufBytes / s.kvBytes
	if s.snapUsed[p]+tokens > capTok {
		s.endSync(op, "failed", "prepare", fmt.Sprintf("snapshot-buf-full: %d tokens asked, %d available", tokens, capTok-s.snapUsed[p]), 0)
		return
	}
	s.snapUsed[p] += tokens
	s.links[p].Start(s.now, &engine.Transfer{Bytes: tokens * s.kvBytes, Tag: op})
	s.reschedLink(p)
}

// syncDumped finalizes a snapshot whose dump landed: P ingests it into its
// radix cache and the buffer space is released.
func (s *Sim) syncDumped(op *syncOp) {
	s.snapUsed[op.p] -= op.tokens
	pw := s.prefills[op.p]
	added, ok := s.workers[pw].IngestSnapshot(s.now, op.blocks)
	s.collect(pw)
	if !ok {
		s.endSync(op, "failed", "finalize", "kvpool-alloc-failed-at-ingest", op.tokens*s.kvBytes)
		return
	}
	s.endSync(op, "ok", "finalize", fmt.Sprintf("inserted_prefix_len=%d", added), op.tokens*s.kvBytes)
}

func (s *Sim) endSync(op *syncOp, event, stage, reason string, bytes int64) {
	s.syncOutcomes[event+": "+stage]++
	s.ev.TimeS, s.ev.Kind, s.ev.SessionID, s.ev.RequestID = s.now, "d-to-p-sync", op.session, ""
	s.ev.Worker = s.workers[s.decodes[op.d]].Name()
	s.ev.Detail = fmt.Sprintf("event=%s stage=%s reason=%s to=%s dump_ms=%.3f bytes=%d kv_committed_len=%d",
		event, stage, reason, s.workers[s.prefills[op.p]].Name(), 1000*(s.now-op.start), bytes, op.tokens)
	s.ev.Tokens = op.tokens
	if err := s.sink.Event(&s.ev); err != nil && s.err == nil {
		s.err = err
	}
	if op.done != nil {
		op.done(event == "ok")
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
	s.startSync(s.syncPrefill(r.t.SessionID), d, r.t.SessionID, blocks, tokens, nil)
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
	s.startSync(p, last, r.t.SessionID, blocks, tokens, func(bool) {
		r.syncWait = false
		if r.dReady && !r.dead {
			s.submitPrefill(r)
		}
	})
}
