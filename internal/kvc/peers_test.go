package kvc

import "testing"

func conditional(cached map[int]int) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: MechConditional, Policy: PolicyKVAware, Options: Options{Alpha: 1}, BlockSize: 64,
		DecodeKVBlocks: 1000, Breaker: BreakerConfig{}, Peer: PeerConfig{Strategy: StrategyISL, EffISLThreshold: 2048, EffISLRatio: 0.7,
			PrefillBusy: 4, PrefillBatchTokens: 8192,
			DecodeCached: func(d int, _ string, _ int64, _ []uint64, _ int) int { return cached[d] }}},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// Dynamo's decode-route cost picks the decoder whose events show the
// prefix (cost 100 + 102 − 100 blocks there, 102 + 102 on the other), and
// isl_bounding keeps the 128-token remainder local; load moves the choice:
// with 150 blocks in flight on d1 the cold decoder costs less, and the same
// request, uncached there, goes through P.
func TestConditionalCostAndLoad(t *testing.T) {
	blocks := make([]uint64, 102)
	x := conditional(map[int]int{1: 6400})
	d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: blocks, Input: 6528, Output: 10})
	if a := d.Action(); a.Kind != ActLocal || a.D != 1 || d.Mode() != ModeCondLocal {
		t.Fatalf("action %+v mode %s, want local prefill on d1", a, d.Mode())
	}
	d.Accepted()
	if pt, db := x.ActiveLoad(); pt != 0 || db != 103+2 {
		t.Fatalf("active load %d prefill tokens, %d blocks; want 0 and 103 decode + 2 local prefill blocks", pt, db)
	}
	busy := x.Begin(0, Request{Session: "u", Turn: 1, Blocks: make([]uint64, 150), Input: 9600, Output: 1})
	if a := busy.Action(); a.Kind != ActPD || a.D != 0 {
		t.Fatalf("a cold 9,600-token prompt: %+v, want PD to the idle d0", a)
	}
	busy.Accepted()
	d.PrefillDone()
	d.Finished(true)
	busy.PrefillDone()
	busy.Finished(true)
	if pt, db := x.ActiveLoad(); pt != 0 || db != 0 {
		t.Fatalf("after both ended: %d prefill tokens, %d blocks still active", pt, db)
	}
	x.dActive[1] = 150
	d = x.Begin(0, Request{Session: "s", Turn: 3, Blocks: blocks, Input: 6528, Output: 10})
	if a := d.Action(); a.Kind != ActPD || a.D != 0 {
		t.Fatalf("d1 loaded: %+v, want PD to d0", a)
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range []string{"isl_bounding", "prefill_load", "isl_or_load"} {
		if _, err := ParseStrategy(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseStrategy("round_robin"); err == nil {
		t.Error("round_robin accepted")
	}
}

// Session affinity (off by default): a session bound to d1 stays there
// within the TTL although the cost prefers d0, the binding lapses after
// the TTL, and a failure drops it at once.
func TestConditionalSessionAffinity(t *testing.T) {
	blocks := make([]uint64, 10)
	x := conditional(map[int]int{})
	x.cfg.Peer.AffinityTTLS = 60
	x.dActive[0] = 500 // d0 busy: the first request goes to d1
	first := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks, Input: 640, Output: 1})
	if first.Action().D != 1 {
		t.Fatalf("first request on %d, want the idle d1", first.Action().D)
	}
	first.Accepted()
	first.Finished(true)
	x.dActive[0], x.dActive[1] = 0, 500 // now d1 is the busy one
	for _, c := range []struct {
		now  float64
		want int
	}{{30, 1}, {30 + 61, 0}} {
		d := x.Begin(c.now, Request{Session: "s", Turn: 2, Blocks: blocks, Input: 640, Output: 1})
		if d.Action().D != c.want {
			t.Fatalf("at %v s: decoder %d, want %d (path %v)", c.now, d.Action().D, c.want, d.Path())
		}
		d.Accepted()
		if c.want == 0 {
			d.Finished(false) // a failure on d0 drops the new binding
		} else {
			d.Finished(true)
		}
	}
	x.dActive[0], x.dActive[1] = 500, 0
	if d := x.Begin(100, Request{Session: "s", Turn: 3, Blocks: blocks, Input: 640, Output: 1}); d.Action().D != 1 {
		t.Fatalf("after a failure on d0 the session went to %d, want the cheaper d1", d.Action().D)
	}
}
