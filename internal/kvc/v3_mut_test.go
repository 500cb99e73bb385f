package kvc

import (
	"slices"
	"strings"
	"testing"
)

// v3's bookkeeping and placements at their bounds (v3.go), every figure by
// hand (block size 1,000, one P, two decoders unless said).

// On: the zero V3Config is v2; each option alone turns v3 on.
func TestV3OnByHand(t *testing.T) {
	if (V3Config{}).On() {
		t.Error("the zero V3Config is on")
	}
	for _, c := range []V3Config{{DBudgetTokens: 1}, {ColdRoute: true}, {Inline: true}, {LocalFallback: true}, {TypedRejects: true}} {
		if !c.On() {
			t.Errorf("%+v is off", c)
		}
	}
}

// The load books keep one slot per worker as the pools grow at run time.
func TestV3LoadFollowsThePools(t *testing.T) {
	x := v3Dispatcher(V3Config{LocalFallback: true})
	x.ensureLoad()
	x.AddPrefill("p1")
	x.AddDecoder("d2")
	x.ensureLoad()
	for _, c := range []struct {
		name string
		got  []int
		want int
	}{{"p", x.load.p, 2}, {"whole", x.load.whole, 2}, {"hosted", x.load.hosted, 2}, {"d", x.load.d, 3}, {"pend", x.load.pend, 3}} {
		if len(c.got) != c.want {
			t.Errorf("load.%s has %d slots, want %d", c.name, len(c.got), c.want)
		}
	}
}

// Cold routing counts what it sent a decoder's way and the decoder has not
// answered: a's 2,000 tokens pending on d0 send b (2,000, cold) to d1 (d0
// 0+2,000+2,000 against d1's 2,000).
func TestV3ColdPickCountsPending(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true})
	a := x.Begin(0, Request{Session: "a", Turn: 1, Blocks: []uint64{100, 101}, Input: 2000, Output: 10})
	b := x.Begin(0, Request{Session: "b", Turn: 1, Blocks: []uint64{200, 201}, Input: 2000, Output: 10})
	if a.Action().D != 0 || b.Action().D != 1 {
		t.Fatalf("a asked d%d, b d%d; want d0 and d1 (paths %v %v)", a.Action().D, b.Action().D, a.Path(), b.Path())
	}
	if !slices.Equal(x.load.pend, []int{2000, 2000}) {
		t.Fatalf("pending %v, want [2000 2000]", x.load.pend)
	}
}

// The cold cost and the pending tokens count what the decoder is believed
// to hold: d0 holds block 100 (a's turn 1), so b's 2,500-token prompt
// computes 1,500 there: d0 500 queued + 1,500 = 2,000 < d1's 2,500, and
// 1,500 tokens pend on d0.
func TestV3ColdPickCountsOverlap(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true})
	a := coldTurn(t, x, "a", 100, 2000)
	if a.Decoder() != 0 {
		t.Fatalf("a on d%d, want d0", a.Decoder())
	}
	a.PrefillDone()
	x.load.d[0] = 500
	b := x.Begin(0, Request{Session: "b", Turn: 1, Blocks: []uint64{100, 900, 901}, Input: 2500, Output: 10})
	if b.Action().D != 0 || !slices.Equal(x.load.pend, []int{1500, 0}) {
		t.Fatalf("b asked d%d, pending %v; want d0 and [1500 0]; path %v", b.Action().D, x.load.pend, b.Path())
	}
}

// A session P hosted whole that goes to a decoder is no longer P's.
func TestV3LeavingPUnhosts(t *testing.T) {
	x := v3Dispatcher(V3Config{LocalFallback: true, WholeOnP: true})
	x.ensureLoad()
	s := x.session(SessionKey{ID: "s"})
	s.seen = true
	x.setOnP(s, 1)
	x.load.p[0] = 9000 // P's queue is the longer: a decoder
	d := x.Begin(0, Request{Session: "s", Turn: 3, Blocks: []uint64{50, 51}, Input: 2000, Output: 10})
	if d.Action().Kind != ActAdmit {
		t.Fatalf("%+v, want an admission; path %v", d.Action(), d.Path())
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	if s.onP != 0 || !slices.Equal(x.load.hosted, []int{0}) {
		t.Fatalf("after a turn on d%d: onP %d, hosted %v; want 0 and [0]", d.Decoder(), s.onP, x.load.hosted)
	}
}

// The local fallback queues on the session's home d0 though d1 has less
// queued, and counts the prompt less the block d0 holds: 3,000 + 2,500 −
// 1,000 = 4,500 on d0.
// The same with the home on d1 (d0 empty): 4,500 on d1.
func TestV3FallbackHomeByHand(t *testing.T) {
	for home := range 2 {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, LocalFallback: true})
		x.Resident("s", home, []uint64{1}, 1000)
		x.ensureLoad()
		x.load.d[home] = 3000
		d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 3}, Input: 2500, Output: 10})
		for i := 0; d.Action().Kind == ActAdmit; i++ {
			if i > 4 {
				t.Fatal("admission loop")
			}
			d.Reply(AdmitReply{Reason: "no-space"})
		}
		if d.Mode() != ModeLocalFall || d.Decoder() != home {
			t.Fatalf("home d%d: %s on d%d, want the local fallback there; path %v", home, d.Mode(), d.Decoder(), d.Path())
		}
		d.Accepted()
		want := []int{0, 0}
		want[home] = 4500
		if !slices.Equal(x.load.d, want) {
			t.Fatalf("home d%d: D queues %v, want %v", home, x.load.d, want)
		}
	}
}

// With WholeOnP the fallback goes whole to P only when P's queue with the
// prompt is shorter than the decoder's with it: a 2,000-token prompt, P
// idle; decoders at 0 (2,000 against 2,000: local on d0) and at 1,000
// (2,000 against 3,000: whole on P).
func TestV3FallbackWholeOnPByHand(t *testing.T) {
	for _, c := range []struct {
		dq   int
		want string
	}{{0, ModeLocalFall}, {1000, ModeWholeOnP}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, LocalFallback: true, WholeOnP: true})
		x.ensureLoad()
		x.load.d[0], x.load.d[1] = c.dq, c.dq
		d := x.Begin(0, Request{Session: "n", Turn: 1, Blocks: []uint64{7, 8}, Input: 2000, Output: 10})
		for i := 0; d.Action().Kind == ActAdmit; i++ {
			if i > 4 {
				t.Fatal("admission loop")
			}
			d.Reply(AdmitReply{Reason: "no-space"})
		}
		if d.Mode() != c.want {
			t.Errorf("decoders at %d: %s, want %s; path %v", c.dq, d.Mode(), c.want, d.Path())
		}
	}
}

// With no stall budget (0) no local placement is weighed: a seed answer
// goes through P and the path notes no v3 placement.
func TestV3NoBudgetWeighsNoPlacement(t *testing.T) {
	x := v3Dispatcher(V3Config{ColdRoute: true})
	d := coldTurn(t, x, "a", 100, 2000)
	if d.kind != ActSeed {
		t.Fatalf("%v (%s), want a seed through P; path %v", d.kind, d.Mode(), d.Path())
	}
	for _, n := range d.Path() {
		if strings.Contains(n, "v3 placement") {
			t.Errorf("the path weighs a placement: %q", n)
		}
	}
}
