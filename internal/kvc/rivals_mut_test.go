package kvc

import "testing"

// The rivals' accepted requests count decode blocks (dActive) and local
// prefill blocks (dPrefill) on their decoder; the figures by hand, with
// rival()'s cost model (1,024 prefill tokens a second, 64-token blocks).
//
// PPD, turn 2 appends 640 tokens to the 6,400 both P and d0 hold, with no
// batch decoding on d0 (no harm) and one token queued on P (a gain of
// 1/1024 s): local. Its decode blocks are ⌈(7,040 + 128)/64⌉ = 112, its
// local prefill ⌈640/64⌉ = 10.
//
// A turn 2 whose prompt d0 and P hold whole keeps one token to prefill
// (a prefill of nothing makes no first token): via P 1/1024 s after the
// queued token, 1/1024 s on d0 with nothing queued there. One queued
// token on P makes it local, with one block of local prefill. With two
// blocks (128 tokens) of local prefill queued on d0, a queue of 128 on P
// is a tie (through P) and 129 beats it (local).
func TestPPDAcceptedCountsByHand(t *testing.T) {
	rc := RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.0625, TTFTWeight: 1, TPOTWeight: 1, Cost: StallCost{PerTokenS: 1.0 / 1024}}
	x := rival(MechPPD, 1, rc)
	t1 := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 100), Input: 6400, Output: 128})
	t1.Accepted()
	t1.PrefillDone()
	t1.Finished(true)
	if x.dActive[0] != 0 || x.dPrefill[0] != 0 || x.pActive[0] != 0 {
		t.Fatalf("after turn 1: dActive %d dPrefill %d pActive %d, want 0", x.dActive[0], x.dPrefill[0], x.pActive[0])
	}
	turn2 := func(q, dq, blocks, input int) *Dispatch {
		x.pActive[0], x.dActive[0], x.dPrefill[0] = q, 0, dq
		return x.Begin(10, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, blocks), Input: input, Output: 128})
	}
	for _, c := range []struct {
		q    int
		want string
	}{{128, ModePPDPD}, {129, ModePPDLocal}} {
		if d := turn2(c.q, 2, 110, 7040); d.Mode() != c.want {
			t.Errorf("P queue %d, d0 queue 2 blocks: %s, want %s (path %v)", c.q, d.Mode(), c.want, d.Path())
		}
	}
	d := turn2(1, 0, 110, 7040)
	if d.Mode() != ModePPDLocal || d.Action().D != 0 {
		t.Fatalf("append 640: %s on d%d, want %s on d0 (path %v)", d.Mode(), d.Action().D, ModePPDLocal, d.Path())
	}
	d.Accepted()
	if x.dActive[0] != 112 || x.dPrefill[0] != 10 {
		t.Errorf("append 640 accepted: dActive %d dPrefill %d, want 112 and 10", x.dActive[0], x.dPrefill[0])
	}
	d.PrefillDone()
	if x.dPrefill[0] != 0 {
		t.Errorf("after its prefill: dPrefill %d, want 0", x.dPrefill[0])
	}
	d.Finished(true)
	if x.dActive[0] != 0 {
		t.Errorf("after it finished: dActive %d, want 0", x.dActive[0])
	}

	d = turn2(1, 0, 100, 6400)
	if d.Mode() != ModePPDLocal {
		t.Fatalf("whole prompt held, P queue 1: %s, want %s (path %v)", d.Mode(), ModePPDLocal, d.Path())
	}
	d.Accepted()
	if x.dPrefill[0] != 1 || x.dActive[0] != 102 {
		t.Errorf("whole prompt held, accepted: dPrefill %d dActive %d, want 1 and ⌈6528/64⌉ = 102", x.dPrefill[0], x.dActive[0])
	}
	d.Finished(false)

}

// A retry that avoids the session's decoder goes to the kv-aware pick
// among the others, though the avoided one holds the session: turn 1 lands
// on d1 (d0 avoided); turn 2, avoiding d1, finds nothing of it on d0 and
// goes through P as a first turn would, to d0.
func TestPPDRetryAvoidsTheHolder(t *testing.T) {
	rc := RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.0625, TTFTWeight: 1, TPOTWeight: 1, Cost: StallCost{PerTokenS: 1.0 / 1024}}
	x := rival(MechPPD, 2, rc)
	t1 := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 100), Input: 6400, Output: 128, Avoid: []int{0}})
	if t1.Action().D != 1 {
		t.Fatalf("turn 1 avoiding d0: on d%d, want d1", t1.Action().D)
	}
	t1.Accepted()
	t1.PrefillDone()
	t1.Finished(true)
	d := x.Begin(10, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, 110), Input: 7040, Output: 128, Avoid: []int{1}})
	if d.Mode() != ModePPDTurn1 || d.Action().D != 0 {
		t.Errorf("turn 2 avoiding d1: %s on d%d, want %s on d0 (path %v)", d.Mode(), d.Action().D, ModePPDTurn1, d.Path())
	}
}

// Deflection with d0 holding the session's first 1,024 tokens (turn 1
// through P): turn 2's 2,048-token prompt has 1,024 left to prefill, 22
// TBT-bounded chunks of ≤ 48 tokens, 1.375 s; via P, with 1,024 tokens
// queued there and the same 1,024 held, 1/64 + 1 + 1/64 + 1 = 2.03125 s,
// over the 2 s SLO: deflected to d0, 16 blocks of local prefill and
// ⌈(2,048 + 64)/64⌉ = 33 decode blocks. Prefilling the whole 2,048 there
// (43 chunks, 2.6875 s) or 3,072 (4 s) would lose to P.
//
// A turn 2 d0 and P hold whole (1,024 tokens) keeps one token to
// prefill: with 2,048 tokens queued on P (2.046875 s via P) it is one
// chunk, 62.5 ms on d0, one block of local prefill.
func TestDeflectAcceptedCountsByHand(t *testing.T) {
	rc := RivalConfig{TTFTSLOS: 2, TPOTSLOS: 0.0625, Cost: StallCost{OverheadS: 1.0 / 64, PerTokenS: 1.0 / 1024, ChunkTokens: 8192}}
	x := rival(MechDeflect, 1, rc)
	t1 := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 16), Input: 1024, Output: 64})
	if t1.Mode() != ModeDeflectPD {
		t.Fatalf("turn 1: %s, want %s", t1.Mode(), ModeDeflectPD)
	}
	t1.Accepted()
	t1.PrefillDone()
	t1.Finished(true)
	turn2 := func(q, blocks, input int) *Dispatch {
		x.pActive[0], x.dActive[0], x.dPrefill[0] = q, 0, 0
		return x.Begin(10, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, blocks), Input: input, Output: 64})
	}
	d := turn2(1024, 32, 2048)
	if d.Mode() != ModeDeflectD || d.Action().D != 0 {
		t.Fatalf("turn 2: %s on d%d, want %s on d0 (path %v)", d.Mode(), d.Action().D, ModeDeflectD, d.Path())
	}
	d.Accepted()
	if x.dPrefill[0] != 16 || x.dActive[0] != 33 {
		t.Errorf("turn 2 accepted: dPrefill %d dActive %d, want 16 and 33", x.dPrefill[0], x.dActive[0])
	}
	d.Finished(false)
	d = turn2(2048, 16, 1024)
	if d.Mode() != ModeDeflectD {
		t.Fatalf("whole prompt held: %s, want %s (path %v)", d.Mode(), ModeDeflectD, d.Path())
	}
	d.Accepted()
	if x.dPrefill[0] != 1 {
		t.Errorf("whole prompt held, accepted: dPrefill %d, want 1", x.dPrefill[0])
	}
	d.Finished(false)
}
