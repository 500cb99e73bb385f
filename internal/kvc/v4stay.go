package kvc

// v4's stay on P by size class (DecodeIsolation.StayClassTokens). Under v4
// a prefill worker's queue holds two kinds of prompt: its hosted sessions'
// turns, most of a few hundred to a few thousand new tokens, and the long
// prompts the stall budgets hold off the decoders and send through it
// (turn-1 seeds and reseeds of 100K–260K tokens). v3's stay rule
// (v3StayOnP) reads the sum, so a hosted session leaves P whenever a long
// prompt is queued there, though P admits its queue shortest first and
// (with its bypass, engine.Config.PrefillBypassTokens) lets a short prompt
// ride past the one being chunked: a short turn waits only for the short
// prompts ahead of it. With a class bound C, a turn that needs at most C
// tokens on P reads only the tokens queued there by requests that needed
// at most C; a longer turn reads the whole queue, as v3 does.

// stayClass is the size class bound of P's queue (0 = one queue: v3's
// stay).
func (x *Dispatcher) stayClass() int {
	if !x.v4On() {
		return 0
	}
	return x.iso().StayClassTokens
}

// v4QueueShort counts (sign +1) or uncounts (−1) a request's prefill on a
// prefill worker in that worker's short class, when it is in it.
func (t *Dispatch) v4QueueShort(sign int) {
	if c := t.x.stayClass(); c > 0 && t.pQ > 0 && t.pQ <= c {
		t.x.load.short[t.pQAt] += sign * t.pQ
	}
}

// v3StayQueue is the prefill queue a turn served whole on prefill worker p
// would wait in, with what p lacks of its prompt: the short class's when
// the turn is in it, else p's whole queue.
func (t *Dispatch) v3StayQueue(p int) int {
	u := t.pUncached(p)
	if c := t.x.stayClass(); c > 0 && u <= c {
		return t.x.load.short[p] + u
	}
	return t.x.load.p[p] + u
}
