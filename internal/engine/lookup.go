package engine

// SessionResidency answers a residency probe: does this decoder hold the
// session's KV, and how many of the prompt's tokens does it cache? Gateway
// replicas that share no state ask every decoder this about a session they
// have not routed, so the decoder that holds it is the one they ask for
// admission. Unlike AdmitSession it trims nothing, evicts nothing and
// reserves nothing.
func (w *Worker) SessionResidency(now float64, q AdmitQuery) (resident bool, cached int) {
	if !w.cfg.Session.Enabled || w.tree == nil {
		return false, 0
	}
	return w.residency(now, w.dsess[q.Session], q)
}

// residency is Algorithm 2's first question. The session's last output
// becomes blocks of this prompt now, so the match sees it. Resident: the
// session's KV is still held here (pinned, in use, or at block granularity
// whatever of it the cache kept); a session evicted at session granularity
// is not, whatever shared prefix still matches.
func (w *Worker) residency(now float64, s *dSession, q AdmitQuery) (resident bool, cached int) {
	w.nameOutput(now, &Request{Session: q.Session, Blocks: q.Blocks, Input: q.Input})
	if len(q.Blocks) > 0 {
		m := w.tree.Match(q.Blocks, w.lastBlockTokens(q.Input, len(q.Blocks)))
		cached = min(int(m.Tokens), q.Input-1)
	}
	resident = s != nil && cached > 0 && (s.pinned || s.inflight > 0 || w.cfg.Session.Eviction == EvictBlock)
	return resident, cached
}
