package engine

// SGLang HiCache's third tier (L3, --hicache-storage-backend: Mooncake's
// store, 3FS, a file system): a storage pool below the host tier. Pages the
// host tier takes are written on to storage (SGLang backs host nodes up to
// storage as they are written), so KV the host pool's LRU drops may still
// be found there. A prompt whose prefix storage holds beyond what HBM and
// host hold is prefetched storage→host from the moment the request enters
// the worker's queue (SGLang's prefetch_from_storage at queue time), and at
// admission what has arrived is loaded host→HBM as any host hit is
// (hicache.go). --hicache-storage-prefetch-policy says how long admission
// waits for the rest (HiRadixCache.can_terminate_prefetch):
//   - best_effort: not at all; what has arrived is used, the rest computed;
//   - wait_complete: until all of it has arrived;
//   - timeout: until all has arrived or base + per_ki_token·tokens/1024
//     seconds have passed since the prefetch began, then as best_effort.
// Prefetches under prefetch_threshold tokens (256) are not started.
//
// A storage pool per worker, with its own capacity and LRU, or one shared
// by a run's workers (StoragePool, with an optional aggregate bandwidth
// their prefetches share), or one kept outside the process for several
// worker processes (StorageIndex); each worker reads over its own link
// (the storage link, model.Profile.StorageLink: bandwidth and setup).
// Writes are asynchronous and cost no scheduler time. The wait is spent in
// the queue: as SGLang's scheduler skips a request whose prefetch is not
// done and admits the others, the request is set aside until its pages are
// in (storagepark.go), and its prefill step waits for nothing.

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// PrefetchPolicy is when a storage prefetch stops holding its request back.
type PrefetchPolicy uint8

const (
	PrefetchBestEffort PrefetchPolicy = iota
	PrefetchWaitComplete
	PrefetchTimeout
)

// PrefetchPolicies are the names SGLang's --hicache-storage-prefetch-policy
// takes, in PrefetchPolicy order.
var PrefetchPolicies = []string{"best_effort", "wait_complete", "timeout"}

func (p PrefetchPolicy) String() string {
	if int(p) < len(PrefetchPolicies) {
		return PrefetchPolicies[p]
	}
	return "unknown"
}

// ParsePrefetchPolicy reads a --hicache-storage-prefetch-policy value.
func ParsePrefetchPolicy(s string) (PrefetchPolicy, error) {
	for i, n := range PrefetchPolicies {
		if s == n {
			return PrefetchPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("prefetch policy %q, expected one of best_effort, wait_complete, timeout", s)
}

// SGLang's storage prefetch defaults (HiRadixCache's
// _parse_storage_backend_extra_config).
const (
	DefaultPrefetchThreshold    = 256  // tokens
	DefaultPrefetchTimeoutBaseS = 1.0  // seconds
	DefaultPrefetchTimeoutPerKi = 0.25 // seconds per 1024 tokens
)

// DefaultStorageRatio sizes a storage pool given no size: this many host
// pools (pdhybrid's choice; a real store is sized by its own config).
const DefaultStorageRatio = 4

// StorageConfig gives a worker's host tier a storage tier below it.
type StorageConfig struct {
	Enabled bool
	// Backend names the profile link storage is reached over
	// (model.StorageLinkName: mooncake, hf3fs).
	Backend string
	// SizeBytes is the pool's capacity (SGLang leaves it to the backend's
	// own configuration); it must exceed the host pool. Zero takes
	// DefaultStorageRatio × the host pool.
	SizeBytes int64
	Prefetch  PrefetchPolicy
	// Zero takes SGLang's defaults above.
	ThresholdTokens int
	TimeoutBaseS    float64
	TimeoutPerKiS   float64
	// Link, when its bandwidth is > 0, overrides the profile's.
	Link model.Link
	// Pool, when set, is one storage pool shared by every worker given the
	// same Pool (SGLang's L3 is one store for the cluster): the first
	// worker built sizes it, each reads it over its own link (its own
	// Link, backend and prefetch policy). Nil: a pool per worker.
	Pool *StoragePool
	// Index, when set, is a pool kept outside this process that several
	// worker processes share (StorageIndex: the emulator's store service);
	// it replaces Pool. Its aggregate bandwidth is the service's to book
	// (StorageBooker), when it has one.
	Index StorageIndex
}

// StoragePool is a storage pool several workers share (StorageConfig.Pool).
// The workers of one simulation run on one goroutine, as the pool's tree
// requires.
type StoragePool struct {
	// BandwidthBytes is the pool's aggregate bandwidth in bytes/s, which
	// every worker's prefetches share (a store's NICs or disks serve all
	// its clients); 0 is unlimited, each prefetch limited by its worker's
	// link only.
	BandwidthBytes float64
	shared         *storageShared
}

// NewStoragePool is an empty shared pool of unlimited aggregate
// bandwidth; the first worker given it sizes it.
func NewStoragePool() *StoragePool { return &StoragePool{} }

// storageShared is what the workers of one pool share: its index, its
// tree, its capacity and its aggregate link's reservations.
type storageShared struct {
	idx      StorageIndex
	tree     *radix.Tree
	capacity int64   // tokens
	aggBW    float64 // bytes/s; 0 unlimited
	// freeAt is when the aggregate link has carried every prefetch
	// reserved on it so far (reserve).
	freeAt float64
}

// storageTier is a worker's view of its storage KV pool (L3): the pool's
// tree (its own, or a shared one) over the worker's own link.
type storageTier struct {
	idx       StorageIndex
	tree      *radix.Tree // idx's, when it is in this process; else nil
	capacity  int64       // tokens
	remote    bool        // idx is a pool kept outside this process (StorageConfig.Index)
	shared    *storageShared
	link      model.Link
	policy    PrefetchPolicy
	threshold int
	baseS     float64
	perKiS    float64
}

// reserve books a prefetch of bytes that began at start on the pool's
// aggregate link and returns when both links have carried it: the
// worker's own (setup + bytes ÷ its bandwidth) and the aggregate one,
// which serves reservations first come first served at its bandwidth
// (a prefetch waits for those booked before it). Only a shared pool with
// an aggregate bandwidth books (stPrefetch).
func (st *storageTier) reserve(start float64, bytes int64) float64 {
	own := start + st.link.TransferS(bytes)
	sh := st.shared
	sh.freeAt = max(start, sh.freeAt) + float64(bytes)/sh.aggBW
	return max(own, sh.freeAt+st.link.SetupS)
}

// storageQueueS is how long the shared pool's aggregate link is booked
// past now by the prefetches reserved on it so far, for an answer naming
// st storage tokens: what a prefetch booked now would wait for before its
// own bytes (reserve). 0 with no storage tokens, a pool of the worker's
// own, or one of unlimited bandwidth.
func (w *Worker) storageQueueS(now float64, st int) float64 {
	if st <= 0 {
		return 0
	}
	sh := w.host.store.shared
	if sh == nil || sh.aggBW <= 0 {
		return 0
	}
	return max(sh.freeAt-now, 0)
}

// arrivedTokens is how many of a prefetch's total tokens have arrived by
// end, pages in order from start + the link's setup: at the worker's link
// rate, or, booked on a shared pool's aggregate link (booked), evenly
// until doneAt, when the last arrives.
func (st *storageTier) arrivedTokens(total int, start, end, doneAt float64, booked bool, bpt int64) int64 {
	since := end - start - st.link.SetupS
	if booked {
		return int64(float64(total) * since / (doneAt - start - st.link.SetupS))
	}
	return int64(since * st.link.BandwidthBytes / float64(bpt))
}

// sharedPool reports whether the worker's storage pool is one other
// workers share: what it holds may have been written by any of them.
func (w *Worker) sharedPool() bool {
	return w.host != nil && w.host.store != nil && (w.host.store.shared != nil || w.host.store.remote)
}

// newStorageTier sizes the storage pool of a worker whose host pool holds
// host tokens.
func newStorageTier(cfg Config, host int64) (*storageTier, error) {
	s := cfg.HiCache.Storage
	link := s.Link
	if link.BandwidthBytes <= 0 {
		l, err := cfg.Profile.StorageLink(s.Backend)
		if err != nil {
			return nil, fmt.Errorf("engine %s: hicache storage: %w", cfg.Name, err)
		}
		link = l
	}
	st := &storageTier{link: link, policy: s.Prefetch, threshold: s.ThresholdTokens, baseS: s.TimeoutBaseS, perKiS: s.TimeoutPerKiS}
	capacity := int64(DefaultStorageRatio) * host
	if s.SizeBytes > 0 {
		capacity = s.SizeBytes / cfg.Profile.Model.KVBytesPerToken()
	}
	switch {
	case s.Index != nil:
		c, err := s.Index.Open(cfg.BlockSize, capacity)
		if err != nil {
			return nil, fmt.Errorf("engine %s: hicache storage: %w", cfg.Name, err)
		}
		st.idx, st.capacity, st.remote = s.Index, c, true
	case s.Pool != nil && s.Pool.shared != nil:
		st.shared, st.idx, st.tree, st.capacity = s.Pool.shared, s.Pool.shared.idx, s.Pool.shared.tree, s.Pool.shared.capacity
	default:
		if capacity <= host {
			return nil, fmt.Errorf("engine %s: storage KV pool of %d bytes holds %d tokens, expected more than the host pool's %d (raise --hicache-storage-size)", cfg.Name, s.SizeBytes, capacity, host)
		}
		li := NewStorageIndex(cfg.BlockSize, capacity).(*localIndex)
		st.idx, st.tree, st.capacity = li, li.tree, capacity
		if s.Pool != nil {
			if s.Pool.BandwidthBytes < 0 {
				return nil, fmt.Errorf("engine %s: shared storage pool bandwidth %g bytes/s, expected ≥ 0 (0 = unlimited)", cfg.Name, s.Pool.BandwidthBytes)
			}
			st.shared = &storageShared{idx: st.idx, tree: st.tree, capacity: capacity, aggBW: s.Pool.BandwidthBytes}
			s.Pool.shared = st.shared
		}
	}
	if st.threshold <= 0 {
		st.threshold = DefaultPrefetchThreshold
	}
	if st.baseS <= 0 {
		st.baseS = DefaultPrefetchTimeoutBaseS
	}
	if st.perKiS <= 0 {
		st.perKiS = DefaultPrefetchTimeoutPerKi
	}
	return st, nil
}

// StorageCapacity is the storage KV pool in tokens (0 without one).
func (w *Worker) StorageCapacity() int64 {
	if w.host == nil || w.host.store == nil {
		return 0
	}
	return w.host.store.capacity
}

// StorageUsed is the tokens the storage pool holds.
func (w *Worker) StorageUsed() int64 {
	if w.host == nil || w.host.store == nil {
		return 0
	}
	return w.host.store.idx.Tokens()
}

// stWrite writes a path the host tier took on to storage, making room by
// storage's LRU; a write storage cannot take is skipped and counted.
func (w *Worker) stWrite(now float64, blocks []uint64, last int64) {
	st := w.host.store
	if st == nil || len(blocks) == 0 {
		return
	}
	added, evicted, ok := st.idx.Write(now, blocks, last)
	w.stats.StorageEvictedTokens += evicted
	if !ok {
		w.stats.StorageWriteSkips++
		return
	}
	w.stats.StorageWrittenTokens += added
}

// stPrefetch is the storage half of an admission's match: what storage
// holds of r's prompt beyond both HBM's cached tokens and the host tier's
// match is prefetched into the host tier, as much of it as the policy lets
// arrive. A request that would wait for it is set aside until then
// instead (stPark: admission fails for now, the queue goes on); one tried
// again then waits for nothing. The prefetch began when r entered the
// queue.
func (w *Worker) stPrefetch(now float64, r *Request, cached int) {
	st := w.host.store
	if st == nil {
		return
	}
	last := w.lastBlockTokens(r.Input, len(r.Blocks))
	base := max(int(w.host.tree.Match(r.Blocks, last).Tokens), cached)
	smBlocks, smTokens := st.idx.Match(r.Blocks, last)
	beyond := min(int(smTokens), r.Input-1) - base
	if beyond < st.threshold {
		return
	}
	bpt := w.mdl.KVBytesPerToken()
	x := r.more()
	first := !x.prefetchBegun
	if first {
		x.prefetchBegun, x.prefetchFrom = true, base
	}
	// The prefetch reads storage's match from where it began, pages in
	// order; an earlier attempt's pages are on host already (base).
	from := min(x.prefetchFrom, base)
	total := min(int(smTokens), r.Input-1) - from
	if first {
		// Booked once, on the pool's aggregate link, at the first attempt.
		if at, ok := st.book(r.SubmittedAt, int64(total)*bpt); ok {
			x.prefetchDoneAt = at
		}
	}
	booked := x.prefetchDoneAt > 0
	doneAt := r.SubmittedAt + st.link.TransferS(int64(total)*bpt)
	if booked {
		doneAt = x.prefetchDoneAt
	}
	end := now // best_effort: stop at once
	switch st.policy {
	case PrefetchWaitComplete:
		end = max(now, doneAt)
	case PrefetchTimeout:
		end = max(now, min(doneAt, r.SubmittedAt+st.baseS+st.perKiS*float64(total)/1024))
	}
	if end > now {
		w.stPark(now, r, end) // it waits in the queue, not in a step (storagepark.go)
		return
	}
	bs := w.cfg.BlockSize
	nb, lastTok := smBlocks, smTokens-int64(smBlocks-1)*int64(bs)
	if end < doneAt {
		// Pages arrive in order; only whole ones count.
		got := st.arrivedTokens(total, r.SubmittedAt, end, doneAt, booked, bpt)
		nb, lastTok = (from+int(max(got, 0)))/bs, int64(bs)
		if nb*bs <= base {
			return // nothing past host has arrived
		}
	}
	// Touch storage's copy (its LRU) and file what arrived in the host tree.
	st.idx.Touch(now, r.Blocks[:nb], lastTok)
	before := w.stats.HostWriteSkips
	w.hiWrite(now, r.Blocks[:nb], lastTok)
	if w.stats.HostWriteSkips != before {
		return // the host pool could not take it: computed instead
	}
	w.stats.StoragePrefetches++
	w.stats.StoragePrefetchedTokens += int64((nb-1)*bs) + lastTok - int64(base)
}

// storageBeyond is the prompt tokens of a session this worker held (as
// hostBeyond) that its storage pool holds beyond both HBM's cached ones and
// the host tier's match, when enough to prefetch (the threshold; 0 else):
// what stPrefetch would bring storage→host for the turn. With anyone, a
// shared pool's match counts for a session this worker never held: its
// blocks are the prompt's own, whichever worker wrote them.
func (w *Worker) storageBeyond(s *dSession, q AdmitQuery, cached int, anyone bool) int {
	if w.host == nil || w.host.store == nil || len(q.Blocks) == 0 ||
		(s == nil && w.cfg.Session.Eviction != EvictBlock && !(anyone && w.sharedPool())) {
		return 0
	}
	st := w.host.store
	last := w.lastBlockTokens(q.Input, len(q.Blocks))
	base := max(min(int(w.host.tree.Match(q.Blocks, last).Tokens), q.Input-1), cached)
	_, held := st.idx.Match(q.Blocks, last)
	beyond := min(int(held), q.Input-1) - base
	if beyond < st.threshold {
		return 0
	}
	return beyond
}
