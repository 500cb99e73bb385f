// Package kvc is the control plane's routing state: which worker a request
// goes to, under which policy, and what the router believes each worker
// caches. It knows nothing of clocks or engines: the simulator and the live
// gateway feed it the same calls (Pick, Dispatched, Done), so one routing
// implementation runs in both.
package kvc

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// Policy chooses among candidate workers.
type Policy string

const (
	// PolicyDefault is round-robin.
	PolicyDefault Policy = "default"
	// PolicySticky sends turn 2+ of a session to the worker its previous turn
	// used; first turns go round-robin.
	PolicySticky Policy = "sticky"
	// PolicyKVAware is Algorithm 1 without the KVC extras: the highest
	// (overlap + α·sticky + floor bonus, sticky, −inflight, −assigned).
	PolicyKVAware Policy = "kv-aware"
)

// ParsePolicy checks a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyDefault, PolicySticky, PolicyKVAware, PolicyCacheAware:
		return p, nil
	}
	return "", fmt.Errorf("unknown policy %q (want default, sticky, kv-aware or cache-aware)", s)
}

// Options tune the kv-aware score.
type Options struct {
	// Alpha weighs stickiness against overlap blocks (DESIGN §5: α = 1).
	Alpha float64
	// FloorK is the load-floor bonus K: non-sticky candidates below the mean
	// assigned count gain K·(mean − assigned)/mean. 0 turns it off.
	FloorK float64
	// IndexBlocks bounds each worker's believed-cached block set (LRU); set it
	// to the worker's KV pool in blocks.
	IndexBlocks int
	// SlidingRunBlocks and SlidingPoolBlocks give the index the workers'
	// sliding-window pool, when they keep one (SGLang's SWA radix cache
	// for GPT-OSS and the like): a hit needs that many blocks before its
	// end whose sliding part is still cached (ceil(window / block)), and
	// the sliding pool holds that many blocks of the cache (index.go). 0
	// keeps no sliding state.
	SlidingRunBlocks, SlidingPoolBlocks int
	// SlidingLayers of Layers give the index a vLLM worker's rule
	// instead, with SlidingRunBlocks as cdiv(window − 1, block) and no
	// sliding pool: one block pool for every layer, the sliding layers'
	// blocks behind a prompt's window freed and kept cached until the
	// pool reuses them (index.go, settleFreed).
	SlidingLayers, Layers int
	// SlidingTails says the workers keep each turn's output below its
	// prompt in their cache (colocated workers and KVC's decoders, not
	// prefill workers): the index then counts a next turn's hit as the
	// worker's match does, through the output's last window (index.go).
	SlidingTails bool
	// NoCache says the workers keep no prefix cache (a naive-PD decode worker
	// receives the whole prompt every time), so the router never believes
	// they hold a block and kv-aware falls back to stickiness and load.
	NoCache bool
	// CacheThreshold, BalanceAbs and BalanceRel tune the cache-aware
	// policy (cacheaware.go); 0 takes SGLang router's defaults.
	CacheThreshold float64
	BalanceAbs     float64
	BalanceRel     float64
}

// Router holds routing state for one pool of workers (the decode workers,
// the prefill workers, or the colocated workers).
type Router struct {
	names    []string
	policy   Policy
	opts     Options
	next     int // round-robin cursor
	inflight []int
	assigned []int
	index    []*blockIndex
	pins     idtable.Keyed[int] // session → worker of its last turn
	excluded []bool             // drained or removed: no pick may choose them (pool.go)
	down     []bool             // failed health checks: no pick chooses them either
	nOut     int                // workers excluded or down
	allDown  bool               // every worker not excluded is down: down is ignored
	// indexVers counts the versions of the indexes (blockIndex.ver).
	indexVers uint64
	// roots holds, for each first block of a root edge in any index, the
	// indexes that have one (bit i: index i), so an overlap with an index
	// that holds no edge starting with the prompt's first block is 0
	// without a lookup in that index's tree (with short, unrelated prompts
	// nearly every overlap is such a miss, one cold map probe an index a
	// pick). nil past 64 workers: every overlap walks its tree.
	roots map[uint64]uint64
	// The last first block looked up in roots and its bits (a pick asks
	// for every worker's overlap with one prompt: one probe, not one a
	// worker); maskOK false once roots changed.
	maskFirst, mask uint64
	maskOK          bool
}

// NewRouter makes a router over the named workers.
func NewRouter(names []string, policy Policy, opts Options) *Router {
	if opts.IndexBlocks <= 0 {
		opts.IndexBlocks = 1 << 20
	}
	r := &Router{
		names: names, policy: policy, opts: opts,
		inflight: make([]int, len(names)),
		assigned: make([]int, len(names)),
	}
	if (policy == PolicyKVAware || policy == PolicyCacheAware) && !opts.NoCache {
		r.index = make([]*blockIndex, len(names))
		if len(names) <= 64 {
			r.roots = make(map[uint64]uint64)
		}
		for i := range r.index {
			r.index[i] = newBlockIndex(opts, &r.indexVers)
			r.watchRoots(i)
		}
	}
	return r
}

// Names are the workers in index order.
func (r *Router) Names() []string { return r.names }

// Pin is the worker the session's last turn used, if any.
func (r *Router) Pin(session string) (int, bool) { return r.PinKey(SessionKey{ID: session}) }

// PinKey is Pin of a session the caller numbers (SessionKey).
func (r *Router) PinKey(session SessionKey) (int, bool) { return r.pins.Get(session) }

// Decision is a routing choice and why.
type Decision struct {
	Worker  int
	Overlap int  // blocks the router believes the worker holds
	Sticky  bool // the worker is the session's pin
}

// Pick chooses a worker for a request of session with the given prompt
// blocks. It does not change state; Dispatched does.
func (r *Router) Pick(session string, blocks []uint64) Decision {
	return r.pick(nil, SessionKey{ID: session}, blocks)
}

// pick is Pick with a memo of the prompt's overlaps (nil: none).
func (r *Router) pick(m *overlaps, session SessionKey, blocks []uint64) Decision {
	if r.nOut > 0 {
		return r.pickAmong(m, session, blocks, func(int) bool { return true })
	}
	n := len(r.names)
	if n == 1 {
		d := Decision{Worker: 0}
		if r.index != nil {
			d.Overlap = r.overlap(m, 0, blocks)
		}
		pin, ok := r.pins.Get(session)
		d.Sticky = ok && pin == 0
		return d
	}
	switch r.policy {
	case PolicySticky:
		if w, ok := r.pins.Get(session); ok {
			return Decision{Worker: w, Sticky: true}
		}
		return Decision{Worker: r.next % n}
	case PolicyKVAware:
		return r.pickKVAwareAmong(m, session, blocks, nil)
	case PolicyCacheAware:
		return r.pickCacheAware(m, blocks, nil)
	default:
		return Decision{Worker: r.next % n}
	}
}

// PickAmong is Pick restricted to the workers allowed reports true for
// (nil allows all); it returns Worker −1 when none is allowed. Algorithm 1
// uses it to skip decoders blacklisted for the session.
func (r *Router) PickAmong(session string, blocks []uint64, allowed func(int) bool) Decision {
	return r.pickAmong(nil, SessionKey{ID: session}, blocks, allowed)
}

// pickAmong is PickAmong with a memo of the prompt's overlaps (nil: none).
func (r *Router) pickAmong(m *overlaps, session SessionKey, blocks []uint64, allowed func(int) bool) Decision {
	if r.nOut > 0 {
		inner := allowed
		allowed = func(i int) bool { return !r.Out(i) && (inner == nil || inner(i)) }
	}
	if allowed == nil {
		return r.pick(m, session, blocks)
	}
	switch r.policy {
	case PolicyKVAware:
		return r.pickKVAwareAmong(m, session, blocks, allowed)
	case PolicyCacheAware:
		return r.pickCacheAware(m, blocks, allowed)
	case PolicySticky:
		if w, ok := r.pins.Get(session); ok && allowed(w) {
			return Decision{Worker: w, Sticky: true}
		}
	}
	for k := range r.names {
		if w := (r.next + k) % len(r.names); allowed(w) {
			return Decision{Worker: w}
		}
	}
	return Decision{Worker: -1}
}

// pickKVAwareAmong scores every allowed worker with Algorithm 1's
// lexicographic tuple. Ties fall to the lowest index so runs are
// deterministic.
func (r *Router) pickKVAwareAmong(m *overlaps, session SessionKey, blocks []uint64, allowed func(int) bool) Decision {
	pin, hasPin := r.pins.Get(session)
	mean := 0.0
	for _, a := range r.assigned {
		mean += float64(a)
	}
	mean /= float64(len(r.assigned))
	best := Decision{Worker: -1}
	var bestScore float64
	for i := range r.names {
		if allowed != nil && !allowed(i) {
			continue
		}
		overlap := 0
		if r.index != nil {
			overlap = r.overlap(m, i, blocks)
		}
		sticky := hasPin && pin == i
		score := float64(overlap)
		if sticky {
			score += r.opts.Alpha
		} else if r.opts.FloorK > 0 && mean > 0 {
			score += r.opts.FloorK * max(0, mean-float64(r.assigned[i])) / mean
		}
		if best.Worker < 0 || r.better(score, sticky, i, bestScore, best) {
			best = Decision{Worker: i, Overlap: overlap, Sticky: sticky}
			bestScore = score
		}
	}
	return best
}

func (r *Router) better(score float64, sticky bool, i int, bestScore float64, best Decision) bool {
	if score != bestScore {
		return score > bestScore
	}
	if sticky != best.Sticky {
		return sticky
	}
	if r.inflight[i] != r.inflight[best.Worker] {
		return r.inflight[i] < r.inflight[best.Worker]
	}
	return r.assigned[i] < r.assigned[best.Worker]
}

// Dispatched records that a request of session went to worker w: the
// round-robin cursor moves, the session is pinned, counters rise, and the
// worker is believed to hold the prompt's blocks. The handle names that
// belief, for Forget.
func (r *Router) Dispatched(w int, session string, blocks []uint64) radix.Handle {
	return r.dispatched(w, SessionKey{ID: session}, blocks, false)
}

// dispatched is Dispatched, keeping blocks without a copy when shared.
func (r *Router) dispatched(w int, session SessionKey, blocks []uint64, shared bool) radix.Handle {
	if _, pinned := r.pins.Get(session); !pinned || r.policy != PolicySticky {
		r.next = (r.next + 1) % len(r.names)
	}
	r.inflight[w]++
	r.assigned[w]++
	if session.ID != "" {
		r.pins.Put(session, w) // a request without a session sticks to nothing
	}
	if r.index != nil {
		return r.index[w].add(blocks, shared)
	}
	return radix.Handle{}
}

// PinTo records that worker w holds session and the prompt blocks, as its
// own report says (a residency probe), without counting a dispatch: no
// request went there on this router's account.
func (r *Router) PinTo(w int, session string, blocks []uint64) radix.Handle {
	r.pins.Put(SessionKey{ID: session}, w)
	if r.index != nil {
		return r.index[w].add(blocks, false)
	}
	return radix.Handle{}
}

// ForgetBlocks drops the belief that worker w holds the path h names (the
// worker reported evicting it).
func (r *Router) ForgetBlocks(w int, h radix.Handle) {
	if r.index != nil {
		r.index[w].forget(h)
	}
}

// Unpin drops a session's pin if it is w.
func (r *Router) Unpin(session string, w int) { r.UnpinKey(SessionKey{ID: session}, w) }

// UnpinKey is Unpin of a session the caller numbers.
func (r *Router) UnpinKey(session SessionKey, w int) {
	if p, ok := r.pins.Get(session); ok && p == w {
		r.pins.Delete(session)
	}
}

// Done records that a request dispatched to w has left it.
func (r *Router) Done(w int) {
	if r.inflight[w] > 0 {
		r.inflight[w]--
	}
}

// Forget drops a session's pin (the session ended).
func (r *Router) Forget(session string) { r.ForgetKey(SessionKey{ID: session}) }

// ForgetKey is Forget of a session the caller numbers.
func (r *Router) ForgetKey(session SessionKey) { r.pins.Delete(session) }

// Inflight and Assigned expose the counters for tests and logs.
func (r *Router) Inflight(w int) int { return r.inflight[w] }
func (r *Router) Assigned(w int) int { return r.assigned[w] }

// SetDown takes worker w out of service (its health checks fail) or puts
// it back. Like an excluded worker it is passed over by every pick; the two
// are kept apart so a drained worker that recovers stays drained.
func (r *Router) SetDown(w int, down bool) {
	if r.down == nil {
		r.down = make([]bool, len(r.names))
	}
	r.down[w] = down
	r.recount()
}

// Down reports whether worker w is out of service.
func (r *Router) Down(w int) bool { return r.down != nil && r.down[w] }

// Out reports whether no pick may choose worker w: excluded, or down while
// some other worker that is not excluded is up. When every worker left in
// service fails its health checks, the checks are what is wrong (a loaded
// machine answering slowly) or nothing can serve anyway: picks ignore them
// rather than fail every request.
func (r *Router) Out(w int) bool { return r.Excluded(w) || (r.Down(w) && !r.allDown) }

func (r *Router) recount() {
	up := 0
	for i := range r.names {
		if !r.Excluded(i) && !r.Down(i) {
			up++
		}
	}
	r.allDown = up == 0
	r.nOut = 0
	for i := range r.names {
		if r.Out(i) {
			r.nOut++
		}
	}
}
