// Package engine models one SGLang worker: its KV pool, radix prefix cache,
// and continuous-batching scheduler with chunked prefill. It has no clock of
// its own: the owner (the simulator's virtual clock, or an emulated worker's
// wall clock) tells it the time on every call and asks when it next needs
// attention, so the same model runs in both worlds.
//
// Memory policy: a request is admitted only when the pool can hold its
// uncached prompt and every output token it will generate (evicting
// unreferenced prefix-cache leaves if needed). Requests that do not fit wait
// in FIFO order and each wait is counted; decode therefore never runs out of
// KV and nothing is retracted. A request larger than the whole pool is
// refused at submission with ErrTooLarge.
package engine

import (
	"errors"
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// Role is a worker's place in the deployment.
type Role uint8

const (
	RoleColocated Role = iota
	RolePrefill
	RoleDecode
)

func (r Role) String() string {
	switch r {
	case RolePrefill:
		return "prefill"
	case RoleDecode:
		return "decode"
	}
	return "colocated"
}

// Config sets one worker up.
type Config struct {
	Name        string
	Role        Role
	Profile     *model.Profile
	BlockSize   int   // tokens per hash id of the trace being served
	PoolTokens  int64 // KV pool size; 0 means the profile's pool at its memory fraction
	ChunkTokens int   // chunked-prefill token budget per step (SGLang --chunked-prefill-size)
	MaxRunning  int   // max admitted requests (SGLang --max-running-requests)
	// PrefixCache keeps prompt KV in a radix cache after a request is done.
	// Naive-PD decode workers run without one (SGLang's PD decode default).
	PrefixCache bool
	// MixedChunk lets the decode batch ride along in prefill steps instead of
	// waiting for them (SGLang --enable-mixed-chunk).
	MixedChunk bool
	// PrefillBackup keeps a seed's prompt pinned on a prefill worker for its
	// session after the transfer (the seed's capacity-backup; backup.go).
	PrefillBackup bool
	// SessionOutputOnly keeps a finished turn's output KV only for a
	// session kept here (KeepSession), as in the seed's trace replays: the
	// model's generated tokens never matched the trace's next prompt, so a
	// plain prefix cache (DP, naive PD) re-prefilled every output, while a
	// streaming session appended on its own output whatever it was
	// (output.go).
	SessionOutputOnly bool
	// PriorityEviction evicts the prefix-cache KV of LowPriority requests
	// before any other (LRU within each class; priority.go).
	PriorityEviction bool
	// Session makes a decode worker session-aware (session.go): it keeps
	// sessions' KV between turns and takes direct appends.
	Session SessionConfig
	// DecodeRadix gives a decode worker SGLang's decode radix cache
	// (radixdecode.go): it keeps what it received and generated in a prefix
	// cache, LRU-evicted, and reserves and receives only what the cache
	// lacks. LocalPrefill also lets it prefill requests itself, interleaved
	// with its decode batch (the peers' "local prefill on D").
	DecodeRadix  bool
	LocalPrefill bool
	// ShortestFirst admits waiting requests fewest uncached prompt tokens
	// first instead of in arrival order; a request waiting longer than
	// MaxWaitS seconds goes first, in arrival order (0 = no such bound).
	// KVC v3's workers (order.go).
	ShortestFirst bool
	MaxWaitS      float64
	// PrefillBypassTokens: on a prefill worker, a step that continues a
	// long chunked prefill also takes waiting requests whose uncached
	// prompt fits in this many tokens, as a session-aware decoder's
	// SessionConfig.BypassTokens does (pbypass.go; 0 = none).
	PrefillBypassTokens int
	// PrefillBypassAhead: with PrefillBypassTokens, those requests run in
	// a step of their own before the long prompt's next chunk, not in it
	// (pbypass.go).
	PrefillBypassAhead bool
	// HiCache gives the worker a host-memory KV tier below its prefix
	// cache (SGLang --enable-hierarchical-cache; hicache.go).
	HiCache HiCacheConfig
	// SliceTPOTS holds every decoding request to this TPOT in seconds
	// while the worker prefills: chunks are sized to the smallest stall
	// budget in the batch, and the worker decodes when none fits
	// (slice.go; KVC v4). 0 = off (SGLang's prefill-first order).
	SliceTPOTS float64
	// Gaps, when set, receives every inter-token gap of the requests this
	// worker decodes (itl.go); several workers may share one.
	Gaps *metrics.GapHistogram
}

// ErrTooLarge means a request can never fit in the worker's KV pool.
var ErrTooLarge = errors.New("request needs more KV than the whole pool holds")

// Stats counts what a worker did over its life.
type Stats struct {
	PrefillSteps  int64
	DecodeSteps   int64
	PrefillTokens int64 // tokens computed in prefill
	CachedTokens  int64 // prompt tokens served from the prefix cache
	KVWaits       int64 // requests that had to wait for KV space (each counted once)
	EvictedTokens int64
	// SessionEvictions counts sessions a session-aware cache evicted;
	// StallS is the scheduler time lost to their trims.
	SessionEvictions int64
	// TailTrims counts trims that cut a session's tail and left it
	// pinned on the rest (SessionConfig.TrimTail).
	TailTrims int64
	StallS    float64
	BusyS     float64
	// The host KV tier (hicache.go): prompt tokens loaded back from host
	// instead of computed, in how many steps' loads and what those loads
	// took on the link; tokens written to host, host writes skipped for
	// want of room, and tokens the host pool evicted.
	HostLoadedTokens  int64
	HostLoads         int64
	HostLoadS         float64
	HostWrittenTokens int64
	HostWriteSkips    int64
	HostEvictedTokens int64
	// The storage tier (storage.go): prefetches into host and their
	// tokens, the seconds prefill steps waited for them, tokens written
	// to storage, writes skipped, tokens its LRU evicted.
	StoragePrefetches       int64
	StoragePrefetchedTokens int64
	StorageWaitS            float64
	StorageWrittenTokens    int64
	StorageWriteSkips       int64
	StorageEvictedTokens    int64
	// Preemptions counts running requests preempted by recompute (vLLM's
	// scheduler, vllm.go).
	Preemptions int64
}

// Worker is one engine instance.
type Worker struct {
	cfg      Config
	tm       model.Timing
	mdl      model.Model
	tree     *radix.Tree
	capacity int64
	own      int64 // tokens held by requests outside the tree
	reserved int64 // output tokens promised to admitted requests, not yet generated
	// windowFreed is the pool tokens running requests' sliding layers
	// have freed behind their windows past their paths in the prefix
	// cache (vLLM, windowfree.go): windowTok sliding-layer tokens. The
	// cache's nodes keep the rest (windowshare.go).
	windowFreed   int64
	windowTok     int64
	windowTailTok int64 // of windowTok, the output tails' (output.go)
	// swaCap and swaUsed are SGLang's sliding-window pool and what
	// running requests hold of it (swapool.go); 0, 0 without one.
	swaCap, swaUsed int64
	swaTailTok      int64 // the output tails' sliding slots (swapool.go)

	waiting  queue // prefill admission queue (Full, PrefillOnly)
	prealloc queue // decode reservation queue (DecodeOnly)
	chunked  *Request
	aheadRan bool // the last step was the short class's, ahead of chunked (pbypass.go)
	decoding []*Request
	joining  []*Request
	admitted int // requests counted against MaxRunning
	// transferring counts DecodeOnly requests with KV reserved whose
	// transfer has not landed (SGLang's decode transfer queue).
	transferring int

	busy      bool
	stepStart float64
	stepEnd   float64
	plan      stepPlan
	blocked   bool // the queue head could not be admitted at the last plan
	// parked are requests waiting for their storage prefetch outside the
	// queue; parkWait: the step in progress is an idle wait for the first
	// of them (storagepark.go).
	parked   []*Request
	parkWait bool

	// Output tails (output.go): finished turns' output KV awaiting the
	// session's next turn, in finish order for eviction.
	tails      idtable.Keyed[*outputTail]
	tailOrder  []*outputTail
	tailHead   int
	tailTokens int64
	pinnedTail int64 // tail tokens of pinned sessions (not evictable)

	dsess      idtable.Keyed[*dSession] // session.go
	nPinned    int                      // session.go: the pinned ones among dsess
	trimOrder  trimOrder                // trimorder.go: pinned sessions, least recently used first
	trimAside  []trimEntry              // trimorder.go: reused by each trim
	schedWork  uint64                   // order.go: Work's count outside the order and the tree
	order      waitOrder                // order.go: uncached counts and shortest-first order
	aside      []*Request               // order.go: reused by each shortest-first bypass
	nResident  int                      // session.go: the sessions among dsess that count against the cap
	backups    []backup                 // backup.go, oldest first
	dumps      []dumpHold               // dump.go: paths held for on-evict dumps
	dumping    int64                    // their tokens
	stallUntil float64                  // trims stall the scheduler loop until then (session.go)
	host       *hostTier                // hicache.go: the host KV tier, nil without one
	sliceRoomS float64                  // slice.go: prefill work the next step may still take
	attn       attnScratch              // attntail.go: the tile-schedule tail's buffers
	gapLog     gapLog                   // itl.go: the decode runs live requests' folded gaps came from
	bat        batchClock               // batchclock.go: the decode batch credited by a clock

	events []Event
	stats  Stats
}

type chunk struct {
	req  *Request
	n, p int
}

// stepPlan is the work between two scheduling decisions: either one prefill
// step (with the decode batch riding along when mixed) or a run of k decode
// steps over a fixed batch, advanced arithmetically.
type stepPlan struct {
	chunks  []chunk
	decodeK int
	batch   int
	ctx     int64   // context tokens of the batch at the run's start
	base    float64 // cost of the run's first step
	slope   float64 // growth of the step cost per step (context grows by batch)
}

// New makes a worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Profile == nil {
		return nil, errors.New("engine: no profile")
	}
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("engine %s: block size %d, expected > 0", cfg.Name, cfg.BlockSize)
	}
	if cfg.ChunkTokens <= 0 {
		cfg.ChunkTokens = 8192
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 128
	}
	if cfg.PoolTokens <= 0 {
		cfg.PoolTokens = cfg.Profile.KVPoolTokens(0)
	}
	w := &Worker{cfg: cfg, tm: cfg.Profile.Timing, mdl: cfg.Profile.Model, capacity: cfg.PoolTokens}
	w.swaCap = swaCapacity(w)
	if cfg.PrefixCache || cfg.Session.Enabled || cfg.DecodeRadix {
		w.tree = radix.New(cfg.BlockSize)
		w.windowInit()
	}
	w.initOrder()
	w.bat.on = w.batchOn()
	if cfg.HiCache.Enabled && w.tree != nil {
		h, err := newHostTier(cfg, w.capacity)
		if err != nil {
			return nil, err
		}
		w.host = h
	}
	return w, nil
}

// StalledUntil is when the scheduler loop is free of the trims that stall
// it: KV transfers landing on this worker are handled no earlier (the
// seed's trims blocked mooncake's completion handling, F6).
func (w *Worker) StalledUntil() float64 { return w.stallUntil }

// Name is the worker's name.
func (w *Worker) Name() string { return w.cfg.Name }

// Role is the worker's role.
func (w *Worker) Role() Role { return w.cfg.Role }

// Capacity is the KV pool size in tokens.
func (w *Worker) Capacity() int64 { return w.capacity }

// Used is the number of KV tokens in use: requests' own tokens plus the
// prefix cache, less what sliding layers freed behind their windows.
func (w *Worker) Used() int64 {
	if w.tree != nil {
		return w.own + w.tree.Tokens() + w.tailTokens - w.windowFreedNow()
	}
	return w.own - w.windowFreed
}

// Reserved is the number of output tokens promised to admitted requests.
func (w *Worker) Reserved() int64 { return w.reserved }

// CachedTokens is the number of tokens held only by the prefix cache
// (evictable).
func (w *Worker) CachedTokens() int64 {
	if w.tree == nil {
		return 0
	}
	return w.evictable()
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats { return w.stats }

// Running is the number of requests counted against MaxRunning.
func (w *Worker) Running() int { return w.admitted }

// Queued is the number of requests waiting for admission or reservation.
func (w *Worker) Queued() int { return w.waiting.len() + w.prealloc.len() + len(w.parked) }

// Transferring is the DecodeOnly requests whose KV is reserved here and
// still on its way (SGLang's decode transfer queue).
func (w *Worker) Transferring() int { return w.transferring }

// Sample is the worker's occupancy for the structural log.
func (w *Worker) Sample(now float64) metrics.WorkerSample {
	// Tokens of a decode run are credited when the run ends; at a sample
	// taken inside the run, count the steps already done as used KV.
	var inRun int64
	w.settleBatch()
	if w.busy && w.plan.decodeK > 0 && now > w.stepStart {
		steps := w.stepsWithin(now - w.stepStart)
		for _, r := range w.decoding {
			if r.Stage == StageDecoding {
				inRun += int64(min(steps, max(r.Output, 1)-r.generated))
			}
		}
	}
	return metrics.WorkerSample{
		TimeS: now, Worker: w.cfg.Name, Role: w.cfg.Role.String(),
		KVUsedTokens: w.Used() + inRun, KVReservedTokens: w.reserved - inRun,
		KVCachedTokens: w.CachedTokens(), KVCapacityTokens: w.capacity,
		Running: w.admitted, Queued: w.Queued(),
	}
}

// PrefixMatch reports how many prompt tokens this worker's cache holds for
// blocks, without touching LRU order (what a KV-aware router could ask).
func (w *Worker) PrefixMatch(blocks []uint64, input int) int {
	if w.tree == nil || len(blocks) == 0 {
		return 0
	}
	m := w.tree.Match(blocks, w.lastBlockTokens(input, len(blocks)))
	return int(m.Tokens)
}

// NextTime is when the worker next needs Advance; ok is false when idle.
func (w *Worker) NextTime() (t float64, ok bool) { return w.stepEnd, w.busy }

// Submit queues a Full or PrefillOnly request for prefill.
func (w *Worker) Submit(now float64, r *Request) error {
	if err := w.Admissible(r); err != nil {
		return err
	}
	if w.tree != nil && r.Session != "" {
		w.nameOutput(now, r)
	}
	w.sessionStart(now, r)
	r.Stage, r.SubmittedAt = StageWaiting, now
	w.enqueue(r)
	if w.busy && w.blocked && w.waiting.len() > 1 && !w.cfg.ShortestFirst {
		// In arrival order the stuck head goes first: r cannot be admitted
		// before it. Shortest first r may be (it can be the shorter), so
		// it wakes the worker like any arrival.
		return nil
	}
	w.wake(now)
	return nil
}

// Admissible reports whether Submit would take r, without queuing it: an
// owner that must order work across workers (PD reserves on D before P sees
// the request) asks first so that a refusal changes nothing.
func (w *Worker) Admissible(r *Request) error {
	if r.Kind == DecodeOnly {
		return errors.New("engine: Submit of a DecodeOnly request; use Reserve")
	}
	if w.cfg.Role == RoleDecode && !w.cfg.Session.Enabled && !w.cfg.LocalPrefill {
		return fmt.Errorf("engine %s: decode worker cannot prefill", w.cfg.Name)
	}
	if r.Input < 1 {
		return fmt.Errorf("engine: request %d has %d prompt tokens, expected ≥ 1", r.ID, r.Input)
	}
	// With a prefix cache the footprint can be one token more than the
	// prompt: a fully cached prompt stays locked in the tree while its last
	// token is recomputed.
	need := int64(r.Input) + int64(w.outputOf(r))
	if w.tree != nil {
		need++
	}
	if w.windowPeak(need, 0) > w.capacity {
		return fmt.Errorf("%w (%d tokens, pool %d)", ErrTooLarge, need, w.capacity)
	}
	return nil
}

// Reserve queues a DecodeOnly request for a KV reservation of its whole
// prompt plus its output. EvReserved tells when it is granted.
func (w *Worker) Reserve(now float64, r *Request) error {
	if r.Kind != DecodeOnly {
		return errors.New("engine: Reserve of a request that is not DecodeOnly")
	}
	if need := int64(r.Input) + int64(max(r.Output, 1)); need > w.capacity {
		return fmt.Errorf("%w (%d tokens, pool %d)", ErrTooLarge, need, w.capacity)
	}
	w.sessionStart(now, r)
	if w.cfg.DecodeRadix && r.Session != "" {
		w.nameOutput(now, r) // the session's last output is part of this prompt
	}
	r.Stage, r.SubmittedAt = StageWaiting, now
	w.prealloc.push(r)
	w.grantReservations(now)
	return nil
}

// StartDecode puts a reserved request (its KV has arrived) into the decode
// batch at the next step boundary.
func (w *Worker) StartDecode(now float64, r *Request) error {
	if r.Stage != StageReserved {
		return fmt.Errorf("engine: StartDecode of request %d in stage %d", r.ID, r.Stage)
	}
	r.Stage, r.DecodeStartAt = StageDecoding, now
	w.transferring--
	w.joining = append(w.joining, r)
	w.wake(now)
	return nil
}

// Release frees the KV a PrefillOnly request held for its transfer; the
// prompt stays in the prefix cache, unreferenced.
func (w *Worker) Release(now float64, r *Request) error {
	if r.Stage != StageHeld {
		return fmt.Errorf("engine: Release of request %d in stage %d", r.ID, r.Stage)
	}
	w.keepBackup(now, r)
	w.freeRequest(now, r)
	r.Stage, r.FinishedAt = StageDone, now
	w.grantReservations(now)
	w.wake(now)
	return nil
}

// Abort drops a request wherever it is. KV it holds is freed now; if it is
// part of the step in progress, the step still completes as planned (the
// GPU cannot take back work it started) and the request is skipped after.
func (w *Worker) Abort(now float64, r *Request) {
	switch r.Stage {
	case StageDone, StageAborted, StageNew:
		return
	case StageWaiting:
		w.dequeue(r)
		w.prealloc.remove(r)
		if r.isParked() {
			w.unparkAborted(r)
		}
	case StageHeld:
		// prefillDone already stopped counting it as running
	case StageReserved:
		w.admitted--
		w.transferring--
	case StagePrefill, StageDecoding:
		w.leaveBatch(r)
		w.creditRun(now, r)
		w.admitted--
		if w.chunked == r {
			w.chunked = nil
		}
		w.decoding = removeReq(w.decoding, r)
		w.joining = removeReq(w.joining, r)
	}
	w.freeRequest(now, r)
	w.unfoldGaps(r) // ITL counts completed requests only (itl.go)
	if r.sessCounted {
		r.sessCounted = false
		if s := w.sess(r.sessKey()); s != nil {
			was := s.resident()
			s.inflight--
			w.residentChanged(s, was)
		}
	}
	r.Stage = StageAborted
	w.grantReservations(now)
	w.wake(now)
}

// creditRun credits r with the tokens of the decode steps of the run in
// progress that ended by now (a run's tokens are otherwise credited when it
// ends), so a request cut short reports what it really generated.
func (w *Worker) creditRun(now float64, r *Request) {
	if !w.busy || w.plan.decodeK <= 0 || r.Stage != StageDecoding || now <= w.stepStart {
		return
	}
	for _, x := range w.decoding {
		if x == r {
			w.generate(r, w.stepsWithin(now-w.stepStart))
			return
		}
	}
}

// GeneratedBy is the number of tokens r has generated by now, counting the
// steps of a decode run in progress.
func (w *Worker) GeneratedBy(now float64, r *Request) int {
	w.settle(r)
	n := r.generated
	if w.busy && w.plan.decodeK > 0 && r.Stage == StageDecoding && now > w.stepStart {
		for _, x := range w.decoding {
			if x == r {
				n += w.stepsWithin(now - w.stepStart)
				break
			}
		}
	}
	return min(n, max(r.Output, 1))
}

func removeReq(rs []*Request, r *Request) []*Request {
	for i, x := range rs {
		if x == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

func (w *Worker) outputOf(r *Request) int {
	if r.Kind == PrefillOnly {
		return 0
	}
	return max(r.Output, 1)
}

func (w *Worker) lastBlockTokens(input, nblocks int) int64 {
	bs := w.cfg.BlockSize
	last := input - (nblocks-1)*bs
	if last <= 0 || last > bs {
		return int64(bs)
	}
	return int64(last)
}

// TakeEvents returns the events produced since the last call. The slice is
// reused by the worker: consume it before calling the worker again.
func (w *Worker) TakeEvents() []Event {
	ev := w.events
	w.events = w.events[:0]
	return ev
}
