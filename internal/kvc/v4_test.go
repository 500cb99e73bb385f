package kvc

import (
	"fmt"
	"math"
	"testing"
)

// TestStallCostByHand: 10,000 tokens after 2,000 cached in 4,096-token
// chunks are 3 steps of 10 ms overhead, 10,000·10 µs of work and
// 1 ns·10,000·(2,000 + 5,000) of attention: 0.03 + 0.1 + 0.07 = 0.2 s. At a
// TPOT of 12 ms over 4 ms steps a bucket for 101-token decodes holds
// 0.008·100 = 0.8 s and refills at 0.008/0.012 = 2/3 s a second; the
// largest cold prompt it holds, 8 chunks + 10 µs·n + 0.5 ns·n² ≤ 0.8 s, is
// 29,242 tokens (v3's budget in tokens re-derived from the SLO).
func TestStallCostByHand(t *testing.T) {
	c := DecodeIsolation{TPOTSLOS: 0.012, Cost: StallCost{OverheadS: 0.01, PerTokenS: 1e-5, AttnS: 1e-9, ChunkTokens: 4096, DecodeStepS: 0.004}}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"PrefillS(10000, 2000)", c.Cost.PrefillS(10000, 2000), 0.2},
		{"PrefillS(0, 5)", c.Cost.PrefillS(0, 5), 0},
		{"CapS(101)", c.CapS(101), 0.8},
		{"RateS", c.RateS(), 2.0 / 3},
		{"DerivedBudgetTokens(101)", float64(c.DerivedBudgetTokens(101)), 29242},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if n := (DecodeIsolation{TPOTSLOS: 0.003, Cost: c.Cost}).DerivedBudgetTokens(101); n != 0 {
		t.Errorf("a TPOT under the decode step leaves no budget, got %d tokens", n)
	}
}

// TestV4BudgetByHand: one P, one decoder, v3's token budget out of the way
// (16M tokens, margin −16M favouring the decoder), decode isolation at a
// TPOT of 12 ms over 2 ms steps for 101-token decodes: the decoder's bucket
// holds 0.010·100 = 1 s and refills at 0.010/0.012 = 5/6 s a second; a
// prefill costs 100 µs a token (no overhead, no attention). By hand:
//
//	t=0    a 8,000: nothing on d0 → local, free                  (level 1.0)
//	t=0    b 9,000: a decodes there; 0.9 ≤ 1.0 → local            (0.1)
//	t=0.3  c 3,000: 0.1 + 0.3·5/6 = 0.35 ≥ 0.3 → local            (0.05)
//	t=0.3  e 3,000: 0.05 < 0.3 → through P                        (0.05)
//	t=0.62 f 3,000: 0.05 + 0.32·5/6 = 0.3167 ≥ 0.3 → local        (0.0167)
//
// Stall drawn 0.9 + 0.3 + 0.3 = 1.5 s; one placement held. With the SLO
// off (v3) every one of them is local.
func TestV4BudgetByHand(t *testing.T) {
	for _, slo := range []float64{0.012, 0} {
		v3 := V3Config{DBudgetTokens: 1 << 24, Margin: -(1 << 24),
			Isolation: DecodeIsolation{TPOTSLOS: slo, OutputTokens: 101, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}}}
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			BlockSize: 1000, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		for i, st := range []struct {
			s     string
			now   float64
			input int
			local bool
		}{{"a", 0, 8000, true}, {"b", 0, 9000, true}, {"c", 0.3, 3000, true}, {"e", 0.3, 3000, false}, {"f", 0.62, 3000, true}} {
			blk := uint64(100 * (i + 1))
			d := x.Begin(st.now, Request{Session: st.s, Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: st.input, Output: 101})
			d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
			d.Accepted()
			local := d.kind == ActDirect && d.Mode() == ModeLocalSeed
			if want := st.local || slo == 0; local != want {
				t.Fatalf("slo %v, %s at %v: %v (%s), want local %v; path %v", slo, st.s, st.now, d.kind, d.Mode(), want, d.Path())
			}
		}
		drawn, held := x.V4Stall()
		if slo == 0 {
			drawn, held = 1.5, 1 // v4 off keeps no books
		}
		if math.Abs(drawn-1.5) > 1e-9 || held != 1 {
			t.Fatalf("slo %v: stall drawn %v s, held %d; want 1.5 s and 1", slo, drawn, held)
		}
		if slo > 0 {
			if lv := x.v4Level(x.v4Bucket(false, 0), 0.62); math.Abs(lv-(0.05+0.32*5.0/6-0.3)) > 1e-9 {
				t.Fatalf("d0's level %v at 0.62 s, want %v", lv, 0.05+0.32*5.0/6-0.3)
			}
		}
	}
}

// TestV4TTFTEscapeByHand: TestV4BudgetByHand's world with a TTFT SLO of
// 1 s. a (8,000 tokens) and b (9,000) are local seeds on d0 and end their
// prefills there, leaving its bucket at 0.1 s. c (3,000) is over that
// bucket (0.3 s) and goes through P: 0.3 s there meets the SLO. e (9,000)
// is over the bucket too (0.9 s); through P it would wait behind c's 3,000
// tokens (0.3 s) and take 0.9 s, 1.2 s, over the SLO, while on d0, whose
// queue is empty, it takes 0.9 s: it runs there, drawing the bucket to
// −0.8 s, and ends there. f (3,000) goes through P (0.3 + 0.3 s). g
// (12,000) through P would take 0.6 + 1.2 = 1.8 s, over the SLO; on d0 it
// would take 1.2 s, less, but over the SLO too: it stays held (through P).
// Without the SLO e goes through P as well.
func TestV4TTFTEscapeByHand(t *testing.T) {
	for _, slo := range []float64{1, 0} {
		iso := DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: slo, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}}
		x := playEscapeWorld(t, fmt.Sprintf("ttft slo %v", slo), iso, []escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true},
			{"c", 3000, false, false}, {"e", 9000, slo > 0, true}, {"f", 3000, false, false}, {"g", 12000, false, false}})
		if want := map[float64]float64{1: -0.8, 0: 0.1}[slo]; math.Abs(x.v4Level(x.v4Bucket(false, 0), 0)-want) > 1e-9 {
			t.Fatalf("ttft slo %v: d0's level %v, want %v", slo, x.v4Level(x.v4Bucket(false, 0), 0), want)
		}
	}
}

// escapeTurn is one first turn of the TTFT-escape world: its session, its
// prompt's tokens, whether it must be a local seed on d0, and whether its
// prefill ends before the next arrives.
type escapeTurn struct {
	s     string
	input int
	local bool
	done  bool
}

// playEscapeWorld builds the one-P, one-D dispatcher of the TTFT-escape
// tests with iso and plays the turns in order, each admitted by d0 as a
// session not resident, failing when a turn's placement is not its want.
func playEscapeWorld(t *testing.T, name string, iso DecodeIsolation, turns []escapeTurn) *Dispatcher {
	t.Helper()
	v3 := V3Config{DBudgetTokens: 1 << 24, Margin: -(1 << 24), Isolation: iso}
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	for i, st := range turns {
		blk := uint64(100 * (i + 1))
		d := x.Begin(0, Request{Session: st.s, Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: st.input, Output: 101})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		d.Accepted()
		if local := d.kind == ActDirect && d.Mode() == ModeLocalSeed; local != st.local {
			t.Fatalf("%s, %s: %v (%s), want local %v; path %v", name, st.s, d.kind, d.Mode(), st.local, d.Path())
		}
		if st.done {
			d.PrefillDone()
		}
	}
	return x
}

// TestV4LongPrefillByHand: TestV4TTFTEscapeByHand's world with
// LongPrefillS. g (12,000 tokens) misses the 1 s SLO both ways, 1.8 s
// through P and 1.2 s on d0, and its own prefill would hold P 1.2 s. At
// 1 s that is over the bound and d0 is no later: g runs there; at 1.5 s
// and with the rule off it stays held. h, 12,000 tokens more, stays held
// at every bound: at 1 s d0 (2.4 s, behind g) would be later than P
// (1.8 s). Every other placement is TestV4TTFTEscapeByHand's.
func TestV4LongPrefillByHand(t *testing.T) {
	for _, long := range []float64{0, 1, 1.5} {
		iso := DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: 1, LongPrefillS: long, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}}
		playEscapeWorld(t, fmt.Sprintf("long prefill %v", long), iso, []escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true},
			{"c", 3000, false, false}, {"e", 9000, true, true}, {"f", 3000, false, false}, {"g", 12000, long == 1, false},
			{"h", 12000, false, false}})
	}
}

// TestV4SoonerRatioByHand: TestV4TTFTEscapeByHand's world with
// SoonerRatio. g (12,000 tokens) misses the 1 s SLO both ways: 1.8 s
// through P (behind c's and f's 6,000 tokens, 0.6 s) and 1.2 s on d0.
// At ratio 1.25 d0 is sooner by enough (1.2 × 1.25 = 1.5 ≤ 1.8): g runs
// there; at ratio 2 (2.4 > 1.8) and with the ratio off it stays held.
// Every other placement is TestV4TTFTEscapeByHand's.
func TestV4SoonerRatioByHand(t *testing.T) {
	for _, ratio := range []float64{0, 1.25, 2} {
		iso := DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: 1, SoonerRatio: ratio, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}}
		playEscapeWorld(t, fmt.Sprintf("ratio %v", ratio), iso, []escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true},
			{"c", 3000, false, false}, {"e", 9000, true, true}, {"f", 3000, false, false}, {"g", 12000, ratio == 1.25, false}})
	}
}
