package engine

import (
	"cmp"
	"slices"
)

// Shortest-first admission (Config.ShortestFirst). SGLang admits a
// worker's waiting requests in arrival order (or by longest prefix match),
// so a direct append of a few hundred tokens queued behind a 40K-token
// local seed waits the seed out, and on a prefill worker a 19K-token cold
// prompt waits behind every larger one ahead of it (Mooncake at 4 GPUs:
// 1.96 s in P's queue at the p90–p99 band). Admitting the fewest uncached
// tokens first cuts those waits; MaxWaitS bounds what it costs the largest
// prompts, which go first once they have waited that long. Without the
// bound, the BLIS spec at 4 GPUs, overloaded, kept a request waiting 4,755 s.

// orderKey is a waiting request's place in shortest-first order.
type orderKey struct {
	r    *Request
	aged bool // waited past MaxWaitS: goes first, in arrival order
	unc  int  // uncached prompt tokens as the cache stands now
}

// orderWaiting sorts the waiting queue into shortest-first order. The sort
// is stable, so equal requests keep their arrival order.
func (w *Worker) orderWaiting(now float64) {
	q := w.waiting.items[w.waiting.head:]
	if len(q) < 2 {
		return
	}
	keys := w.orderKeys[:0]
	for _, r := range q {
		keys = append(keys, orderKey{r: r, unc: w.uncachedNow(r), aged: w.cfg.MaxWaitS > 0 && now-r.SubmittedAt > w.cfg.MaxWaitS})
	}
	slices.SortStableFunc(keys, func(a, b orderKey) int {
		switch {
		case a.aged && b.aged:
			return cmp.Compare(a.r.SubmittedAt, b.r.SubmittedAt)
		case a.aged:
			return -1
		case b.aged:
			return 1
		}
		return a.unc - b.unc
	})
	for i := range keys {
		q[i] = keys[i].r
	}
	clear(keys)
	w.orderKeys = keys[:0]
}

// uncachedNow is what a waiting request would compute if admitted now: its
// prompt less what the cache holds of it (at least one token, as admit
// counts it), or all of it on a worker without a cache.
func (w *Worker) uncachedNow(r *Request) int {
	if w.tree == nil || len(r.Blocks) == 0 {
		return r.Input
	}
	return r.Input - min(int(w.promptMatch(r).Tokens), r.Input-1)
}
