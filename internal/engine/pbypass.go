package engine

// A prefill worker's bypass (Config.PrefillBypassTokens). A prefill worker
// that serves sessions whole (KVC v3/v4's whole-on-P hosting) prefills two
// kinds of prompt from one queue: its hosted sessions' turns, most of a few
// hundred to a few thousand new tokens, and the long prompts the router
// sends through it as plain PD (turn-1 seeds and reseeds of 100K–260K
// tokens, which v4's stall budgets hold off the decoders). Shortest-first
// admission already puts the short turn ahead of the long prompts that
// wait, but not ahead of the one being chunked: that one holds every
// step's budget until it is done (SGLang's order), tens of seconds. The
// decoders' bypass (SessionConfig.BypassTokens) lets a short prompt ride in
// the step that continues the long one; this gives prefill workers the
// same, with a room of their own, so the short size class never waits
// behind the long one's remaining chunks.

// bypassRoom is the most uncached tokens a waiting request may have to
// ride in a step that continues a long chunked prefill (bypass): a
// session-aware decoder's SessionConfig.BypassTokens, or a prefill
// worker's PrefillBypassTokens; 0 = none.
func (w *Worker) bypassRoom() int {
	switch {
	case w.cfg.Session.Enabled:
		return w.cfg.Session.BypassTokens
	case w.cfg.Role == RolePrefill:
		return w.cfg.PrefillBypassTokens
	}
	return 0
}
