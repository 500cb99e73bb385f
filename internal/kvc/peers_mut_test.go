package kvc

import "testing"

// pd-conditional's decisions at their bounds (peers.go), every figure by
// hand: block size 64, Dynamo's defaults (eff_isl < 2,048 and < 0.7 of the
// prompt; busy above 4 × 8,192 = 32,768 active prefill tokens), 1,000
// decode blocks per decoder, cached tokens as d0's KV events report them.
func TestConditionalBoundsByHand(t *testing.T) {
	for _, c := range []struct {
		name       string
		strategy   Strategy
		input, out int
		cachedD0   int     // tokens d0 reports holding
		pActive    int     // p0's active prefill tokens
		decodeBusy float64 // the decode-busy gate's share (0: off)
		dActive    int     // d0's active decode blocks (d1 has 1,000)
		want       ActionKind
	}{
		// eff_isl 10,240 − 128×64 = 2,048: not under 2,048.
		{"eff_isl at 2,048", StrategyISL, 10240, 10, 8192, 0, 0, 0, ActPD},
		{"eff_isl 2,047", StrategyISL, 10239, 10, 8192, 0, 0, 0, ActLocal},
		// 448 of 640 is exactly 0.7: not under it; 384 of 640 is.
		{"ratio at 0.7", StrategyISL, 640, 10, 192, 0, 0, 0, ActPD},
		{"ratio 0.6", StrategyISL, 640, 10, 256, 0, 0, 0, ActLocal},
		{"p0 at 32,768: not busy", StrategyLoad, 6400, 10, 0, 32768, 0, 0, ActPD},
		{"p0 at 32,769: busy", StrategyLoad, 6400, 10, 0, 32769, 0, 0, ActLocal},
		{"p0 at 100: not busy", StrategyLoad, 6400, 10, 0, 100, 0, 0, ActPD},
		// The gate at 0.5 × 1,000 = 500 blocks: the request takes
		// (640+64+63)/64 = 11; 489 + 11 = 500 is not above it, 490 + 11 is.
		{"decode gate at 500", StrategyISL, 640, 64, 576, 0, 0.5, 489, ActLocal},
		{"decode gate at 501", StrategyISL, 640, 64, 576, 0, 0.5, 490, ActPD},
		{"decode gate at 500 (isl_or_load)", StrategyISLLoad, 640, 64, 576, 0, 0.5, 489, ActLocal},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := conditional(map[int]int{0: c.cachedD0})
			x.cfg.Peer.Strategy, x.cfg.Peer.DecodeBusy = c.strategy, c.decodeBusy
			x.pActive[0], x.dActive[0], x.dActive[1] = c.pActive, c.dActive, 1000
			d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: hashes(0, (c.input+63)/64), Input: c.input, Output: c.out})
			if a := d.Action(); a.Kind != c.want || a.D != 0 {
				t.Errorf("action %+v, want %v on d0; path %v", a, c.want, d.Path())
			}
		})
	}
}

// What a conditional request adds to the load books when accepted: local
// on d0, (640+64+63)/64 = 11 decode blocks and (64+63)/64 = 1 local prefill
// block; through P, the prompt less the 2 blocks p0 is believed to hold:
// 10,240 − 128 = 10,112 prefill tokens, and (10,240+10+63)/64 = 161 blocks.
func TestConditionalLoadBooksByHand(t *testing.T) {
	x := conditional(map[int]int{0: 576})
	d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: hashes(0, 10), Input: 640, Output: 64})
	if d.Action().Kind != ActLocal {
		t.Fatalf("action %+v, want local; path %v", d.Action(), d.Path())
	}
	d.Accepted()
	if pt, db := x.ActiveLoad(); pt != 0 || x.dActive[0] != 11 || db != 12 {
		t.Fatalf("local: %d prefill tokens, d0 %d decode blocks, %d in all; want 0, 11, 12", pt, x.dActive[0], db)
	}
	d.PrefillDone()
	d.Finished(true)
	blocks := hashes(100, 160)
	x.p.PinTo(0, "other", blocks[:2])
	e := x.Begin(0, Request{Session: "u", Turn: 1, Blocks: blocks, Input: 10240, Output: 10})
	if e.Action().Kind != ActPD || e.Action().P != 0 {
		t.Fatalf("action %+v, want PD through p0; path %v", e.Action(), e.Path())
	}
	e.Accepted()
	if pt, db := x.ActiveLoad(); pt != 10112 || db != 161 {
		t.Fatalf("PD: %d prefill tokens, %d decode blocks; want 10,112 and 161", pt, db)
	}
}

// Dynamo's decode cost, cost = max(prefill + in − overlap, 0) + active + in,
// for a 64-token prompt (in = 1 block) that d0 holds whole (10 blocks
// reported) and d1 not at all:
//
//	d0 active 2: d0 0+2+1 = 3, d1 1+0+1 = 2 → d1
//	d0 active 1: d0 2, d1 2 → the tie to d0
//	avoiding d0 (nothing on either): d1, though d0 costs 1 to d1's 2
//	avoiding d1, which holds it: d0 (only when every one is avoided do avoided ones count)
//	the router's belief (no KV events): d1 holds the 10 blocks → d1
func TestDynamoCostByHand(t *testing.T) {
	for _, c := range []struct {
		name    string
		cached  map[int]int
		active0 int
		avoid   []int
		belief  bool
		want    int
	}{
		{"d0 active 2", map[int]int{0: 640}, 2, nil, false, 1},
		{"d0 active 1: tie", map[int]int{0: 640}, 1, nil, false, 0},
		{"cold tie", map[int]int{}, 0, nil, false, 0},
		{"avoid d0", map[int]int{0: 640}, 0, []int{0}, false, 1},
		{"avoid d1", map[int]int{1: 640}, 0, []int{1}, false, 0},
		{"router belief", nil, 0, nil, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := conditional(c.cached)
			blocks := hashes(0, 1)
			input := 64
			if c.belief {
				x = peerDispatcher(MechConditional, PeerConfig{Strategy: StrategyISL, EffISLThreshold: 2048, EffISLRatio: 0.7,
					PrefillBusy: 4, PrefillBatchTokens: 8192}, WorkerCaps{})
				blocks, input = hashes(0, 10), 640
				x.d.PinTo(1, "other", blocks)
			}
			x.dActive[0] = c.active0
			d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: blocks, Input: input, Output: 1, Avoid: c.avoid})
			if got := d.Action().D; got != c.want {
				t.Errorf("decoder %d, want d%d; path %v", got, c.want, d.Path())
			}
		})
	}
}

// Session affinity at its bounds: bound to d1 at 100 s with a 60 s TTL,
// the session stays on d1 at 150 s and at 160 s (age exactly the TTL), and
// goes by cost (to d0) at 160.5 s; with the TTL set to 0 (off) it goes by
// cost at once, and a dispatch accepted with it off binds nothing.
func TestConditionalAffinityBounds(t *testing.T) {
	bound := func(ttl float64) *Dispatcher {
		x := conditional(map[int]int{})
		x.cfg.Peer.AffinityTTLS = ttl
		x.dActive[0] = 500
		first := x.Begin(100, Request{Session: "s", Turn: 1, Blocks: hashes(0, 10), Input: 640, Output: 1})
		if first.Action().D != 1 {
			t.Fatalf("first request on d%d, want the idle d1", first.Action().D)
		}
		first.Accepted()
		first.Finished(true)
		x.dActive[0], x.dActive[1] = 0, 500
		return x
	}
	for _, c := range []struct {
		ttl, now float64
		want     int
	}{{60, 150, 1}, {60, 160, 1}, {60, 160.5, 0}} {
		x := bound(c.ttl)
		if d := x.Begin(c.now, Request{Session: "s", Turn: 2, Blocks: hashes(0, 10), Input: 640, Output: 1}); d.Action().D != c.want {
			t.Errorf("TTL %v at %v s: d%d, want d%d; path %v", c.ttl, c.now, d.Action().D, c.want, d.Path())
		}
	}
	x := bound(60)
	x.cfg.Peer.AffinityTTLS = 0
	if d := x.Begin(100, Request{Session: "s", Turn: 2, Blocks: hashes(0, 10), Input: 640, Output: 1}); d.Action().D != 0 {
		t.Errorf("TTL 0: d%d, want d0 by cost; path %v", d.Action().D, d.Path())
	}
	x = bound(0)
	if s := x.sess(SessionKey{ID: "s"}); s != nil && s.bound {
		t.Errorf("TTL 0: the session was bound to d%d", s.boundD)
	}
}
