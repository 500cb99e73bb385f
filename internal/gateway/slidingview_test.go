package gateway

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

func slideChain(ns uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = ns<<32 | uint64(i+1)
	}
	return out
}

// TestGatewaySlidingViewIsTheDecoders: the sliding view serve passes (KVC)
// (--model-config, --max-total-tokens, --swa-full-tokens-ratio: Options'
// Sliding fields) reaches the live decoders' router and not the prefill
// workers' (their pools and what they keep differ). Blocks as tokens, a
// window of 2, a sliding pool of 6, the decoders keeping outputs. Decoder a
// is sent 1–6 of s1, then s2's and s3's 4-block prompts: the pool
// tombstones s1's prompt (an end with a tail below: kept, not forgotten)
// and then s2's. A new session's prompt 1–4 then others overlaps a by 0
// (its plain 4 end on the tombstone) and goes to b, which holds 1–3; the
// prefill router, sent the same, keeps no view: its a overlaps by 4.
func TestGatewaySlidingViewIsTheDecoders(t *testing.T) {
	dc := kvc.Defaults(kvc.MechKVC)
	dc.Policy = kvc.PolicyKVAware
	dc.Options.SlidingRunBlocks, dc.Options.SlidingPoolBlocks, dc.Options.SlidingTails = 2, 6, true
	two := []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	g, err := New(Config{Dispatch: dc, Prefill: []Prefill{{URL: two[0]}, {URL: two[1]}}, Decode: two,
		Health: HealthConfig{Interval: -1}, Ops: Ops{LoadPoll: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	prompt := append(slideChain(1, 4), slideChain(9, 2)...)
	for _, c := range []struct {
		name   string
		r      *kvc.Router
		worker int
		over   int
	}{{"decode", g.disp.DRouter(), 1, 3}, {"prefill", g.disp.PRouter(), 0, 4}} {
		c.r.Dispatched(0, "s1", slideChain(1, 6))
		c.r.Dispatched(0, "s2", slideChain(2, 4))
		c.r.Dispatched(0, "s3", slideChain(3, 4))
		c.r.Dispatched(1, "s4", slideChain(1, 3))
		if d := c.r.Pick("s5", prompt); d.Worker != c.worker || d.Overlap != c.over {
			t.Errorf("%s router: pick %+v, want worker %d with overlap %d", c.name, d, c.worker, c.over)
		}
	}
}
