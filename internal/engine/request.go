package engine

import "github.com/pdhybrid/pdhybrid/internal/radix"

// promptMemo is a request's last prefix-cache match and the cache,
// version and blocks it was taken for (Worker.promptMatch).
type promptMemo struct {
	tree   *radix.Tree
	ver    uint64
	blocks *uint64 // &Blocks[0]: a Request given other blocks matches anew
	// The block and token counts it was taken for, in one word: a word
	// more would move the simulator's record to a larger size class. A
	// count too large for 32 bits never compares equal, so it matches anew.
	n     int32
	input int32
	m     radix.Match
}

// Kind says what a worker does with a request.
type Kind uint8

const (
	// Full prefills and decodes on the same worker (colocated serving).
	Full Kind = iota
	// PrefillOnly prefills and then holds the KV until the owner calls
	// Release (after the transfer to a decode worker finished).
	PrefillOnly
	// DecodeOnly reserves KV for a prompt computed elsewhere (Reserve), waits
	// for the transfer, and decodes (StartDecode). As in SGLang's PD, the
	// prefill worker sampled the first token and sent it with the KV: the
	// decode worker emits it when the request joins its batch, without a
	// forward of its own, and generates the rest.
	DecodeOnly
)

// Stage is where a request stands on one worker.
type Stage uint8

const (
	StageNew      Stage = iota
	StageWaiting        // in the prefill queue or the decode reservation queue
	StagePrefill        // admitted, prefill chunks in progress
	StageHeld           // PrefillOnly: prefill done, KV held for the transfer
	StageReserved       // DecodeOnly: KV reserved, transfer not finished
	StageDecoding       // in the decode batch (or about to join it)
	StageDone           // finished or released
	StageAborted
)

// Request is one request as a worker sees it. The owner fills the first
// block of fields after the step state (and Output); the worker fills the
// rest.
type Request struct {
	// The step state: what a decode run reads and writes for every
	// running sequence (Worker.Advance, generate, itl.go), together at the
	// head so that a batch's walk touches one cache line per sequence, not
	// four. A decode run cost one store per token per request in a gap list
	// of its own before (itl.go).
	lastTokenAt float64 // for inter-token gaps
	gapFrom     int64   // the first decode run of its open gap span; 0: none (itl.go)
	generated   int
	Output      int   // tokens to generate here (≥ 1 for Full and DecodeOnly)
	own         int64 // tokens this request holds outside the radix tree
	reservedOut int64 // output tokens still promised to this request
	Stage       Stage

	// The owner's one-byte fields sit in the step state's last word, beside
	// Stage, and the worker's flags and node indices in two words below: a
	// word of its own each padded the Request by 40 bytes (448 → 408, a
	// smaller size class for every request the simulator allocates).
	Kind Kind
	// SharedBlocks promises that Blocks are never written again, so the
	// prefix cache keeps them as its keys instead of copying them
	// (radix.Tree.InsertShared): the simulator's frozen session chains.
	SharedBlocks bool
	// KeepSession asks a session-aware decode worker to keep the request's
	// KV as its session's residency (a KVC seed or direct append; a plain-PD
	// fallback leaves it false).
	KeepSession bool
	// LowPriority marks a prefill whose KV the worker's cache should evict
	// first once the request is done (Config.PriorityEviction): the seed's
	// prefill priority for a session a decoder keeps.
	LowPriority bool

	ID int64
	// Blocks are the prompt's hash ids. They are not copied, and they are
	// read only until the prefill is done (EvPrefillDone, or the first token
	// of a Full request) or, for a DecodeOnly request that keeps its session,
	// until it joins the batch (its EvFirstToken): the caches copy what they
	// keep, so the owner may reuse the storage from then on — unless
	// SharedBlocks says the caches may keep the slice itself.
	Blocks []uint64
	Input  int // prompt tokens
	// Session names the conversation the request belongs to. A worker with a
	// prefix cache keeps a finished Full request's output KV for the
	// session's next turn (see nameOutput); "" keeps none.
	Session string
	// SessionNum is the owner's number for Session, 0 for none: unique
	// for the run (never given to another session), so the worker keys
	// its session records by it instead of hashing Session (the
	// simulator numbers each session where it enters). An owner that
	// numbers a session numbers it in every call that names it.
	SessionNum int64
	Tag        any // the owner's own data

	CachedTokens int // prompt tokens found in this worker's prefix cache
	prefilled    int // uncached prompt tokens computed so far
	recompute    int // output tokens to compute again after a preemption (vllm.go)
	// What only some requests use (requestExtra), nil until then.
	rare        *requestExtra
	swaHold     int64  // what it holds of SGLang's sliding-window pool (swapool.go)
	matched     int    // prompt blocks its cache match covered
	lastWhole   uint64 // id of the prompt's last whole block, kept at prefill end
	node        int32  // deepest radix node this request holds locked
	sessCounted bool   // counted in its session's in-flight requests (session.go)
	locked      bool
	kvWaited    bool // already counted in Stats.KVWaits
	// The host tier (hicache.go): prompt tokens loaded back from host at
	// admission (counted in CachedTokens), the load not yet done, and the
	// host path it holds locked.
	loadPending bool
	hostLocked  bool
	hostNode    int32
	loaded      int
	// Its prompt's cache match, kept between looks, and its place in the
	// waiting order (order.go).
	memo promptMemo
	wait waitState

	// Times on the owner's clock.
	SubmittedAt   float64
	AdmittedAt    float64 // prefill admission, or decode reservation
	PrefillEndAt  float64
	DecodeStartAt float64 // joined the decode batch
	FirstTokenAt  float64
	FinishedAt    float64
	gapSt         gapState // its open gap span's own first gap, and closed spans (itl.go)
	// The decode batch's clock when its step state was last brought up to
	// it, plus one; 0 while not in a batch that runs on the clock
	// (batchclock.go).
	bmark int64
}

// requestExtra is the state of features only some requests use: the
// sliding-window share count (vLLM sliding-window models only) and the
// storage prefetch (the storage tier only). Held behind Request.rare and
// allocated on a request's first non-zero write, it costs every other
// request 8 bytes instead of 72: inline it took the simulator's record
// (sim.req) from the 640-byte size class to the 704-byte one. A nil rare
// reads as all zero.
// sessKey is how the worker files r's session records.
func (r *Request) sessKey() SessionKey { return SessionKey{ID: r.Session, Num: r.SessionNum} }

type requestExtra struct {
	windowFreed  int64 // pool tokens its sliding layers freed behind the window (windowfree.go)
	windowPassed int32 // the last prefix-cache node its window has passed (windowshare.go)
	windowOwn    int64 // freed tokens past its path in the prefix cache, its alone
	// Where in the prompt a storage prefetch (storage.go) began (at its
	// first admission attempt; a retried admission finds part of it on
	// host already).
	prefetchFrom  int
	prefetchBegun bool
	// prefetchDoneAt is when a prefetch booked on a shared pool's
	// aggregate link has all arrived (storageTier.reserve); 0 otherwise.
	prefetchDoneAt float64
	// parkedUntil is when the prefetch of a request set aside for it is
	// done (storagepark.go); 0 while it is not parked.
	parkedUntil float64
}

// more is r's requestExtra, allocated on first use: for writes only
// (reads go through the accessors below, which allocate nothing).
func (r *Request) more() *requestExtra {
	if r.rare == nil {
		r.rare = new(requestExtra)
	}
	return r.rare
}

func (r *Request) windowFreed() int64 {
	if r.rare == nil {
		return 0
	}
	return r.rare.windowFreed
}

func (r *Request) windowPassed() int32 {
	if r.rare == nil {
		return 0
	}
	return r.rare.windowPassed
}

func (r *Request) windowOwn() int64 {
	if r.rare == nil {
		return 0
	}
	return r.rare.windowOwn
}

// setWindowFreed writes v, allocating r.rare only for a non-zero v: most
// writes are resets of requests that never had one.
func (r *Request) setWindowFreed(v int64) {
	if v != 0 || r.rare != nil {
		r.more().windowFreed = v
	}
}

// Uncached is the number of prompt tokens this worker must compute, and
// after a preemption by recompute (vllm.go) the output tokens it computes
// again with them.
func (r *Request) Uncached() int { return r.Input + r.recompute - r.CachedTokens }

// Generated is the number of tokens the request produced, final once it
// finished or was aborted. While it is in a decode batch the batch's clock
// credits its tokens (batchclock.go) and this may lag: read a running
// request's count with Worker.GeneratedBy.
func (r *Request) Generated() int { return r.generated }

// EventKind names what happened to a request.
type EventKind uint8

const (
	EvPrefillDone EventKind = iota // PrefillOnly: all of the prompt's KV is ready to transfer
	EvReserved                     // DecodeOnly: KV space reserved
	EvFirstToken
	EvFinished
	// EvChunkDone: PrefillOnly, a prefill chunk other than the last finished;
	// Event.Tokens prompt tokens now have KV here (the cached prefix
	// included), so the owner can stream them while the next chunk computes.
	EvChunkDone
	// EvSessionEvicted: a session-aware cache evicted Event.Session, freeing
	// Event.Tokens (Req is nil).
	EvSessionEvicted
	// EvStall: the scheduler lost Event.Stall seconds to a trim before its
	// next step (Req is nil).
	EvStall
)

func (k EventKind) String() string {
	switch k {
	case EvPrefillDone:
		return "prefill-done"
	case EvReserved:
		return "reserved"
	case EvFirstToken:
		return "first-token"
	case EvFinished:
		return "finished"
	case EvChunkDone:
		return "chunk-done"
	case EvSessionEvicted:
		return "session-evicted"
	case EvStall:
		return "stall"
	}
	return "unknown"
}

// Event is a notification from a worker to its owner.
type Event struct {
	Kind       EventKind
	Req        *Request
	Time       float64
	Tokens     int      // EvChunkDone and EvPrefillDone: prompt tokens with KV ready on this worker; EvSessionEvicted: tokens freed
	Session    string   // EvSessionEvicted
	SessionNum int64    // EvSessionEvicted: the owner's number for Session (Request.SessionNum)
	Blocks     []uint64 // EvSessionEvicted with SessionConfig.ReportPaths: the session's blocks (a new slice)
	Stall      float64  // EvStall: seconds
	// Demoted (EvSessionEvicted): the worker's host tier holds the KV HBM
	// freed, so the session's next turn can still append here, loading it
	// back (hicache.go); a router keeps believing the session is here.
	Demoted bool
	// Stored (EvSessionEvicted, not Demoted): the host tier could not keep
	// the KV HBM freed but the storage pool below holds it (storage.go):
	// the next turn can still append here, prefetching it first.
	Stored bool
	// Hot (EvSessionEvicted): the session had a request admitted or queued
	// on this worker when it was evicted; only TrimAny evicts such a
	// session (TrimIdle, the seed's, evicts idle ones only).
	Hot bool
}
