package kvc

import (
	"math"
	"testing"
)

// TestV4LongPrefillAtItsBounds holds the two boundaries of the
// --isolation-long-prefill rule in v4PMissesTTFT (a prefill that misses
// the TTFT SLO both ways runs on d0 when d0 is no later and P's own
// prefill of it is over LongPrefillS). The world is
// TestV4TTFTEscapeByHand's: 1e-4 s a token, no overhead, no attention
// cost, a 1 s TTFT SLO; a (8,000) and b (9,000) are local seeds ending
// their prefills on d0, c (3,000) goes through P, e (9,000) escapes to d0.
//
//   - "at the bound": the bound is 1.2 s, exactly g's own prefill on P
//     (12,000 × 1e-4 = 1.2, binary-equal to the literal). g misses both
//     ways (1.8 s through P behind c's and f's 0.6 s, 1.2 s on d0) and d0
//     is no later, but 1.2 > 1.2 is false: g stays held (through P).
//   - "at equal TTFTs": e's prefill does not end, so d0 queues its 9,000
//     tokens (0.9 s); c, f and f2 (3,000 each) leave 9,000 queued on P
//     (0.9 s; f2 through P: 0.6 + 0.3 = 0.9 s meets the SLO). g then takes
//     0.9 + 1.2 = 2.1 s either way, over the SLO; its P prefill 1.2 s is
//     over the 1 s bound, and d0 at 2.1 s is no later than P's 2.1 s: g
//     runs on d0.
//   - "with attention": a 1e-12 s attention cost per token pair and a
//     1.2001 s bound. g's P prefill has nothing cached on P, so it is
//     12,000 tokens after 0: 1.2 + 1e-12 × 12,000 × (0 + 6,000) =
//     1.200072 s, under the bound: g stays held. (Counted after 24,000
//     cached tokens it would be 1.2 + 1e-12 × 12,000 × 30,000 = 1.20036 s,
//     over.) The attention adds under 1e-4 s to every other figure above,
//     whose margins are 0.1 s or more: every other placement is the same.
func TestV4LongPrefillAtItsBounds(t *testing.T) {
	cost := StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}
	playEscapeWorld(t, "at the bound", DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: 1, LongPrefillS: 1.2, Cost: cost},
		[]escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true}, {"c", 3000, false, false},
			{"e", 9000, true, true}, {"f", 3000, false, false}, {"g", 12000, false, false}})
	playEscapeWorld(t, "at equal TTFTs", DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: 1, LongPrefillS: 1, Cost: cost},
		[]escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true}, {"c", 3000, false, false},
			{"e", 9000, true, false}, {"f", 3000, false, false}, {"f2", 3000, false, false}, {"g", 12000, true, false}})
	attn := cost
	attn.AttnS = 1e-12
	playEscapeWorld(t, "with attention", DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: 1, LongPrefillS: 1.2001, Cost: attn},
		[]escapeTurn{{"a", 8000, true, true}, {"b", 9000, true, true}, {"c", 3000, false, false},
			{"e", 9000, true, true}, {"f", 3000, false, false}, {"g", 12000, false, false}})
}

// TestV4LevelNeverOverItsCap: a bucket holds at most (T − s)·(ō − 1),
// also when the mean output ō falls between two asks at the same instant.
// T − s = 0.012 − 0.002 = 0.01 s. After a's 101 output tokens ō = 101 and
// d0's fresh bucket is full at 0.01 × 100 = 1 s. b's output of 1 makes
// ō = (101 + 1) / 2 = 51 at the same time 0: the cap is 0.01 × 50 =
// 0.5 s, and the level, 1 s, is cut to it though no time passed.
func TestV4LevelNeverOverItsCap(t *testing.T) {
	x := v4World(DecodeIsolation{TPOTSLOS: 0.012, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}})
	x.Begin(0, Request{Session: "a", Turn: 1, Blocks: []uint64{10}, Input: 100, Output: 101})
	if lv := x.v4Level(x.v4Bucket(false, 0), 0); math.Abs(lv-1) > 1e-9 {
		t.Fatalf("after a: level %v, want 1 s", lv)
	}
	x.Begin(0, Request{Session: "b", Turn: 1, Blocks: []uint64{20}, Input: 100, Output: 1})
	if lv := x.v4Level(x.v4Bucket(false, 0), 0); math.Abs(lv-0.5) > 1e-9 {
		t.Fatalf("after b at the same instant: level %v, want the new cap 0.5 s", lv)
	}
}
