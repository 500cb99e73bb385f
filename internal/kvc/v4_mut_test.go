package kvc

import (
	"math"
	"strings"
	"testing"
)

// v4's cost and budget helpers at their boundaries, in powers of two so
// every figure is exact: a prefill of nothing costs nothing, even without
// chunking (one step's overhead otherwise); at 1/1024 s a token and a
// slack of 1/1024 s a decoded token, a 2-token decode's bucket holds one
// token's prefill exactly and a 101-token decode's 100 tokens exactly.
func TestV4HelpersAtTheirBounds(t *testing.T) {
	if got := (StallCost{OverheadS: 1, PerTokenS: 1}).PrefillS(0, 5); got != 0 {
		t.Errorf("PrefillS(0, 5) unchunked = %v, want 0", got)
	}
	c := DecodeIsolation{TPOTSLOS: 1.0 / 1024, Cost: StallCost{PerTokenS: 1.0 / 1024}}
	for _, tc := range []struct{ out, want int }{{2, 1}, {101, 100}} {
		if got := c.DerivedBudgetTokens(tc.out); got != tc.want {
			t.Errorf("DerivedBudgetTokens(%d) = %d, want %d", tc.out, got, tc.want)
		}
	}
}

// A prefill that costs exactly the decoder's stall budget fits it: d0
// decodes (one session pinned there), its bucket holds 0.5 s, a 512-token
// prefill at 1/1024 s a token costs 0.5 s. One token more is over, and
// counted as held. The path names the SLO in milliseconds.
func TestV4AllowsAtTheBudget(t *testing.T) {
	x := v4World(DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, Cost: StallCost{PerTokenS: 1.0 / 1024, DecodeStepS: 0.002}})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{7}, Input: 100, Output: 101})
	x.onD[0] = 1
	b := x.v4Bucket(false, 0)
	for _, c := range []struct {
		n    int
		want bool
		held int
	}{{512, true, 0}, {513, false, 1}} {
		*b = stallBucket{level: 0.5, at: 0, used: true}
		if got := d.v4Allows(false, 0, c.n, 0); got != c.want {
			t.Errorf("%d tokens against a 0.5 s budget: fits %v, want %v", c.n, got, c.want)
		}
		if _, held := x.V4Stall(); held != c.held {
			t.Errorf("after %d tokens: held %d, want %d", c.n, held, c.held)
		}
	}
	if p := strings.Join(d.Path(), "\n"); !strings.Contains(p, "TPOT SLO 12.0 ms") {
		t.Errorf("path %q names no TPOT SLO of 12.0 ms", p)
	}
}

// v4's TTFT escape at its bounds, at 1/1024 s a token, no overhead: a
// 1,024-token prompt P holds none of takes 1 s through P after its queue
// of q tokens (q/1024 s); on d0 n tokens take n/1024 s.
func TestV4MissesTTFTAtTheBounds(t *testing.T) {
	for _, c := range []struct {
		name       string
		slo, ratio float64
		attn       float64
		q, n       int
		want       bool
	}{
		{"through P exactly at the SLO", 1, 0, 0, 0, 1, false},
		{"through P one token over, on d0 exactly at it", 1, 0, 0, 1, 1024, true},
		{"on d0 one token over the SLO too", 1, 0, 0, 1, 1025, false},
		{"both over, d0 exactly 1/ratio of P's time", 0.5, 2, 0, 1024, 1024, true},
		{"both over, d0 one token more", 0.5, 2, 0, 1024, 1025, false},
		{"no TTFT SLO: off whatever the ratio", 0, 2, 0, 1024, 1024, false},
		// With attention 2^-20 s a token per token of context, the cold
		// prompt through P costs 1 + 1024·512/2^20 = 1.5 s: at the SLO.
		{"attention through P at the SLO", 1.5, 0, 1.0 / (1 << 20), 0, 1, false},
	} {
		x := v4World(DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, TTFTSLOS: c.slo, SoonerRatio: c.ratio,
			Cost: StallCost{PerTokenS: 1.0 / 1024, AttnS: c.attn, DecodeStepS: 0.002}})
		d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{7, 8}, Input: 1024, Output: 101})
		x.ensureLoad()
		x.load.p[0], x.load.d[0] = c.q, 0
		if got := d.v4PMissesTTFT(0, c.n, 0); got != c.want {
			t.Errorf("%s: misses %v, want %v (path %v)", c.name, got, c.want, d.Path())
		}
	}
}

// The stall an accepted prefill draws, attention included, at its
// context: TestV4BudgetByHand's world (1 s buckets, 100 µs a token) with
// 1 ns of attention a token per token of context and p0 serving a session
// whole (so its bucket has victims too). a (8,000 tokens) is free (nothing
// on d0); b (9,000) draws 0.9 + 9,000·4,500 ns = 0.9405 s from d0's; c
// (3,000) is over what is left (0.0595 s) and seeds through p0, drawing
// 0.3 + 3,000·1,500 ns = 0.3045 s from p0's: 1.245 s in all.
func TestV4AcceptedDrawsAtTheContext(t *testing.T) {
	v3 := V3Config{DBudgetTokens: 1 << 24, Margin: -(1 << 24),
		Isolation: DecodeIsolation{TPOTSLOS: 0.012, OutputTokens: 101, Cost: StallCost{PerTokenS: 1e-4, AttnS: 1e-9, DecodeStepS: 0.002}}}
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	x.ensureLoad()
	x.load.whole[0] = 1
	for i, st := range []struct {
		s     string
		input int
		local bool
		drawn float64
	}{{"a", 8000, true, 0}, {"b", 9000, true, 0.9405}, {"c", 3000, false, 1.245}} {
		blk := uint64(100 * (i + 1))
		d := x.Begin(0, Request{Session: st.s, Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: st.input, Output: 101})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		d.Accepted()
		if local := d.kind == ActDirect && d.Mode() == ModeLocalSeed; local != st.local {
			t.Fatalf("%s: %v (%s), want local %v; path %v", st.s, d.kind, d.Mode(), st.local, d.Path())
		}
		if drawn, _ := x.V4Stall(); math.Abs(drawn-st.drawn) > 1e-9 {
			t.Errorf("after %s: stall drawn %v s, want %v", st.s, drawn, st.drawn)
		}
	}
}
