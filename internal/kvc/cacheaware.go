package kvc

// PolicyCacheAware is SGLang router's cache-aware policy, its default for
// data parallelism (sgl-router README, "Cache-Aware Load-Balancing
// Router"): when the pool is imbalanced — the most and least loaded
// workers' pending requests differ by more than balance_abs_threshold (32)
// and the most exceeds balance_rel_threshold (1.0001) times the least — the
// request goes to the least loaded; otherwise to the worker whose prefix
// tree matches most of the prompt if that match exceeds cache_threshold
// (0.5) of it, else to the worker with the smallest tree (the most free
// cache). Unlike Algorithm 1 it cannot pile every request of a shared
// prefix onto one worker: load breaks the tie past the thresholds.
const PolicyCacheAware Policy = "cache-aware"

// SGLang router's defaults for the cache-aware policy.
const (
	defaultCacheThreshold = 0.5
	defaultBalanceAbs     = 32
	defaultBalanceRel     = 1.0001
)

func (r *Router) pickCacheAware(m *overlaps, blocks []uint64, allowed func(int) bool) Decision {
	ok := func(i int) bool { return allowed == nil || allowed(i) }
	least, most := -1, -1
	for i := range r.names {
		if !ok(i) {
			continue
		}
		if least < 0 || r.inflight[i] < r.inflight[least] {
			least = i
		}
		if most < 0 || r.inflight[i] > r.inflight[most] {
			most = i
		}
	}
	if least < 0 {
		return Decision{Worker: -1}
	}
	absT, relT, cacheT := float64(defaultBalanceAbs), defaultBalanceRel, defaultCacheThreshold
	if r.opts.BalanceAbs > 0 {
		absT = r.opts.BalanceAbs
	}
	if r.opts.BalanceRel > 0 {
		relT = r.opts.BalanceRel
	}
	if r.opts.CacheThreshold > 0 {
		cacheT = r.opts.CacheThreshold
	}
	hi, lo := float64(r.inflight[most]), float64(r.inflight[least])
	if hi-lo > absT && hi > relT*lo || r.index == nil || len(blocks) == 0 {
		return Decision{Worker: least}
	}
	best, bestMatch := -1, -1
	smallest := -1
	for i := range r.names {
		if !ok(i) {
			continue
		}
		if o := r.overlap(m, i, blocks); o > bestMatch {
			best, bestMatch = i, o
		}
		if smallest < 0 || r.index[i].tree.Tokens() < r.index[smallest].tree.Tokens() {
			smallest = i
		}
	}
	if float64(bestMatch) > cacheT*float64(len(blocks)) {
		return Decision{Worker: best, Overlap: bestMatch}
	}
	return Decision{Worker: smallest, Overlap: r.overlap(m, smallest, blocks)}
}
