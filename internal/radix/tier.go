package radix

// OldestLeaf is the leaf Evict (or NibbleOne) would free first; ok is
// false when nothing is evictable. An owner that keeps a lower KV tier
// writes that leaf's path there before the eviction (the engine's host
// tier under write-back).
func (r *Tree) OldestLeaf() (n int32, ok bool) {
	if _, ok := r.OldestAccess(); !ok {
		return 0, false
	}
	return r.lru[0].node, true
}
