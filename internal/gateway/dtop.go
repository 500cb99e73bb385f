package gateway

// D→P snapshot sync, live (DESIGN §5; the simulator's internal/sim/dtop.go
// in virtual time): the gateway copies a session's KV from the decoder
// holding it into the snapshot buffer of the prefill worker that would
// reseed it, over the workers' three RPCs (internal/emulator/snapshot.go
// serves them over engine.SnapshotStore; the seed's SGLang fork had the
// same three routes): prepare_receive on P reserves room for the session's
// tokens, dump on D pushes the session's KV to P (D answers once it
// landed, with the blocks it sent), finalize_ingest on P files those
// blocks in P's radix cache. When the decoder later loses the session
// (evicted, flushed, drained) its reseed through P finds the synced prefix
// in P's cache and only the rest is prefilled.
//
//   - active: after a direct append completed on D, once the tokens D holds
//     for the session (prompt + completion) exceed what was last synced by
//     DeltaTokens, a sync runs in the background: the client's answer is
//     already out. One sync per session at a time, MaxInflight in all;
//     Close cancels them and waits.
//   - passive (the seed's): a reseed first syncs from the decoder that last
//     held the session, in the request's path, so P's prefill waits for it.
//     Mostly that decoder has lost the session already (seed-inventory F28)
//     and the dump answers session-not-resident; it pays when the decoder
//     still holds it but the session moved (a drained decoder, no space for
//     the append there).
//
// Every sync ends with one outcome, counted in pdhybrid_dp_syncs_total as
// the simulator's summary counts its d_to_p_sync: "<event>: <stage>" for
// ok, "<event>: <stage>: <reason>" otherwise, event ok, skipped or failed,
// stage entry, prepare, dump or finalize, and the reason as the worker
// gave it (its head before any ": detail", a plain token) or the
// gateway's: busy (a sync of the session in flight, or MaxInflight
// reached), zero-target-tokens, no-prefill (no prefill worker to pick),
// unreachable and http-<status> (the RPC got no answer, or not a 200),
// transfer-failed (the dump did not answer within DumpTimeout), cancelled
// (the gateway closed; a passive sync's client left). Each is
// logged at debug level, without prompt content.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// D→P sync modes (the simulator's names; on-evict needs a decoder that
// pushes as it evicts, which no worker offers over HTTP).
const (
	DToPOff     = "off"
	DToPPassive = "passive"
	DToPActive  = "active"
)

// DToPConfig sets up D→P snapshot sync (kvcache-centric only).
type DToPConfig struct {
	// Mode is off ("" too), active or passive.
	Mode string
	// DeltaTokens (active) is the session growth in tokens, since its last
	// sync, that starts the next (default 1024, the seed's K_DELTA).
	DeltaTokens int
	// MaxInflight (active) caps the syncs in flight (default 4).
	MaxInflight int
	// Timeout bounds prepare_receive and finalize_ingest (default 10 s),
	// DumpTimeout the dump, which answers once the KV crossed the link
	// (default 60 s).
	Timeout, DumpTimeout time.Duration
}

func (c *DToPConfig) defaults() {
	if c.Mode == "" {
		c.Mode = DToPOff
	}
	if c.DeltaTokens <= 0 {
		c.DeltaTokens = 1024
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 4
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.DumpTimeout <= 0 {
		c.DumpTimeout = time.Minute
	}
}

func (c *DToPConfig) check(mech kvc.Mechanism) error {
	switch c.Mode {
	case DToPOff:
		return nil
	case DToPActive, DToPPassive:
	default:
		return fmt.Errorf("gateway: unknown D→P sync mode %q (want off, active or passive)", c.Mode)
	}
	if mech != kvc.MechKVC {
		return fmt.Errorf("gateway: D→P sync needs the kvcache-centric mechanism, not %s", mech)
	}
	return nil
}

// dtopState is the gateway's D→P bookkeeping, under its own mutex (taken
// after Server.mu when both are held, never before).
type dtopState struct {
	ctx    context.Context // ends at Close: background syncs stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	synced map[string]int  // session → tokens D held at its last sync
	busy   map[string]bool // sessions with a sync in flight
	n      int             // active syncs in flight
}

func (s *Server) startDToP() error {
	s.cfg.DToP.defaults()
	if err := s.cfg.DToP.check(s.cfg.Dispatch.Mechanism); err != nil {
		return err
	}
	s.dtop.ctx, s.dtop.cancel = context.WithCancel(context.Background())
	s.dtop.synced, s.dtop.busy = map[string]int{}, map[string]bool{}
	return nil
}

// stopDToP cancels the background syncs and waits for them (Close).
func (s *Server) stopDToP() {
	t := &s.dtop
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

// forgetDToP drops an expired session's bookkeeping (held Server.mu).
func (s *Server) forgetDToP(session string) {
	t := &s.dtop
	t.mu.Lock()
	delete(t.synced, session)
	t.mu.Unlock()
}

// syncOp is one sync: session's KV from decoder dURL to prefill pURL.
type syncOp struct {
	session    string
	pURL, dURL string
	tokens     int // reserved at prepare_receive
	start      time.Time
	// what the stages took and moved, for the log
	prepare, dump, finalize time.Duration
	dumped, bytesPushed     int64 // the dump's tokens (D's KV of the session) and bytes
	inserted                int64 // tokens P's cache lacked and got
}

// snapshotReply is the workers' answer to the three RPCs (the emulator's
// SnapshotResponse; the fields the gateway reads).
type snapshotReply struct {
	OK                bool     `json:"ok"`
	Reason            string   `json:"reason"`
	NumTokens         int64    `json:"num_tokens"`
	Blocks            []uint64 `json:"blocks"`
	TokenIDs          []int    `json:"token_ids"` // dump: the session's tokens, where the decoder has them
	Target            string   `json:"target"`    // prepare_receive: where D pushes (passed to dump)
	BytesPushed       int64    `json:"bytes_pushed"`
	InsertedPrefixLen int64    `json:"inserted_prefix_len"`
}

// afterDirect is the active mode's trigger, after a direct append on
// decoder d answered the client through w: when the append completed and
// the session grew by DeltaTokens since its last sync, a sync starts in the
// background.
func (s *Server) afterDirect(w http.ResponseWriter, q *request, d int) {
	if s.cfg.DToP.Mode != DToPActive || q.session == "" {
		return
	}
	completion, ok := completed(w)
	if !ok {
		return
	}
	held := q.tokens + completion
	t := &s.dtop
	t.mu.Lock()
	if held-t.synced[q.session] < s.cfg.DToP.DeltaTokens || t.closed {
		t.mu.Unlock()
		return
	}
	if t.busy[q.session] || t.n >= s.cfg.DToP.MaxInflight {
		t.mu.Unlock()
		s.syncOutcome(&syncOp{session: q.session, start: time.Now()}, "skipped", "entry", "busy")
		return
	}
	t.synced[q.session] = held
	t.busy[q.session] = true
	t.n++
	t.wg.Add(1)
	t.mu.Unlock()
	op := &syncOp{session: q.session, tokens: held, start: time.Now()}
	blocks := q.blocks
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.busy, op.session)
			t.n--
			t.mu.Unlock()
		}()
		var p int
		s.locked(func() {
			p = s.disp.PRouter().Pick(op.session, blocks).Worker // the prefill worker a reseed would take
			if p >= 0 {
				op.pURL = s.cfg.Prefill[p].URL
			}
			op.dURL = s.cfg.Decode[d]
		})
		if p < 0 {
			s.syncOutcome(op, "skipped", "entry", "no-prefill")
			return
		}
		if !s.snapshotOffered(d, p) {
			s.syncOutcome(op, "skipped", "entry", "not-offered")
			return
		}
		s.runSync(t.ctx, op)
	}()
}

// beforeReseed is the passive mode: a seed of a session a decoder held
// before first syncs it from that decoder to the seed's prefill worker p.
func (s *Server) beforeReseed(ctx context.Context, q *request, d *kvc.Dispatch, p int) {
	if s.cfg.DToP.Mode != DToPPassive || q.session == "" {
		return
	}
	op := &syncOp{session: q.session, tokens: q.tokens, start: time.Now()}
	last := -1
	s.locked(func() {
		if last = d.LastDecoder(); last >= 0 {
			op.pURL, op.dURL = s.cfg.Prefill[p].URL, s.cfg.Decode[last]
		}
	})
	if last < 0 {
		return // a first seed: no decoder held the session
	}
	if !s.snapshotOffered(last, p) {
		s.syncOutcome(op, "skipped", "entry", "not-offered")
		return
	}
	t := &s.dtop
	t.mu.Lock()
	busy := t.busy[q.session]
	t.busy[q.session] = true
	t.mu.Unlock()
	if busy {
		s.syncOutcome(op, "skipped", "entry", "busy")
		return
	}
	defer func() {
		t.mu.Lock()
		delete(t.busy, q.session)
		t.mu.Unlock()
	}()
	s.runSync(ctx, op)
}

// runSync runs the three stages and records the outcome.
func (s *Server) runSync(ctx context.Context, op *syncOp) {
	if op.tokens <= 0 {
		s.syncOutcome(op, "skipped", "entry", "zero-target-tokens")
		return
	}
	stage := func(name, u string, body map[string]any, timeout time.Duration, took *time.Duration) (snapshotReply, string) {
		var out snapshotReply
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		t0 := time.Now()
		status, err := s.postJSON(sctx, u+"/_snapshot/"+name, body, &out)
		*took = time.Since(t0)
		switch {
		case err != nil && ctx.Err() != nil:
			return out, "cancelled" // the gateway closed, or a passive sync's client left
		case err != nil && name == "dump":
			return out, "transfer-failed" // no answer: the KV did not land
		case err != nil:
			return out, "unreachable"
		case status != http.StatusOK:
			return out, fmt.Sprintf("http-%d", status)
		}
		return out, ""
	}
	c := s.cfg.DToP
	prep, why := stage("prepare_receive", op.pURL, map[string]any{"session_id": op.session, "num_tokens": op.tokens}, c.Timeout, &op.prepare)
	if why == "" && !prep.OK {
		why = prep.Reason
	}
	if why != "" {
		s.syncOutcome(op, "failed", "prepare", why)
		return
	}
	dumpBody := map[string]any{"session_id": op.session}
	if prep.Target != "" {
		dumpBody["target"] = prep.Target // docs/worker-protocol.md: the dump names its target
	}
	dump, why := stage("dump", op.dURL, dumpBody, c.DumpTimeout, &op.dump)
	op.dumped, op.bytesPushed = dump.NumTokens, dump.BytesPushed
	switch {
	case why != "":
		s.releaseSnapshot(ctx, op)
		s.syncOutcome(op, "failed", "dump", why)
		return
	case !dump.OK && dump.Reason == "session-not-resident":
		s.releaseSnapshot(ctx, op)
		s.syncOutcome(op, "skipped", "dump", dump.Reason)
		return
	case !dump.OK:
		s.releaseSnapshot(ctx, op)
		s.syncOutcome(op, "failed", "dump", dump.Reason)
		return
	case len(dump.Blocks) == 0 && len(dump.TokenIDs) == 0:
		s.releaseSnapshot(ctx, op)
		s.syncOutcome(op, "skipped", "dump", "zero-target-tokens")
		return
	}
	finBody := map[string]any{"session_id": op.session, "blocks": dump.Blocks}
	if len(dump.TokenIDs) > 0 {
		finBody = map[string]any{"session_id": op.session, "token_ids": dump.TokenIDs}
	}
	fin, why := stage("finalize_ingest", op.pURL, finBody, c.Timeout, &op.finalize)
	op.inserted = fin.InsertedPrefixLen
	switch {
	case why != "":
		s.releaseSnapshot(ctx, op) // no answer: P may not have ingested it
		s.syncOutcome(op, "failed", "finalize", why)
	case fin.OK:
		s.syncOutcome(op, "ok", "finalize", "")
	case fin.Reason == "stale":
		s.syncOutcome(op, "skipped", "finalize", fin.Reason)
	default:
		s.syncOutcome(op, "failed", "finalize", fin.Reason)
	}
}

// releaseSnapshot gives back the space P reserved for a sync that will not
// ingest (the emulated worker's /_snapshot/release; a P without it answers
// 404, and the reservation lives until the session's next
// prepare_receive, as the seed's did). It runs even when the sync's context
// ended (Close, a passive sync's client gone), then within a second so that
// Close is not held up, else within the RPC timeout.
func (s *Server) releaseSnapshot(ctx context.Context, op *syncOp) {
	timeout := s.cfg.DToP.Timeout
	if ctx.Err() != nil {
		timeout = min(timeout, time.Second)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var out snapshotReply
	status, err := s.postJSON(rctx, op.pURL+"/_snapshot/release", map[string]any{"session_id": op.session}, &out)
	s.log.Debug("d-to-p-sync release", "session", op.session, "to", op.pURL, "status", status, "ok", out.OK, "reason", out.Reason, "err", err)
}

// syncOutcome counts and logs a sync's end.
func (s *Server) syncOutcome(op *syncOp, event, stage, reason string) {
	key := event + ": " + stage
	if event != "ok" {
		key += ": " + reasonLabel(reason)
	}
	s.met.dpSync.WithLabelValues(key).Inc()
	s.log.Debug("d-to-p-sync", "event", event, "stage", stage, "reason", reason, "session", op.session,
		"from", op.dURL, "to", op.pURL, "reserved_tokens", op.tokens, "kv_committed_len", op.dumped, "bytes_pushed", op.bytesPushed,
		"inserted_prefix_len", op.inserted, "prepare_ms", ms(op.prepare), "dump_ms", ms(op.dump),
		"finalize_ms", ms(op.finalize), "total_ms", ms(time.Since(op.start)))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// completed reads the answer that went out through w (the request's
// recorder, metrics.go).
func completed(w http.ResponseWriter) (int, bool) {
	if r, ok := w.(*recorder); ok {
		return r.completed()
	}
	return 0, false
}

// snapshotOffered reports whether decoder d answers /_snapshot/dump and
// prefill worker p the ingest RPCs, as discovery last learnt them (unknown
// counts as offered): a sync between stock SGLang workers is skipped
// (not-offered), not tried and failed.
func (s *Server) snapshotOffered(d, p int) (ok bool) {
	s.locked(func() {
		ok = s.capsOf(roleDecode, d).SnapshotDump != absent && s.capsOf(rolePrefill, p).SnapshotSink != absent
	})
	return ok
}
