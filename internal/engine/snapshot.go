package engine

// The prefill worker's side of D→P snapshot sync (DESIGN §5; the seed's
// SNAPSHOT_STORE_REFACTOR): a bounded snapshot buffer that a decoder's dump
// of a session's KV lands in before P files it in its prefix cache.
//
// It lives here, with the worker, and not with whoever moves the bytes,
// because both owners of a prefill worker need the same answers: the
// simulator, which runs the dump on a contended link in virtual time
// (internal/sim/dtop.go), and the emulated worker, which serves the
// /_snapshot/* RPCs on the wall clock (internal/emulator/snapshot.go). The
// store decides; its owner times and transports.
//
// The buffer is separate from the KV pool, as the seed's dedicated GPU
// snapshot_buf was: the seed first took the slots from P's own pool at
// prepare_receive, which P's prefill work kept full (88 % of prepares
// failed, seed-inventory §4), so space is reserved in the buffer at
// prepare_receive and taken from the pool only at finalize_ingest, when the
// KV is copied into the radix cache and the buffer space is given back.
//
//   - PrepareReceive reserves a snapshot's bytes, or refuses with
//     snapshot-buf-full (and the tokens still available);
//   - SeeTurn tells the store a later turn of a session was routed: a
//     snapshot of it still in flight whose whole blocks that turn's prompt
//     does not extend (the session was rewritten, compacted say) is stale;
//   - FinalizeIngest gives the buffer space back and files the blocks in the
//     worker's radix cache, keyed by block hashes as the cache is, unless
//     the snapshot went stale (stale) or the pool cannot make room for it
//     (kvpool-alloc-failed-at-ingest);
//   - Release gives the space of a snapshot whose dump failed back.
//
// Bytes held are always within [0, the buffer's capacity] and go back to 0
// once every reservation was finalized or released. Like the worker the
// store has no clock: it is told the time.

import "fmt"

// Outcomes of the snapshot store, as the seed's handlers named them.
const (
	ReasonSnapshotBufFull = "snapshot-buf-full"
	ReasonStale           = "stale"
	ReasonIngestAlloc     = "kvpool-alloc-failed-at-ingest"
	ReasonZeroTokens      = "zero-tokens"       // prepare_receive of nothing
	ReasonNoPendingIngest = "no-pending-ingest" // finalize_ingest of no reservation
)

// DefaultSnapshotBufBytes is the seed's SGLANG_SNAPSHOT_LINK_BUF_BYTES.
const DefaultSnapshotBufBytes int64 = 8 << 30

// SnapshotID names one reservation in a store.
type SnapshotID uint64

// SnapshotStore is one prefill worker's snapshot buffer. It outlives the
// worker's cache (an emulated worker's /flush_cache makes a new Worker; the
// buffer is not the cache), so FinalizeIngest is told which worker to file
// a snapshot in.
type SnapshotStore struct {
	capBytes   int64
	tokenBytes int64
	blockSize  int64
	held       int64 // bytes reserved by snapshots in flight
	next       SnapshotID
	live       map[SnapshotID]*pendingSnapshot
	bySession  map[string][]*pendingSnapshot
}

// pendingSnapshot is a reservation: a snapshot between prepare_receive and
// finalize_ingest (or its release).
type pendingSnapshot struct {
	id      SnapshotID
	session string
	tokens  int64
	bytes   int64
	// seen: a later turn of the session was routed while it was in
	// flight; the prompts of all such turns share prompt[:common], and the
	// snapshot is stale unless its whole blocks are a prefix of that.
	seen   bool
	prompt []uint64
	common int
}

// NewSnapshotStore makes a snapshot buffer of capBytes bytes (≤ 0: the
// seed's 8 GiB) for worker w: a token of snapshot KV takes w's model's KV
// bytes per token, a block w's block size.
func NewSnapshotStore(w *Worker, capBytes int64) *SnapshotStore {
	if capBytes <= 0 {
		capBytes = DefaultSnapshotBufBytes
	}
	return &SnapshotStore{capBytes: capBytes, tokenBytes: max(w.mdl.KVBytesPerToken(), 1), blockSize: int64(max(w.cfg.BlockSize, 1)),
		live: map[SnapshotID]*pendingSnapshot{}, bySession: map[string][]*pendingSnapshot{}}
}

// Prepared answers PrepareReceive.
type Prepared struct {
	ID              SnapshotID
	OK              bool
	Reason          string // a refusal's: snapshot-buf-full, zero-tokens
	Bytes           int64  // reserved
	AvailableTokens int64  // snapshot-buf-full: what the buffer could still take
}

// PrepareReceive reserves room for tokens of session's KV: the buffer takes
// a snapshot whole or not at all.
func (s *SnapshotStore) PrepareReceive(session string, tokens int64) Prepared {
	if tokens <= 0 {
		return Prepared{Reason: ReasonZeroTokens}
	}
	avail := s.AvailableTokens()
	if tokens > avail {
		return Prepared{Reason: ReasonSnapshotBufFull, AvailableTokens: avail}
	}
	s.next++
	p := &pendingSnapshot{id: s.next, session: session, tokens: tokens, bytes: tokens * s.tokenBytes}
	s.held += p.bytes
	s.live[p.id] = p
	s.bySession[session] = append(s.bySession[session], p)
	return Prepared{ID: p.id, OK: true, Bytes: p.bytes}
}

// SeeTurn notes that a turn of session whose prompt is blocks was routed:
// the snapshots of the session in flight now must be extended by it. The
// store keeps only what every such prompt shares (a copy), so its memory
// stays one prompt per snapshot in flight.
func (s *SnapshotStore) SeeTurn(session string, blocks []uint64) {
	for _, p := range s.bySession[session] {
		if !p.seen {
			p.seen, p.prompt, p.common = true, append([]uint64(nil), blocks...), len(blocks)
			continue
		}
		n := min(p.common, len(blocks))
		i := 0
		for i < n && p.prompt[i] == blocks[i] {
			i++
		}
		p.common = i
	}
}

// stale: a turn seen while p was in flight does not extend the snapshot's
// whole blocks (the last block may be partial, its hash not the full
// block's).
func (p *pendingSnapshot) stale(blocks []uint64) bool {
	if !p.seen {
		return false
	}
	n := max(len(blocks)-1, 0)
	if n > p.common {
		return true
	}
	for i := 0; i < n; i++ {
		if blocks[i] != p.prompt[i] {
			return true
		}
	}
	return false
}

// Ingested answers FinalizeIngest.
type Ingested struct {
	OK     bool
	Reason string // stale, kvpool-alloc-failed-at-ingest, no-pending-ingest
	// Bytes the snapshot held in the buffer (given back now); Tokens its
	// reservation; Inserted the tokens the radix cache did not have.
	Bytes    int64
	Tokens   int64
	Inserted int64
}

// FinalizeIngest ends reservation id: it gives the buffer space back and,
// unless the snapshot is stale, files blocks (the dump's: the session's KV
// keyed by block hashes) in w's radix cache, unlocked, so the session's
// next prefill there hits it. The buffer held only the tokens reserved, so
// blocks beyond them are neither filed nor checked.
func (s *SnapshotStore) FinalizeIngest(now float64, w *Worker, id SnapshotID, blocks []uint64) Ingested {
	p := s.drop(id)
	if p == nil {
		return Ingested{Reason: ReasonNoPendingIngest}
	}
	out := Ingested{Bytes: p.bytes, Tokens: p.tokens}
	if n := (p.tokens + s.blockSize - 1) / s.blockSize; int64(len(blocks)) > n {
		blocks = blocks[:n]
	}
	if p.stale(blocks) {
		out.Reason = ReasonStale
		return out
	}
	added, ok := w.IngestSnapshot(now, blocks, p.tokens)
	if !ok {
		out.Reason = ReasonIngestAlloc
		return out
	}
	out.OK, out.Inserted = true, added
	return out
}

// Release gives back the space of reservation id, whose dump failed or was
// dropped; it reports whether id was in flight.
func (s *SnapshotStore) Release(id SnapshotID) bool { return s.drop(id) != nil }

func (s *SnapshotStore) drop(id SnapshotID) *pendingSnapshot {
	p := s.live[id]
	if p == nil {
		return nil
	}
	delete(s.live, id)
	s.held -= p.bytes
	if s.held < 0 {
		panic(fmt.Sprintf("engine: a snapshot buffer holds %d bytes", s.held))
	}
	ps := s.bySession[p.session]
	kept := ps[:0]
	for _, o := range ps {
		if o != p {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		delete(s.bySession, p.session)
	} else {
		s.bySession[p.session] = kept
	}
	return p
}

// HeldBytes is the buffer space reserved by snapshots in flight.
func (s *SnapshotStore) HeldBytes() int64 { return s.held }

// CapBytes is the buffer's size.
func (s *SnapshotStore) CapBytes() int64 { return s.capBytes }

// AvailableTokens is the tokens of KV the buffer could still take.
func (s *SnapshotStore) AvailableTokens() int64 { return (s.capBytes - s.held) / s.tokenBytes }

// Pending is the number of snapshots in flight.
func (s *SnapshotStore) Pending() int { return len(s.live) }

// PendingFor is the number of session's snapshots in flight.
func (s *SnapshotStore) PendingFor(session string) int { return len(s.bySession[session]) }
