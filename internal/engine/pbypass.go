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

// bypassAhead plans, on a prefill worker with PrefillBypassAhead, a step of
// the waiting turns of the sessions it serves whole (Full requests) that fit
// the bypass room, alone, before the long prompt's next chunk: such a turn's
// first token then comes after the step in progress and its own short step,
// not after a whole chunk step of the long prompt at its context (a second
// at 100K tokens). The prompts the worker prefills for decoders
// (PrefillOnly) are not taken ahead: they ride in the chunk steps (bypass),
// as on a decoder. It reports whether it planned such a step, and never
// plans two in a row, so the long prompt gets at least every other step
// however many turns arrive. Shortest-first workers only (the v3/v4
// presets): in arrival order there is no short class to take.
func (w *Worker) bypassAhead(now float64) bool {
	ran := w.aheadRan
	w.aheadRan = false
	if !w.cfg.PrefillBypassAhead || !w.cfg.ShortestFirst || w.chunked == nil || ran || w.bypassRoom() <= 0 {
		return false
	}
	w.bypassHeap(now, true)
	w.aheadRan = len(w.plan.chunks) > 0
	return w.aheadRan
}
