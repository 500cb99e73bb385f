package engine

// On-evict D→P dumps (DESIGN §5, the seed's D_TO_P_SYNC design). With
// SessionConfig.DumpOnEvict a session evicted at session granularity is not
// freed at once: its prompt path stays locked — pinned for the dump — until
// the executor reports that the dump to a prefill worker ended
// (ReleaseDump), so that the KV being read is not handed to another request
// under it. Admission and the scheduler's own trim count the tokens being
// dumped as coming free: a request they let in waits in the scheduler for
// that KV instead of making the trim evict more sessions.

// dumpHold is a session's prompt path locked while its dump is on the link.
type dumpHold struct {
	session string
	node    int32
	tokens  int64 // the path's tokens: at most what its release frees
}

// holdForDump keeps the session's lock on node for its dump.
func (w *Worker) holdForDump(session string, node int32, tokens int64) {
	w.dumps = append(w.dumps, dumpHold{session: session, node: node, tokens: tokens})
	w.dumping += tokens
}

// ReleaseDump frees the oldest path held for a dump of session, now that
// the dump ended (landed, failed or was dropped), and lets waiting requests
// have the room. It returns the tokens freed.
func (w *Worker) ReleaseDump(now float64, session string) int64 {
	for i, h := range w.dumps {
		if h.session != session {
			continue
		}
		w.dumps = append(w.dumps[:i], w.dumps[i+1:]...)
		w.dumping -= h.tokens
		w.tree.Unlock(h.node, now)
		w.hiDemote(now, h.node)
		freed := w.tree.EvictPath(h.node)
		w.stats.EvictedTokens += freed
		w.grantReservations(now)
		w.wake(now)
		return freed
	}
	return 0
}

// Dumping is the tokens held for dumps in flight.
func (w *Worker) Dumping() int64 { return w.dumping }
