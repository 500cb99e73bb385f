package engine

// Prefill priority eviction (the seed's --kvcache-prefill-priority-eviction).
// The seed's router gave each prefill request a priority from the decoders'
// residency (_prefill_priority_for_router_request(decode_residency), with
// prefill_priority and decode_priority counted per run) for SGLang's
// priority-aware radix eviction; its code for the rule is not in the seed.
// The rule here: a seed's or reseed's prompt, which a decoder keeps as the
// session's residency, is low priority in the prefill worker's cache — the
// session's next turns go direct to that decoder, so P's copy matters only
// if the decoder loses it — while plain-PD prompts (naive PD, KVC fallbacks)
// keep normal priority, because their session comes back through P. Low
// priority KV is evicted before any other, least recently used first.

// demoteAge is how far back in the LRU order low-priority KV goes: more
// than any run's length, so it always goes first.
const demoteAge = 1e9

// demote moves a finished low-priority request's path back in the LRU order.
func (w *Worker) demote(r *Request) {
	if w.cfg.PriorityEviction && r.LowPriority && w.tree != nil {
		w.tree.Demote(r.node, demoteAge)
	}
}
