package kvc

import "testing"

// TestV3WarmFallbackOnP: a session whose turn 1 was seeded through P (its
// 20,000 tokens are over the decoders' budget) comes back with 500 new
// tokens to decoders that lost it: each refuses the 20,500-token append as
// a real large append, over the budget again. Plain PD would prefill the
// 500 tokens on P, which caches the rest, and move all 20,500 tokens' KV to
// a decoder that keeps none of it; v3 serves it whole on P instead, and
// the session's next turn stays there with no admission round trip. A
// session P never saw (turn 1 prefilled on its decoder) still falls back
// to plain PD (turn 2 adds 12,000 tokens to 8,000, over the budget).
func TestV3WarmFallbackOnP(t *testing.T) {
	for _, tc := range []struct {
		input, more int // turn 1's prompt (over the budget: through P), turn 2's new tokens
		want        string
	}{{20000, 500, ModeWholeOnP}, {8000, 12000, "pd-router-fallback-real-large-append"}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true})
		var blocks []uint64
		for i := range tc.input / 1000 {
			blocks = append(blocks, uint64(100+i))
		}
		a := x.Begin(0, Request{Session: "a", Turn: 1, Blocks: blocks, Input: tc.input, Output: 10})
		a.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		a.Accepted()
		a.PrefillDone()
		a.Finished(true)
		b := x.Begin(0, Request{Session: "a", Turn: 2, Blocks: append(blocks, 900), Input: tc.input + tc.more, Output: 10})
		for i := 0; i < 3 && b.Action().Kind == ActAdmit; i++ {
			b.Reply(AdmitReply{Reason: "real-large-append"})
		}
		if b.Mode() != tc.want {
			t.Fatalf("turn 1 of %d tokens: turn 2 %s (%+v), want %s; path %v", tc.input, b.Mode(), b.Action(), tc.want, b.Path())
		}
		b.Accepted()
		b.PrefillDone()
		b.Finished(true)
		if tc.want != ModeWholeOnP {
			continue
		}
		c := x.Begin(0, Request{Session: "a", Turn: 3, Blocks: append(blocks, 900, 901), Input: tc.input + tc.more + 1000, Output: 10})
		if act := c.Action(); act.Kind != ActWholeP || act.P != 0 {
			t.Fatalf("turn 3: %+v (%s), want whole on p0 again; path %v", act, c.Mode(), c.Path())
		}
	}
}
