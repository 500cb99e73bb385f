package engine

// SGLang's hierarchical cache (HiCache, --enable-hierarchical-cache): a
// host-memory tier (L2) below the worker's HBM prefix cache (L1). KV that
// HBM evicts is demoted to host instead of dropped; a later prompt that
// matches past HBM's prefix into host memory loads those blocks back over
// the GPU's host link instead of computing them again, the load overlapped
// layer by layer with the prefill step that needs it (layer N+1 loads while
// layer N computes). The host pool has its own LRU.
//
// Write policies (--hicache-write-policy), as SGLang's HiRadixCache applies
// them (python/sglang/srt/mem_cache/hiradix_cache.py):
//   - write_through: every prefix the cache adopts is copied to host at
//     once (SGLang: a node is backed up at its first hit, threshold 1);
//   - write_through_selective: a prefix is copied to host when a request
//     reuses it from HBM, so only KV used twice goes down (SGLang counts
//     hits per node against a higher threshold);
//   - write_back: nothing is copied until HBM evicts it; the eviction
//     writes it to host first (SGLang's evict: write_backup, then free).
//
// The model keeps the host tier as a second radix tree over the same block
// ids, holding whole paths from the root (a host path whose head is still
// in HBM counts against the host pool as SGLang's write-through copies
// do). Writes to host are asynchronous on the link's device-to-host
// direction and cost no scheduler time; loads cost what the host→device
// direction allows. A finished turn's output tail (output.go) is demoted
// with its session's name and filed under its block ids in the host tree
// when the session's next turn names it.

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// WritePolicy is when HBM's KV is copied to the host tier.
type WritePolicy uint8

const (
	WriteThrough WritePolicy = iota
	WriteThroughSelective
	WriteBack
)

// WritePolicies are the policies' names as SGLang's --hicache-write-policy
// takes them, in WritePolicy order.
var WritePolicies = []string{"write_through", "write_through_selective", "write_back"}

func (p WritePolicy) String() string {
	if int(p) < len(WritePolicies) {
		return WritePolicies[p]
	}
	return "unknown"
}

// ParseWritePolicy reads a --hicache-write-policy value.
func ParseWritePolicy(s string) (WritePolicy, error) {
	for i, n := range WritePolicies {
		if s == n {
			return WritePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("write policy %q, expected one of write_through, write_through_selective, write_back", s)
}

// HiCacheConfig gives a worker with a prefix cache a host-memory KV tier.
// A worker without a prefix cache (a naive-PD decoder) has nothing to
// demote and ignores it.
type HiCacheConfig struct {
	Enabled bool
	// Ratio sizes the host pool as a multiple of the HBM pool
	// (--hicache-ratio; SGLang's default 2). It must exceed 1: write-through
	// keeps a host copy of what HBM holds (SGLang asserts the host pool is
	// larger than the device pool).
	Ratio float64
	// SizeBytes, when > 0, sizes the host pool in bytes instead of Ratio
	// (--hicache-size, GB per rank).
	SizeBytes   int64
	WritePolicy WritePolicy
	// Link is the GPU↔host link; zero takes the profile's HostLink.
	Link model.Link
	// DemoteIdle (--hicache-demote-idle) writes a session that a trim
	// takes from HBM while none of its requests is here (between its
	// turns: a tool call or the user's think time) to host first, under
	// every write policy, so it is demoted rather than dropped. Under
	// write_through and write_back that is already so; under
	// write_through_selective a session never reused from HBM would be
	// dropped. The host pool makes room by its own LRU.
	DemoteIdle bool
	// TrimHostFirst (--hicache-trim-host-first): when a session trim must
	// free HBM, it takes, among the TrimHostWindow least recently used
	// sessions it may trim, the oldest whose KV the host tier already
	// holds: its next turn loads back over the host link instead of
	// recomputing, and its trim writes nothing. With none held there, LRU.
	TrimHostFirst bool
	// Storage gives the host tier a storage tier below it (storage.go).
	Storage StorageConfig
}

// DefaultHiCacheRatio is SGLang's --hicache-ratio default.
const DefaultHiCacheRatio = 2.0

// hostTier is a worker's host KV pool.
type hostTier struct {
	tree     *radix.Tree
	capacity int64 // tokens
	link     model.Link
	policy   WritePolicy
	idle     bool                       // DemoteIdle
	hostTrim bool                       // TrimHostFirst
	tails    idtable.Keyed[*outputTail] // demoted output tails, by session
	order    []*outputTail              // in demotion order, for the host LRU
	head     int
	tailTok  int64
	store    *storageTier // L3 below, or nil (storage.go)
}

// newHostTier sizes the host pool for a worker of pool tokens.
func newHostTier(cfg Config, pool int64) (*hostTier, error) {
	h := cfg.HiCache
	link := h.Link
	if link.BandwidthBytes <= 0 {
		l, err := cfg.Profile.HostLink()
		if err != nil {
			return nil, fmt.Errorf("engine %s: hierarchical cache: %w", cfg.Name, err)
		}
		link = l
	}
	var capacity int64
	switch {
	case h.SizeBytes > 0:
		capacity = h.SizeBytes / cfg.Profile.Model.KVBytesPerToken()
		if capacity <= pool {
			return nil, fmt.Errorf("engine %s: host KV pool of %d bytes holds %d tokens, expected more than the HBM pool's %d (raise --hicache-size)", cfg.Name, h.SizeBytes, capacity, pool)
		}
	default:
		ratio := h.Ratio
		if ratio == 0 {
			ratio = DefaultHiCacheRatio
		}
		if ratio <= 1 {
			return nil, fmt.Errorf("engine %s: hicache ratio %g, expected > 1 (the host pool must be larger than HBM's)", cfg.Name, ratio)
		}
		capacity = int64(ratio * float64(pool))
	}
	ht := &hostTier{tree: radix.New(cfg.BlockSize), capacity: capacity, link: link, policy: h.WritePolicy, idle: h.DemoteIdle, hostTrim: h.TrimHostFirst}
	if h.Storage.Enabled {
		st, err := newStorageTier(cfg, capacity)
		if err != nil {
			return nil, err
		}
		ht.store = st
	}
	return ht, nil
}

// HostCapacity is the host KV pool in tokens (0 without a host tier).
func (w *Worker) HostCapacity() int64 {
	if w.host == nil {
		return 0
	}
	return w.host.capacity
}

// HostUsed is the tokens the host KV pool holds.
func (w *Worker) HostUsed() int64 {
	if w.host == nil {
		return 0
	}
	return w.host.tree.Tokens() + w.host.tailTok
}

// HostPrefixMatch is how many of a prompt's tokens the host tier holds
// (its whole matched prefix, the part HBM also holds included), without
// touching its LRU order.
func (w *Worker) HostPrefixMatch(blocks []uint64, input int) int {
	if w.host == nil || len(blocks) == 0 {
		return 0
	}
	return int(w.host.tree.Match(blocks, w.lastBlockTokens(input, len(blocks))).Tokens)
}

// hiWrite copies a path from the root (blocks, the last holding last
// tokens) to the host tier, making room by the host LRU. A write the host
// cannot take is skipped and counted.
func (w *Worker) hiWrite(now float64, blocks []uint64, last int64) {
	h := w.host
	if h == nil || len(blocks) == 0 {
		return
	}
	m := h.tree.Lock(blocks, last, now)
	need := int64(len(blocks)-1)*int64(w.cfg.BlockSize) + last - m.Tokens
	if need > 0 && !w.hiMakeRoom(need) {
		h.tree.Unlock(m.Node, now)
		w.stats.HostWriteSkips++
		return
	}
	node, added := h.tree.Insert(m.Node, blocks, m.Blocks, last, now)
	h.tree.Unlock(node, now)
	w.stats.HostWrittenTokens += added
	if h.store != nil {
		w.stWrite(now, blocks, last)
	}
}

// hiMakeRoom frees host tokens, oldest first across demoted tails and
// unlocked host leaves, until need are free.
func (w *Worker) hiMakeRoom(need int64) bool {
	h := w.host
	for h.capacity-w.HostUsed() < need {
		tt, hasTail := h.oldestTail()
		lt, hasLeaf := h.tree.OldestAccess()
		switch {
		case hasTail && (!hasLeaf || tt < lt):
			w.stats.HostEvictedTokens += h.evictOldestTail()
		case hasLeaf:
			w.stats.HostEvictedTokens += h.tree.Evict(1)
		default:
			return false
		}
	}
	return true
}

// hiAdopted is the write-through hook: the prefix cache adopted blocks
// (a prompt's path from the root).
func (w *Worker) hiAdopted(now float64, blocks []uint64, last int64) {
	if w.host != nil && w.host.policy == WriteThrough {
		w.hiWrite(now, blocks, last)
	}
}

// hiReused is the selective write-through hook: a request reuses the first
// n blocks of its prompt from HBM.
func (w *Worker) hiReused(now float64, r *Request, n int) {
	if w.host == nil || w.host.policy != WriteThroughSelective || n == 0 {
		return
	}
	last := int64(w.cfg.BlockSize)
	if n == len(r.Blocks) {
		last = w.lastBlockTokens(r.Input, len(r.Blocks))
	}
	w.hiWrite(now, r.Blocks[:n], last)
}

// hiDemote is the write-back hook: HBM is about to free node n of its
// prefix cache (and the ancestors only it uses); its path goes to host
// first. Under write-through the host already holds what was adopted. It
// reports whether the host tier holds the whole path now (a session
// eviction tells the router so: EvSessionEvicted's Demoted), and else
// whether the storage pool below does (EvSessionEvicted's Stored: the
// host could not keep it, storage did).
func (w *Worker) hiDemote(now float64, n int32) (host, storage bool) {
	if w.host == nil {
		return false, false
	}
	blocks, tokens := w.tree.PathBlocks(n)
	if len(blocks) == 0 {
		return false, false
	}
	last := tokens - int64(len(blocks)-1)*int64(w.cfg.BlockSize)
	if w.host.policy == WriteBack {
		w.hiWrite(now, blocks, last)
	}
	if w.host.tree.Match(blocks, last).Tokens == tokens {
		return true, false
	}
	st := w.host.store
	if st == nil {
		return false, false
	}
	_, held := st.idx.Match(blocks, last)
	return false, held == tokens
}

// hiDemoteSession is hiDemote for a session a trim takes from HBM: with
// DemoteIdle, a session with no request here (idle) is written to host
// first whatever the write policy.
func (w *Worker) hiDemoteSession(now float64, n int32, idle bool) (host, storage bool) {
	if h := w.host; h != nil && h.idle && idle && h.policy != WriteBack {
		if blocks, tokens := w.tree.PathBlocks(n); len(blocks) > 0 {
			w.hiWrite(now, blocks, tokens-int64(len(blocks)-1)*int64(w.cfg.BlockSize))
		}
	}
	return w.hiDemote(now, n)
}

// hiDemoteOldest demotes the leaf the prefix cache evicts next.
func (w *Worker) hiDemoteOldest(now float64) {
	if w.host == nil || w.host.policy != WriteBack {
		return
	}
	if n, ok := w.tree.OldestLeaf(); ok {
		w.hiDemote(now, n)
	}
}

// hiDemoteTail keeps an output tail HBM evicts on host, under its
// session's name (every policy: under write-through SGLang copied it when
// the turn ended, under write-back it is written now).
func (w *Worker) hiDemoteTail(t *outputTail) {
	h := w.host
	if h == nil || t.tokens <= 0 {
		return
	}
	if old, _ := h.tails.Get(t.session); old != nil {
		h.dropTail(old)
	}
	if !w.hiMakeRoom(t.tokens) {
		w.stats.HostWriteSkips++
		return
	}
	c := *t
	c.live, c.pinned = true, false
	h.tails.Put(c.session, &c)
	h.order = append(h.order, &c)
	h.tailTok += c.tokens
	w.stats.HostWrittenTokens += c.tokens
}

// hiNameOutput files a session's demoted tail under r's block ids in the
// host tree, when host holds the prompt it continues (output.go's
// nameOutput, one tier down).
func (w *Worker) hiNameOutput(now float64, r *Request) {
	h := w.host
	if h == nil {
		return
	}
	t, _ := h.tails.Get(r.sessKey())
	if t == nil {
		return
	}
	h.dropTail(t)
	bs := w.cfg.BlockSize
	full := t.input / bs
	end := min((t.input+int(t.tokens))/bs, len(r.Blocks))
	if end <= full || full == 0 || r.Blocks[full-1] != t.lastWhole {
		return
	}
	if m := h.tree.Match(r.Blocks[:full], int64(bs)); m.Blocks < full {
		return // host lost the prompt the output continues
	}
	w.hiWrite(now, r.Blocks[:end], int64(bs))
}

func (h *hostTier) dropTail(t *outputTail) {
	t.live = false
	h.tailTok -= t.tokens
	h.tails.Delete(t.session)
}

func (h *hostTier) oldestTail() (float64, bool) {
	for h.head < len(h.order) {
		if t := h.order[h.head]; t.live {
			return t.at, true
		}
		h.order[h.head] = nil
		h.head++
	}
	return 0, false
}

func (h *hostTier) evictOldestTail() int64 {
	if _, ok := h.oldestTail(); !ok {
		return 0
	}
	t := h.order[h.head]
	h.order[h.head] = nil
	h.head++
	if h.head > 64 && h.head*2 >= len(h.order) {
		n := copy(h.order, h.order[h.head:])
		clear(h.order[n:])
		h.order, h.head = h.order[:n], 0
	}
	h.dropTail(t)
	return t.tokens
}

// hiMatch extends an admission's HBM match (cached prompt tokens) into the
// host tier: the tokens host holds beyond it are loaded back rather than
// computed. It locks the host path until the load is done and returns the
// tokens to load (0 without a host tier or a host hit). SGLang loads all of
// a host hit or none, and skips hits under 10 tokens (load_back_threshold).
func (w *Worker) hiMatch(now float64, r *Request, cached int) int {
	h := w.host
	if h == nil || len(r.Blocks) == 0 {
		return 0
	}
	if h.store != nil {
		w.stPrefetch(now, r, cached) // what storage holds beyond, into host first
		if r.isParked() {
			return 0
		}
	}
	hm := h.tree.Match(r.Blocks, w.lastBlockTokens(r.Input, len(r.Blocks)))
	load := min(int(hm.Tokens), r.Input-1) - cached
	if hm.Tokens == 0 {
		return 0
	}
	// Lock what host holds for this prompt: it is touched in the host LRU
	// (HBM reuses it), and a load in flight keeps its blocks.
	hm = h.tree.LockMatched(r.Blocks, hm, now)
	if load < hostLoadMinTokens {
		h.tree.Unlock(hm.Node, now)
		return 0
	}
	r.hostNode, r.hostLocked = hm.Node, true
	return load
}

// hostLoadMinTokens is SGLang's load_back_threshold: a smaller host hit is
// computed, not loaded.
const hostLoadMinTokens = 10

// hiUnlock releases r's host path (its load is done, or r left).
func (w *Worker) hiUnlock(now float64, r *Request) {
	if r.hostLocked {
		w.host.tree.Unlock(r.hostNode, now)
		r.hostLocked = false
	}
}

// hiStepS is a prefill step's duration with the host loads of the requests
// whose first chunk it runs: compute c seconds and the loads' bytes over
// the host link, layer by layer, so the step takes the longer of the two
// plus one layer's share of the shorter (the first layer's load, or the
// last layer's compute, cannot overlap).
func (w *Worker) hiStepS(c float64) float64 {
	var tokens int64
	for _, ch := range w.plan.chunks {
		if ch.req.loadPending {
			tokens += int64(ch.req.loaded)
		}
	}
	if tokens == 0 {
		return c
	}
	load := w.host.link.TransferS(tokens * w.mdl.KVBytesPerToken())
	layers := float64(max(w.mdl.Layers, 1))
	w.stats.HostLoads++
	w.stats.HostLoadedTokens += tokens
	w.stats.HostLoadS += load
	return max(c+load/layers, load+c/layers)
}

// hiLoaded marks the loads of the step that just ended as done.
func (w *Worker) hiLoaded(now float64) {
	for _, ch := range w.plan.chunks {
		if r := ch.req; r.loadPending {
			r.loadPending = false
			w.hiUnlock(now, r)
		}
	}
}

// admitFromHost is Algorithm 2's answer for a session HBM evicted whose
// prefix this worker's host tier still holds: a direct append that loads
// the prefix back, when what is left to compute passes τ_append and the
// pool has room for the loaded and the computed KV. A host hit that leaves
// too large an append is no refusal: the admission goes on as for a session
// not resident (a seed), as it would without the tier.
func (w *Worker) admitFromHost(now float64, s *dSession, q AdmitQuery, cached int, rep *AdmitReply) bool {
	if q.ForceSeed {
		return false
	}
	host, st := w.hostBeyond(s, q, cached), w.storageBeyond(s, q, cached, false)
	tier := lowestTier(host, st)
	if tier == TierNone {
		return false
	}
	appendTok := q.Input - cached - host - st
	if q.MaxAppend > 0 && appendTok > q.MaxAppend {
		return false
	}
	var trial AdmitReply
	if !w.roomFor(now, int64(appendTok+host+st)+int64(max(q.Output, 1)), q.Session, &trial) {
		return false
	}
	rep.Trimmed, rep.TrimmedTok = trial.Trimmed, trial.TrimmedTok
	rep.CanAdmit, rep.Mode, rep.Reason = true, AdmitDirect, ""
	rep.CachedTokens, rep.HostTokens, rep.StorageTokens, rep.Tier = cached+host+st, host, st, tier
	rep.StorageQueueS = w.storageQueueS(now, st)
	return true
}

// lowestTier is the tier an answer names for a prefix of host tokens to
// load back and storage tokens to prefetch: the lowest one it reads from
// (a turn that needs both waits for the storage prefetch, then loads both).
func lowestTier(host, storage int) string {
	switch {
	case storage > 0:
		return TierStorage
	case host > 0:
		return TierHost
	}
	return TierNone
}

// hostBeyond is the prompt tokens of a session this worker held (s, or
// any at block granularity, where evicted sessions are forgotten) that its
// host tier holds beyond HBM's cached ones, when enough to load (0 else).
func (w *Worker) hostBeyond(s *dSession, q AdmitQuery, cached int) int {
	if w.host == nil || len(q.Blocks) == 0 || (s == nil && w.cfg.Session.Eviction != EvictBlock) {
		return 0
	}
	host := min(w.HostPrefixMatch(q.Blocks, q.Input), q.Input-1) - cached
	if host < hostLoadMinTokens {
		return 0
	}
	return host
}
