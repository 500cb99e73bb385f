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
