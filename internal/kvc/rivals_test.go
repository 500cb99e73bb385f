package kvc

import "testing"

// rival builds a rival's dispatcher on 1 prefill worker and nd decoders,
// 64-token blocks, with a cost model in powers of two so the rules' sums
// are exact: 1,024 prefill tokens a second, no attention term.
func rival(m Mechanism, nd int, rc RivalConfig) *Dispatcher {
	names := []string{"d0", "d1", "d2"}[:nd]
	return NewDispatcher(DispatchConfig{Mechanism: m, Policy: PolicyKVAware, Options: Options{Alpha: 1}, BlockSize: 64,
		DecodeKVBlocks: 1000, Peer: PeerConfig{Rival: rc}}, []string{"p0"}, names, Options{Alpha: 1}, Options{Alpha: 1})
}

func seqBlocks(from, n int) []uint64 {
	b := make([]uint64, n)
	for i := range b {
		b[i] = uint64(from + i + 1)
	}
	return b
}

// PPD, hand-computed: turn 1 (the decoder holds none of it) goes through
// P. Turn 2 appends 640 tokens to the 6,400 the decoder and P both hold;
// its stall is 640/1024 = 0.625 s, spread over a 129-token decode against
// a 62.5 ms TPOT SLO: harm 0.625/128/0.0625 = 0.078125. Via P it waits
// for P's active prefill tokens q, then the same 0.625 s: gain
// (q/1024)/2 s of TTFT SLO. So q = 160 is the boundary (gain = harm: on
// D), q = 159 goes through P, and with no batch decoding on D any gain
// keeps it local.
func TestPPDRuleByHand(t *testing.T) {
	rc := RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.0625, TTFTWeight: 1, TPOTWeight: 1, Cost: StallCost{PerTokenS: 1.0 / 1024}}
	x := rival(MechPPD, 1, rc)
	t1 := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 100), Input: 6400, Output: 129})
	if a := t1.Action(); a.Kind != ActPD || t1.Mode() != ModePPDTurn1 {
		t.Fatalf("turn 1: %+v %s, want PD as %s", a, t1.Mode(), ModePPDTurn1)
	}
	t1.Accepted()
	t1.PrefillDone()
	t1.Finished(true)
	// A first turn whose prompt the decoder holds (a prefix shared with
	// another session) is still turn 1.
	if d := x.Begin(5, Request{Session: "u", Turn: 1, Blocks: seqBlocks(0, 110), Input: 7040, Output: 129}); d.Mode() != ModePPDTurn1 {
		t.Fatalf("a turn 1 sharing a cached prefix: %s, want %s", d.Mode(), ModePPDTurn1)
	}
	turn2 := func(q, batch int) Dispatch {
		x.pActive[0], x.dActive[0] = q, batch
		d := x.Begin(10, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, 110), Input: 7040, Output: 129})
		return *d
	}
	for _, c := range []struct {
		q, batch int
		want     string
	}{{160, 50, ModePPDLocal}, {159, 50, ModePPDPD}, {1, 0, ModePPDLocal}, {0, 0, ModePPDPD}} {
		d := turn2(c.q, c.batch)
		if d.Mode() != c.want {
			t.Errorf("P queue %d tokens, D batch %d blocks: %s, want %s (path %v)", c.q, c.batch, d.Mode(), c.want, d.Path())
		}
	}
	// The weights move the boundary: TTFT weighted 2 halves the queue needed.
	x.cfg.Peer.Rival.TTFTWeight = 2
	if d := turn2(80, 50); d.Mode() != ModePPDLocal {
		t.Errorf("TTFT weight 2, queue 80: %s, want local", d.Mode())
	}
	if d := turn2(79, 50); d.Mode() != ModePPDPD {
		t.Errorf("TTFT weight 2, queue 79: %s, want through P", d.Mode())
	}
}

// Prefill deflection, hand-computed: a step costs 1/64 s overhead plus
// 1/1024 s a token, so a 62.5 ms TBT SLO fits chunks of 48 tokens. A cold
// 1,024-token prompt via an idle P: 1/64 + 1 = 1.015625 s, within the 2 s
// TTFT SLO: through P. With q tokens queued on P it is 1/64 + q/1024 +
// 1.015625 s: q = 992 is exactly 2 s (through P), q = 993 is over and is
// deflected: 22 chunks of ≤ 48 tokens, 1.375 s, on the decoder with the
// least local prefill queued (d0 with 640 tokens queued would take
// ceil(1664/48) = 35 steps, 2.1875 s; d1 none). A TBT SLO of 20 ms fits
// no 16-token chunk: nothing is deflected.
func TestDeflectRuleByHand(t *testing.T) {
	rc := RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.0625, Cost: StallCost{OverheadS: 1.0 / 64, PerTokenS: 1.0 / 1024, ChunkTokens: 8192}}
	x := rival(MechDeflect, 2, rc)
	if c := x.cfg.Peer.Rival.deflectChunk(1024); c != 48 {
		t.Fatalf("chunk %d, want 48", c)
	}
	n := 0
	req := func(q, dq int) Dispatch {
		n++
		x.pActive[0], x.dPrefill[0] = q, dq
		d := x.Begin(0, Request{Session: "", Turn: 1, Blocks: seqBlocks(1000*n, 16), Input: 1024, Output: 10})
		return *d
	}
	for _, c := range []struct {
		q, dq int
		mode  string
		d     int
	}{{0, 0, ModeDeflectPD, -1}, {992, 0, ModeDeflectPD, -1}, {993, 0, ModeDeflectD, 0}, {993, 10, ModeDeflectD, 1}} {
		d := req(c.q, c.dq)
		if d.Mode() != c.mode || c.d >= 0 && d.Action().D != c.d {
			t.Errorf("P queue %d, d0 queue %d blocks: %s on d%d, want %s (d%d); path %v", c.q, c.dq, d.Mode(), d.Action().D, c.mode, c.d, d.Path())
		}
	}
	x.cfg.Peer.Rival.TPOTSLOS = 0.02
	if d := req(4096, 0); d.Mode() != ModeDeflectPD {
		t.Errorf("TBT 20 ms: %s, want through P (no chunk fits)", d.Mode())
	}
}

// The rivals' helpers by hand, in powers of two so every sum is exact.
func TestRivalHelpersByHand(t *testing.T) {
	for _, c := range []struct {
		in, want RivalConfig
	}{
		{RivalConfig{}, RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.05, TTFTWeight: 1, TPOTWeight: 1}},
		{RivalConfig{TTFTSLOS: -1, TPOTSLOS: -1}, RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.05, TTFTWeight: 1, TPOTWeight: 1}},
		{RivalConfig{TTFTSLOS: 0.5, TPOTSLOS: 0.25, TTFTWeight: 0, TPOTWeight: 2}, RivalConfig{TTFTSLOS: 0.5, TPOTSLOS: 0.25, TTFTWeight: 0, TPOTWeight: 2}},
		{RivalConfig{TTFTWeight: 3}, RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.05, TTFTWeight: 3}},
	} {
		if got := c.in.Defaults(); got != c.want {
			t.Errorf("Defaults(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	// queueS: 0.25 s a chunk, 1/1024 s a token.
	for _, c := range []struct {
		chunk, n int
		want     float64
	}{{0, 0, 0}, {0, 1024, 1.25}, {4096, 4096, 4.25}, {4096, 4097, 0.5 + 4097.0/1024}, {1024, 2048, 2.5}} {
		if got := (StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024, ChunkTokens: c.chunk}).queueS(c.n); got != c.want {
			t.Errorf("queueS(%d) in %d-token chunks = %v, want %v", c.n, c.chunk, got, c.want)
		}
	}
	// deflectChunk: a step of n tokens takes 0.25 + n/1024 s; a TBT of
	// 2.25 s fits 2,048 tokens, the chunk budget caps it, and a TBT under
	// a 16-token step fits none.
	rc := RivalConfig{TPOTSLOS: 2.25, Cost: StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024}}
	if got := rc.deflectChunk(0); got != 2048 {
		t.Errorf("deflectChunk, no chunk budget: %d, want 2048", got)
	}
	rc.Cost.ChunkTokens = 1000
	if got := rc.deflectChunk(0); got != 1000 {
		t.Errorf("deflectChunk, 1,000-token budget: %d, want 1000", got)
	}
	rc.Cost.ChunkTokens = 0
	for _, c := range []struct {
		n, q  int
		steps int
	}{{4096, 0, 2}, {4097, 0, 3}, {3000, 1000, 2}, {1, 0, 1}} {
		if got, ok := rc.deflectTTFT(c.n, 0, c.q); !ok || got != float64(c.steps)*2.25 {
			t.Errorf("deflectTTFT(%d after a %d-token queue) = %v %v, want %d steps of 2.25 s", c.n, c.q, got, ok, c.steps)
		}
	}
	// With attention, 1/2^20 s per token pair: a 1.75 s TBT fits 1,024
	// tokens after none (0.25 + 1 + 1024·512/2^20), 661 after 1,024 (662
	// would take 1.75195 s), and a deflection's chunk is sized at the end
	// of what it prefills, its queue included: 1,024 tokens after none, or
	// 512 behind a 512-token queue, are two 661-token steps.
	attn := RivalConfig{TPOTSLOS: 1.75, Cost: StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024, AttnS: 1.0 / (1 << 20)}}
	if a, b := attn.deflectChunk(0), attn.deflectChunk(1024); a != 1024 || b != 661 {
		t.Errorf("deflectChunk with attention: %d after 0, %d after 1,024; want 1024 and 661", a, b)
	}
	for _, c := range [][2]int{{1024, 0}, {512, 512}} {
		if got, ok := attn.deflectTTFT(c[0], 0, c[1]); !ok || got != 3.5 {
			t.Errorf("deflectTTFT(%d after a %d-token queue) with attention = %v %v, want two 1.75 s steps", c[0], c[1], got, ok)
		}
	}
	tight := RivalConfig{TPOTSLOS: 0.25 + 15.0/1024, Cost: rc.Cost}
	if got := tight.deflectChunk(0); got != 0 {
		t.Errorf("a TBT fitting 15 tokens a step: chunk %d, want 0", got)
	}
	if _, ok := tight.deflectTTFT(100, 0, 0); ok {
		t.Error("a TBT fitting 15 tokens a step: deflectTTFT ok, want no deflection")
	}
}
