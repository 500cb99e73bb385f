package engine

// SessionResidency answers a residency probe: does this decoder hold the
// session's KV, and how many of the prompt's tokens does it cache? Gateway
// replicas that share no state ask every decoder this about a session they
// have not routed, so the decoder that holds it is the one they ask for
// admission. Unlike AdmitSession it trims nothing, evicts nothing and
// reserves nothing.
//
// With a host tier, a session trimmed from HBM that the host kept is
// resident too (its next turn appends here, loading it back): cached then
// counts the host's tokens (SessionTier says which tier).
func (w *Worker) SessionResidency(now float64, q AdmitQuery) (resident bool, cached int) {
	resident, cached, _ = w.SessionTier(now, q)
	return resident, cached
}

// SessionTier is SessionResidency naming the tier that holds the session:
// TierHBM, TierHost, TierStorage (the storage pool holds some of the
// prefix beyond what HBM and host hold: cached counts host's and storage's
// tokens) or TierNone. A shared pool's match does not make a session this
// worker never held resident here.
func (w *Worker) SessionTier(now float64, q AdmitQuery) (resident bool, cached int, tier string) {
	if !w.cfg.Session.Enabled || w.tree == nil {
		return false, 0, TierNone
	}
	s := w.sess(q.sessKey())
	cached = w.peekCached(q)
	if s != nil && cached > 0 && (s.pinned || s.inflight > 0 || w.cfg.Session.Eviction == EvictBlock) {
		return true, cached, TierHBM
	}
	host, st := w.hostBeyond(s, q, cached), w.storageBeyond(s, q, cached, false)
	if tier := lowestTier(host, st); tier != TierNone {
		return true, cached + host + st, tier
	}
	return false, cached, TierNone
}

// peekCached is what residency would find cached of q's prompt, without
// naming the session's output tail: the match, extended over the tail's
// whole blocks when nameOutput would file them under q's ids.
func (w *Worker) peekCached(q AdmitQuery) int {
	if len(q.Blocks) == 0 {
		return 0
	}
	last := w.lastBlockTokens(q.Input, len(q.Blocks))
	m := w.tree.Match(q.Blocks, last)
	tokens := m.Tokens
	if t := w.tail(q.sessKey()); t != nil {
		bs := w.cfg.BlockSize
		full := t.input / bs
		end := min((t.input+int(t.tokens))/bs, len(q.Blocks))
		if end > full && full > 0 && q.Blocks[full-1] == t.lastWhole && m.Blocks >= full && m.Blocks < end &&
			w.free()+w.evictable() >= int64(end-m.Blocks)*int64(bs) {
			tokens = int64(end) * int64(bs) // nameOutput files every named block whole
		}
	}
	return min(int(tokens), q.Input-1)
}

// residency is Algorithm 2's first question. The session's last output
// becomes blocks of this prompt now, so the match sees it. Resident: the
// session's KV is still held here (pinned, in use, or at block granularity
// whatever of it the cache kept); a session evicted at session granularity
// is not, whatever shared prefix still matches.
func (w *Worker) residency(now float64, s *dSession, q AdmitQuery) (resident bool, cached int) {
	w.nameOutput(now, &Request{Session: q.Session, SessionNum: q.SessionNum, Blocks: q.Blocks, Input: q.Input})
	if len(q.Blocks) > 0 {
		m := w.tree.Match(q.Blocks, w.lastBlockTokens(q.Input, len(q.Blocks)))
		cached = min(int(m.Tokens), q.Input-1)
	}
	resident = s != nil && cached > 0 && (s.pinned || s.inflight > 0 || w.cfg.Session.Eviction == EvictBlock)
	return resident, cached
}
