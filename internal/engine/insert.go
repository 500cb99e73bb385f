package engine

// insertPrompt adds r's blocks[from:] below the locked node at in the
// prefix cache, copying them unless r shares its blocks (SharedBlocks).
// Under write-through the host tier gets a copy of the whole path.
func (w *Worker) insertPrompt(r *Request, at int32, blocks []uint64, from int, lastTokens int64, now float64) (int32, int64) {
	w.hiAdopted(now, blocks, lastTokens)
	if r.SharedBlocks {
		return w.tree.InsertShared(at, blocks, from, lastTokens, now)
	}
	return w.tree.Insert(at, blocks, from, lastTokens, now)
}
