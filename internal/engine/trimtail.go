package engine

// Tail trims (SessionConfig.TrimTail). A session-granular trim frees a
// whole session to make room for one request: on the WEKA set a session
// holds 100K–250K tokens, an append needs a few thousand, and the session
// trimmed comes back as a reseed of all of it (KVC v3 at 0.01 sessions/s
// on 4 GPUs re-prefilled 4.8M tokens more than DP's LRU cache did). A tail
// trim takes from the least recently used idle session only what the room
// needs, from its end (its output tail first, then its prompt's last
// blocks), and leaves the session pinned on the prefix it keeps: its next
// turn is an append of what it lost, direct when that is within τ_append.
//
// Under overload the trade turns: with many requests waiting for room, the
// prefixes kept pinned hold KV the queue needs, and on the BLIS spec at 4
// GPUs (120 requests queued per decoder) tail trims doubled KVC v3's TTFT
// p99. So a tail trim is taken only while at most TailMaxWaiting requests
// wait in the worker's queue (docs/kvc-v3.md, "What was tried").

// trimTailFor frees at least short tokens from the least recently used
// session the trim policy allows, other than except, cutting its tail; a
// session whose whole prompt would have to go is evicted whole. It charges
// the scheduler stall as trimOne does and reports whether it freed
// anything.
func (w *Worker) trimTailFor(now float64, except string, short int64, rep *AdmitReply) bool {
	s := w.trimVictim(except)
	if s == nil {
		return false
	}
	var freed int64
	if t := w.tail(s.key()); t != nil {
		freed += t.tokens
		w.dropTail(t)
	}
	if freed < short {
		path, held := w.tree.PathBlocks(s.node)
		keep := keptBlocks(len(path), held, w.cfg.BlockSize, short-freed)
		if keep == 0 {
			freed += w.evictSession(now, s)
			rep.Trimmed++
			rep.TrimmedTok += freed
			w.chargeTrim(now, freed)
			return true
		}
		m := w.tree.Lock(path[:keep], int64(w.cfg.BlockSize), now)
		w.tree.Unlock(s.node, now)
		w.hiDemoteSession(now, s.node, s.inflight == 0)
		cut := w.tree.EvictPath(s.node)
		freed += cut
		s.node = m.Node
		s.tokens = int64(keep * w.cfg.BlockSize)
		w.stats.EvictedTokens += cut
	}
	w.stats.TailTrims++
	rep.Trimmed++
	rep.TrimmedTok += freed
	w.chargeTrim(now, freed)
	return true
}

// keptBlocks is how many of a path's n blocks (held tokens, the last block
// possibly partial) stay when at least short tokens go from its end; 0
// when all of them must go.
func keptBlocks(n int, held int64, blockSize int, short int64) int {
	bs := int64(blockSize)
	last := held - int64(n-1)*bs // tokens in the last block
	if n == 0 || held <= short {
		return 0
	}
	cut, keep := last, n-1
	for cut < short && keep > 0 {
		cut += bs
		keep--
	}
	return keep
}
