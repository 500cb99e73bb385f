package engine

// IdlePinned is the sessions pinned on this session-aware decoder with no
// request of theirs here — what a trim of idle sessions may evict — and the
// sum of the tokens each last held here (prompt and output of its last
// request), for checking a router's belief of the pool against the pool
// (kvc's pin book). Blocks two sessions share count in both. It walks every
// session record: for tests and reports, not for a scheduler's loop.
func (w *Worker) IdlePinned() (sessions int, tokens int64) {
	w.dsess.Each(func(s *dSession) {
		if s.pinned && s.inflight == 0 {
			sessions++
			tokens += s.tokens
		}
	})
	return sessions, tokens
}
