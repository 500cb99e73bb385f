package kvc

import (
	"slices"
	"testing"
)

// TestV4StayClassByHand: v4's stay on P by size class (v4stay.go), one P
// and two decoders, block size 1,000. Two new sessions' first turns go
// through p0 as seeds: a long prompt L of 100,000 tokens and a short S of
// 4,096 (P queues 104,096). Session h, hosted on p0, sends a turn of 2,000
// tokens p0 caches none of; the decoders have 3,500 and 6,000 tokens
// queued, so the least-loaded one would queue 3,500 + 2,000 = 5,500.
//   - One queue (class 0, v3's rule): p0's 104,096 + 2,000 > 5,500: h
//     leaves P.
//   - Class 4,096: S is in it (4,096 ≤ 4,096), L is not; the turn is (2,000
//     ≤ 4,096) and reads 4,096 + 2,000 = 6,096 > 5,500: it leaves too.
//   - Class 4,095: S is out of it; the turn reads 0 + 2,000 ≤ 5,500: it
//     stays whole on p0.
//   - Class 2,000: the turn is at the class's bound, in it (S is not):
//     it stays. Class 1,999: the turn itself is over the class and reads
//     the whole queue: it leaves.
//   - Class 4,095, v4 off (no TPOT SLO): v3's rule, it leaves.
//
// When L's and S's prefills are done the class's count is back at 0.
func TestV4StayClassByHand(t *testing.T) {
	for _, c := range []struct {
		name  string
		class int
		slo   float64
		want  ActionKind
		short int // the class's count with L and S queued
	}{
		{"one queue", 0, 0.012, ActAdmit, 0},
		{"class 4096, S in it", 4096, 0.012, ActAdmit, 4096},
		{"class 4095, S out of it", 4095, 0.012, ActWholeP, 0},
		{"class 2000, the turn at it", 2000, 0.012, ActWholeP, 0},
		{"class 1999, the turn over it", 1999, 0.012, ActAdmit, 0},
		{"v4 off", 4095, 0, ActAdmit, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			iso := DecodeIsolation{TPOTSLOS: c.slo, OutputTokens: 101, StayClassTokens: c.class, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}}
			x := v3Dispatcher(V3Config{LocalFallback: true, WholeOnP: true, Isolation: iso})
			var seeds []*Dispatch
			for i, in := range []int{100000, 4096} {
				blk := uint64(1000 * (i + 1))
				d := x.Begin(0, Request{Session: []string{"L", "S"}[i], Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: in, Output: 101})
				d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
				if d.Action().Kind != ActSeed {
					t.Fatalf("first turn of %d tokens: %v (%s), want a seed through p0; path %v", in, d.Action().Kind, d.Mode(), d.Path())
				}
				d.Accepted()
				seeds = append(seeds, d)
			}
			if x.load.p[0] != 104096 || x.load.short[0] != c.short {
				t.Fatalf("p0 queues %d, its short class %d; want 104096 and %d", x.load.p[0], x.load.short[0], c.short)
			}
			s := x.session(SessionKey{ID: "h"})
			s.seen = true
			x.setOnP(s, 1)
			copy(x.load.d, []int{3500, 6000})
			d := x.Begin(0, Request{Session: "h", Turn: 3, Blocks: []uint64{50, 51}, Input: 2000, Output: 10})
			if got := d.Action().Kind; got != c.want {
				t.Fatalf("h's turn: %v (%s), want %v; path %v", got, d.Mode(), c.want, d.Path())
			}
			for _, sd := range seeds {
				sd.PrefillDone()
			}
			if !slices.Equal(x.load.short, []int{0}) || x.load.p[0] != 0 {
				t.Fatalf("after the prefills: p0 %d, its class %v; want 0 and [0]", x.load.p[0], x.load.short)
			}
		})
	}
}
