package kvc

import (
	"slices"
	"testing"
)

// Whole-on-P's bookkeeping and comparisons at their bounds (v3wholep.go),
// every figure by hand (block size 1,000, τ_append 8,192).

func v3Dispatcher2P(v3 V3Config) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: v3},
		[]string{"p0", "p1"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// A session seeded through p1 onto d0 comes back; both decoders refuse it
// for space, and p1, caching its first turn, serves it whole: the session
// leaves d0 (no pin) and p1 hosts it and serves one request whole.
func TestV3WholeOnPMovesTheSession(t *testing.T) {
	x := v3Dispatcher2P(V3Config{LocalFallback: true, WholeOnP: true})
	x.p.SetExcluded(0, true) // turn 1 goes through p1
	a := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 2000, Output: 10})
	a.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	if a.Action().Kind != ActSeed || a.Action().P != 1 {
		t.Fatalf("turn 1: %+v, want a seed through p1; path %v", a.Action(), a.Path())
	}
	a.Accepted()
	a.PrefillDone()
	a.Finished(true)
	x.p.SetExcluded(0, false)
	if s := x.sess(SessionKey{ID: "s"}); s.pin < 0 {
		t.Fatalf("after turn 1 the session is pinned nowhere")
	}
	b := x.Begin(1, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 3}, Input: 3000, Output: 10})
	for i := 0; b.Action().Kind == ActAdmit; i++ {
		if i > 4 {
			t.Fatal("admission loop")
		}
		b.Reply(AdmitReply{Reason: "no-space"})
	}
	if act := b.Action(); act.Kind != ActWholeP || act.P != 1 {
		t.Fatalf("turn 2: %+v (%s), want whole on p1; path %v", act, b.Mode(), b.Path())
	}
	b.Accepted()
	if s := x.sess(SessionKey{ID: "s"}); s.pin != -1 || x.Pinned("s") || s.onP != 2 {
		t.Fatalf("turn 2 accepted: pin %d, onP %d; want no pin and p1 (onP 2)", s.pin, s.onP)
	}
	if !slices.Equal(x.load.hosted, []int{0, 1}) || !slices.Equal(x.load.whole, []int{0, 1}) {
		t.Fatalf("hosted %v, whole %v; want [0 1] and [0 1]", x.load.hosted, x.load.whole)
	}
	b.PrefillDone()
	b.Finished(true)
	if !x.V3Idle() || !slices.Equal(x.load.hosted, []int{0, 1}) {
		t.Fatalf("after turn 2: idle %t, hosted %v; want idle, [0 1]", x.V3Idle(), x.load.hosted)
	}
}

// PHosts' rule for a new session, one P and two decoders, the state set by
// hand: P starts it when it serves fewer requests whole than every decoder
// in service has in flight (a decoder with cold-routed tokens pending
// counts one), or when P has nothing queued and hosts fewer sessions than
// every decoder.
func TestV3HostOnPByHand(t *testing.T) {
	for _, c := range []struct {
		name           string
		inflight, pend []int
		onD            []int
		pQueued        int
		want           ActionKind
	}{
		// the least busy decoder has 0 in flight: P (0 whole) is not under it
		{"d0 idle, d1 busy", []int{0, 1}, []int{0, 0}, []int{1, 1}, 1, ActAdmit},
		{"both busy", []int{1, 1}, []int{0, 0}, []int{1, 1}, 1, ActWholeP},
		// pending counts 1: d0 at 0, d1 at 1
		{"pending on d1", []int{0, 0}, []int{0, 500}, []int{1, 1}, 1, ActAdmit},
		{"pending on both", []int{0, 0}, []int{500, 500}, []int{1, 1}, 1, ActWholeP},
		// the emptiest decoder hosts 0 sessions: P (0) is not under it
		{"d0 hosts none", []int{0, 0}, []int{0, 0}, []int{0, 1}, 0, ActAdmit},
		{"both host one", []int{0, 0}, []int{0, 0}, []int{1, 1}, 0, ActWholeP},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := v3Dispatcher(V3Config{LocalFallback: true, WholeOnP: true, PHosts: true})
			x.ensureLoad()
			copy(x.d.inflight, c.inflight)
			copy(x.load.pend, c.pend)
			copy(x.onD, c.onD)
			x.load.p[0] = c.pQueued
			d := x.Begin(0, Request{Session: "n", Turn: 1, Blocks: []uint64{7}, Input: 1000, Output: 10})
			if got := d.Action().Kind; got != c.want {
				t.Errorf("%v (%s), want %v; path %v", got, d.Mode(), c.want, d.Path())
			}
		})
	}
}

// v3HostPick: the prefill worker serving the fewest requests whole, then
// hosting the fewest sessions, then P's router's pick (p0 with nothing
// cached); −1 with every one drained.
func TestV3HostPickByHand(t *testing.T) {
	for _, c := range []struct {
		whole, hosted []int
		want          int
	}{
		{[]int{0, 0}, []int{0, 0}, 0},
		{[]int{0, 0}, []int{0, 1}, 0},
		{[]int{0, 0}, []int{1, 0}, 1},
		{[]int{1, 0}, []int{0, 5}, 1},
		{[]int{0, 1}, []int{5, 0}, 0},
	} {
		x := v3Dispatcher2P(V3Config{LocalFallback: true, WholeOnP: true, PHosts: true})
		x.ensureLoad()
		copy(x.load.whole, c.whole)
		copy(x.load.hosted, c.hosted)
		if got := x.v3HostPick(Request{Session: "n", Blocks: []uint64{7}}); got != c.want {
			t.Errorf("whole %v hosted %v: p%d, want p%d", c.whole, c.hosted, got, c.want)
		}
	}
	x := v3Dispatcher2P(V3Config{LocalFallback: true, WholeOnP: true, PHosts: true})
	x.ensureLoad()
	x.p.SetExcluded(0, true)
	x.p.SetExcluded(1, true)
	if got := x.v3HostPick(Request{Session: "n", Blocks: []uint64{7}}); got != -1 {
		t.Errorf("every prefill worker drained: p%d, want −1", got)
	}
}

// A session P served whole stays there while P's queue with what it lacks
// of the prompt is no longer than the least-loaded decoder's would be with
// the whole prompt (queued + pending + prompt). A 2,000-token prompt P
// caches none of:
//
//	P 3,000+2,000 = 5,000; d0 2,000+1,000+2,000 = 5,000, d1 4,000+0+2,000 = 6,000 → stays
//	P 3,001+2,000 = 5,001 → a decoder
//	an empty prompt: P 500+1 = 501; d0 0+0+0 = 0 → a decoder
func TestV3StayOnPByHand(t *testing.T) {
	for _, c := range []struct {
		name      string
		input, pQ int
		dQ, pend  []int
		want      ActionKind
	}{
		{"P at the decoders' least", 2000, 3000, []int{2000, 4000}, []int{1000, 0}, ActWholeP},
		{"P one over", 2000, 3001, []int{2000, 4000}, []int{1000, 0}, ActAdmit},
		{"empty prompt, idle d0", 0, 500, []int{0, 1000}, []int{0, 0}, ActAdmit},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := v3Dispatcher(V3Config{LocalFallback: true, WholeOnP: true})
			x.ensureLoad()
			s := x.session(SessionKey{ID: "s"})
			s.seen = true
			x.setOnP(s, 1)
			x.load.p[0] = c.pQ
			copy(x.load.d, c.dQ)
			copy(x.load.pend, c.pend)
			d := x.Begin(0, Request{Session: "s", Turn: 3, Blocks: []uint64{50, 51}, Input: c.input, Output: 10})
			if got := d.Action().Kind; got != c.want {
				t.Errorf("%v (%s), want %v; path %v", got, d.Mode(), c.want, d.Path())
			}
		})
	}
}

// The warm fallback at τ_append: turn 1's 20 blocks went through P; turn 2
// adds 8,192 tokens (28,192: P lacks exactly τ_append) and is served whole
// there, 8,193 more is not.
func TestV3WarmOnPAtTauAppend(t *testing.T) {
	for _, c := range []struct {
		input int
		want  string
	}{{28192, ModeWholeOnP}, {28193, "pd-router-fallback-real-large-append"}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true})
		blocks := turnOneThroughP(x, 10)
		more := append(slices.Clone(blocks), 900, 901, 902, 903, 904, 905, 906, 907, 908)
		b := x.Begin(0, Request{Session: "a", Turn: 2, Blocks: more, Input: c.input, Output: 10})
		for i := 0; i < 3 && b.Action().Kind == ActAdmit; i++ {
			b.Reply(AdmitReply{Reason: "real-large-append"})
		}
		if b.Mode() != c.want {
			t.Errorf("turn 2 of %d tokens: %s, want %s; path %v", c.input, b.Mode(), c.want, b.Path())
		}
	}
}
