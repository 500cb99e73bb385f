package kvc

// Sub-agents. A coding agent's sub-agent (Claude Code's Task tool, an
// OpenCode child session) has a conversation of its own, so it is a session
// of its own: its own pin, turns, rejects and residency. But it usually
// starts from its parent's system prompt and tools, which the parent's
// decoder holds (and the router's block index believes it holds). So until
// the sub-agent has a decoder of its own, decoder choice treats the
// parent's decoder as the sub-agent's pin: the same small stickiness bonus
// (Options.Alpha) a session's own pin gets. The prefix overlap still wins
// where another decoder holds more of the prompt, the admission RPC can
// still refuse, and once the sub-agent is pinned its own pin rules.

// routeKey is the session whose pin decoder choice honours: the request's
// own, or its parent's while the request's session is pinned nowhere.
// The parent is named by id alone: only the gateway, which numbers no
// session, sets it.
func (t *Dispatch) routeKey() SessionKey {
	s, p := t.r.key(), SessionKey{ID: t.r.Parent}
	if p.ID == "" || p.ID == s.ID || s.ID == "" {
		return s
	}
	if _, ok := t.x.d.PinKey(s); ok {
		return s
	}
	if _, ok := t.x.d.PinKey(p); ok {
		return p
	}
	return s
}
