package kvc

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPinBookNeverNegative plays random outcomes at KVC dispatchers — seeds,
// direct appends, plain PD, refusals, failures before and after the
// prefill, evictions, demotions, storage reports, closes, forgets, a
// decoder removed, both beliefs — and holds the pin book to its invariants
// after every call (no count or sum below zero, each idle list what its
// holds add up to); once every request has ended and every decoder has
// reported evicting every session, the book is empty.
func TestPinBookNeverNegative(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 25))
		cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 2, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16}
		if seed%3 == 0 {
			cfg.Belief = BeliefNeverShrink
		}
		if seed%2 == 0 {
			cfg.V3 = V3Config{DBudgetTokens: 4000, ColdRoute: true, LocalFallback: true, TypedRejects: true, WholeOnP: true, ColdOnP: true}
		}
		x := NewDispatcher(cfg, []string{"p0"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
		x.KeepPinBook()
		const sessions = 10
		key := func(s int) SessionKey { return SessionKey{ID: fmt.Sprint("s", s), Num: int64(s + 1)} }
		turn := make([]int, sessions)
		chains := make([][]uint64, sessions)
		var open []*Dispatch
		for i := 0; i < 500; i++ {
			s := rng.IntN(sessions)
			k := key(s)
			switch op := rng.IntN(16); {
			case op < 7:
				turn[s]++
				for n := rng.IntN(8) + 1; n > 0; n-- {
					chains[s] = append(chains[s], uint64(s)<<32|uint64(len(chains[s])+1))
				}
				r := Request{Session: k.ID, SessionNum: k.Num, Turn: turn[s], Blocks: append([]uint64(nil), chains[s]...),
					Input: len(chains[s]) * 16, Output: rng.IntN(3)}
				d := x.Begin(float64(i), r)
				for n := 0; d.Action().Kind == ActAdmit && n < 10; n++ {
					if rng.IntN(4) == 0 {
						d.Reply(AdmitReply{Reason: "no-space"})
					} else {
						d.Reply(AdmitReply{CanAdmit: true, Direct: rng.IntN(2) == 0, Reason: "session-not-resident", CachedTokens: rng.IntN(r.Input)})
					}
				}
				if !d.Action().Kind.starts() {
					d.Finished(false)
				} else if rng.IntN(6) == 0 {
					d.Refused("worker-refused")
					d.Finished(false)
				} else {
					d.Accepted()
					open = append(open, d)
				}
			case op < 8 && len(open) > 0:
				if d := open[rng.IntN(len(open))]; d.Stage() == "accepted" {
					d.PrefillDone()
				}
			case op < 11 && len(open) > 0:
				j := rng.IntN(len(open))
				open[j].Finished(rng.IntN(4) != 0)
				open = append(open[:j], open[j+1:]...)
			case op < 12:
				x.SessionEvictedKey(rng.IntN(3), k)
			case op < 13:
				x.SessionDemotedKey(rng.IntN(3), k)
			case op < 14:
				x.SessionStoredKey(rng.IntN(3), k)
			case op < 15:
				x.CloseSessionKey(k)
			default:
				if rng.IntN(8) == 0 {
					x.ForgetDecoder(rng.IntN(3))
				} else {
					x.ForgetSessionKey(k)
				}
			}
			if !x.PinBookOK() {
				t.Fatalf("seed %d, call %d: the pin book breaks its invariants", seed, i)
			}
		}
		for _, d := range open {
			d.Finished(true)
		}
		for d := 0; d < 3; d++ {
			for s := 0; s < sessions; s++ {
				x.SessionEvictedKey(d, key(s))
			}
		}
		for d := 0; d < 3; d++ {
			if n, tok := x.PinnedIdle(d); n != 0 || tok != 0 || x.pins.busyTok[d] != 0 || x.pins.pinned[d] != 0 {
				t.Fatalf("seed %d: d%d still booked: %d idle sessions, %d tokens, busy %d, pinned %d", seed, d, n, tok, x.pins.busyTok[d], x.pins.pinned[d])
			}
		}
	}
}

// TestPinBookByHand follows one decoder's book through a few outcomes, each
// figure by hand: a pool of 64 blocks of 16 tokens = 1,024 tokens.
func TestPinBookByHand(t *testing.T) {
	cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 2, TauAppend: 8192,
		MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16}
	x := NewDispatcher(cfg, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
	x.KeepPinBook()
	start := func(id string, input, output int) *Dispatch {
		d := x.Begin(0, Request{Session: id, Turn: 1, Input: input, Output: output, Blocks: []uint64{uint64(len(id))<<32 | uint64(input)}})
		d.Reply(AdmitReply{CanAdmit: true, Direct: true})
		d.Accepted()
		return d
	}
	a := start("a", 300, 20)
	if n, tok := x.PinnedIdle(0); n != 0 || tok != 0 || x.pins.busyTok[0] != 320 {
		t.Fatalf("a running: idle %d sessions %d tokens, busy %d; want 0, 0, 320", n, tok, x.pins.busyTok[0])
	}
	a.Finished(true)
	b := start("bb", 400, 0) // a decoder generates at least one token: 401
	b.Finished(true)
	if n, tok := x.PinnedIdle(0); n != 2 || tok != 721 || x.pins.busyTok[0] != 0 {
		t.Fatalf("a and bb idle: %d sessions %d tokens, busy %d; want 2, 721, 0", n, tok, x.pins.busyTok[0])
	}
	// Room left: 1,024 − 721 = 303. 200 more fit; 400 push out a (the
	// least recently used), 320 tokens; 800 push out both.
	for _, c := range []struct{ need, tok, n int }{{200, 0, 0}, {400, 320, 1}, {800, 721, 2}, {2000, 721, 2}} {
		if tok, n := x.pushedOut(0, c.need, nil); tok != c.tok || n != c.n {
			t.Errorf("need %d: pushes out %d tokens in %d sessions, want %d in %d", c.need, tok, n, c.tok, c.n)
		}
	}
	// a's own next turn does not push a out: bb goes.
	if tok, n := x.pushedOut(0, 400, x.sess(SessionKey{ID: "a"})); tok != 401 || n != 1 {
		t.Errorf("a's turn needing 400: pushes out %d tokens in %d sessions, want bb's 401 in 1", tok, n)
	}
	// a's next turn runs: a leaves the idle list while it does.
	a2 := x.Begin(1, Request{Session: "a", Turn: 2, Input: 350, Output: 10, Blocks: []uint64{1<<32 | 300, 9}})
	a2.Reply(AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 320})
	a2.Accepted()
	if n, tok := x.PinnedIdle(0); n != 1 || tok != 401 || x.pins.busyTok[0] != 360 {
		t.Fatalf("a2 running: idle %d sessions %d tokens, busy %d; want 1, 401, 360", n, tok, x.pins.busyTok[0])
	}
	// Room with a2 in flight: 1,024 − 401 idle − 360 busy = 263 tokens.
	for _, c := range []struct{ need, tok int }{{263, 0}, {264, 401}} {
		if tok, _ := x.pushedOut(0, c.need, nil); tok != c.tok {
			t.Errorf("a2 running, need %d: pushes out %d tokens, want %d", c.need, tok, c.tok)
		}
	}
	x.SessionEvicted(0, "bb")
	a2.Finished(true)
	if n, tok := x.PinnedIdle(0); n != 1 || tok != 360 {
		t.Fatalf("bb evicted, a2 ended: %d sessions %d tokens; want 1, 360", n, tok)
	}
	// A failure after the prefill began loses the session's pin (the
	// decoder unpinned it on admission); before, the pin stays.
	a3 := x.Begin(2, Request{Session: "a", Turn: 3, Input: 380, Output: 10, Blocks: []uint64{1<<32 | 300, 9, 10}})
	a3.Reply(AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 360})
	a3.Accepted()
	a3.Finished(false)
	if n, tok := x.PinnedIdle(0); n != 1 || tok != 360 {
		t.Fatalf("a3 failed waiting: %d sessions %d tokens; want a still pinned, 1, 360", n, tok)
	}
	a4 := x.Begin(3, Request{Session: "a", Turn: 3, Input: 380, Output: 10, Blocks: []uint64{1<<32 | 300, 9, 10}})
	a4.Reply(AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 360})
	a4.Accepted()
	a4.PrefillDone()
	a4.Finished(false)
	if n, tok := x.PinnedIdle(0); n != 0 || tok != 0 || x.pins.pinned[0] != 0 {
		t.Fatalf("a4 failed decoding: %d sessions %d tokens, %d pinned; want none", n, tok, x.pins.pinned[0])
	}
	// A report that comes while a request of the session runs (the decoder
	// ended it, pinned and trimmed it before the ending came): that ending
	// pins nothing, the next one does.
	c1 := start("c", 100, 4)
	x.SessionEvicted(0, "c")
	c1.Finished(true)
	if n, _ := x.PinnedIdle(0); n != 0 {
		t.Fatalf("c reported evicted while running: %d idle sessions, want 0", n)
	}
	c2 := x.Begin(4, Request{Session: "c", Turn: 2, Input: 120, Output: 4, Blocks: []uint64{'c' << 32, 2}})
	c2.Reply(AdmitReply{CanAdmit: true, Direct: true})
	c2.Accepted()
	c2.Finished(true)
	if n, tok := x.PinnedIdle(0); n != 1 || tok != 124 {
		t.Fatalf("c's next turn ended: %d idle sessions %d tokens, want 1, 124", n, tok)
	}
	// A report of an idle session leaves its next request free to pin it.
	x.SessionEvicted(0, "c")
	c3 := x.Begin(5, Request{Session: "c", Turn: 3, Input: 130, Output: 4, Blocks: []uint64{'c' << 32, 3}})
	c3.Reply(AdmitReply{CanAdmit: true, Direct: true})
	c3.Accepted()
	c3.Finished(true)
	if n, tok := x.PinnedIdle(0); n != 1 || tok != 134 {
		t.Fatalf("c evicted idle, then its turn 3 ended: %d idle sessions %d tokens, want 1, 134", n, tok)
	}
	if n, tok := x.PinnedIdle(1); n != 0 || tok != 0 {
		t.Fatalf("decoder 1 of a pool of one: %d, %d", n, tok)
	}
	// With no pool size given the router's index takes its default bound
	// (2^20 blocks, 16M tokens here): 5,000 tokens push nothing out.
	y := NewDispatcher(cfg, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	y.KeepPinBook()
	d := y.Begin(0, Request{Session: "a", Turn: 1, Input: 300, Output: 20, Blocks: []uint64{7}})
	d.Reply(AdmitReply{CanAdmit: true, Direct: true})
	d.Accepted()
	d.Finished(true)
	if tok, n := y.pushedOut(0, 5000, nil); tok != 0 || n != 0 {
		t.Fatalf("pool unknown: pushes out %d tokens in %d sessions, want none", tok, n)
	}
}

// TestColdTrimWeightByHand: cold routing with ColdTrimWeight, by hand.
// Pools of 64 blocks of 16 tokens = 1,024 tokens. Session a (592 + 8 =
// 600 tokens) ends on one decoder, dA, session b (292 + 8 = 300) on the
// other, dB; dB has 50 prefill tokens queued. A new session c of 590 + 10
// tokens needs 600: dA has 424 free, so c there pushes a out (600
// tokens); dB has 724 and pushes nothing. Cold routing's costs are the
// queue plus the uncached prompt: dA 0 + 590 = 590, dB 50 + 590 = 640,
// so without the weight c goes to dA. At weight 1 dA costs 590 + 600 =
// 1,190 and c goes to dB; at 0.05, 590 + 30 = 620 < 640, dA still. With a
// hosted whole on a prefill worker since, its copy on dA is stale and
// costs nothing: dA again at weight 1.
func TestColdTrimWeightByHand(t *testing.T) {
	pick := func(w float64, staleA bool) (chosen, dA int) {
		cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 2, TauAppend: 8192,
			MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16,
			V3: V3Config{ColdRoute: true, ColdTrimWeight: w}}
		x := NewDispatcher(cfg, []string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
		run := func(id string, input, output int) int {
			d := x.Begin(0, Request{Session: id, Turn: 1, Input: input, Output: output, Blocks: []uint64{uint64(id[0])}})
			d.Reply(AdmitReply{CanAdmit: true, Direct: true})
			d.Accepted()
			d.PrefillDone()
			d.Finished(true)
			return d.Decoder()
		}
		dA = run("a", 592, 8)
		if dB := run("b", 292, 8); dB == dA {
			t.Fatalf("a and b both on d%d", dA)
		}
		dB := 1 - dA
		x.ensureLoad()
		x.load.d[dB] = 50
		if staleA {
			x.session(SessionKey{ID: "a"}).onP = 1
		}
		c := x.Begin(1, Request{Session: "c", Turn: 1, Input: 590, Output: 10, Blocks: []uint64{'c'}})
		return c.Action().D, dA
	}
	for _, c := range []struct {
		w      float64
		stale  bool
		wantDA bool
	}{{0, false, true}, {0.05, false, true}, {1, false, false}, {1, true, true}} {
		got, dA := pick(c.w, c.stale)
		if (got == dA) != c.wantDA {
			t.Errorf("weight %v, a stale %t: c asked d%d (dA = d%d), want dA %t", c.w, c.stale, got, dA, c.wantDA)
		}
	}
}

// TestV4HomeReseedByHand: 1P2D, pools of 1,024 tokens (64 blocks of 16),
// v3's local prefill off so that every append over τ_append is refused
// and goes on. Session a (592 + 8 = 600 tokens) ends on dA, session b on
// the other decoder, dB. a's next turn, 800 + 8 = 808 tokens, is refused
// by dA as a real large append. With b of 692 + 8 = 700 tokens, dB has 324
// free and would push b out for it: the turn is reseeded through p0 back
// to dA. With b of 92 + 8 = 100, dB has 924 free and takes it without a
// trim: the next decoder is asked, as with the home reseed off.
func TestV4HomeReseedByHand(t *testing.T) {
	play := func(home bool, bInput int) (Action, int) {
		cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 3, TauAppend: 100,
			MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16,
			V3: V3Config{Isolation: DecodeIsolation{TPOTSLOS: 0.012, HomeReseed: home}}}
		x := NewDispatcher(cfg, []string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
		run := func(id string, input int) int {
			d := x.Begin(0, Request{Session: id, Turn: 1, Input: input, Output: 8, Blocks: []uint64{uint64(id[0])}})
			d.Reply(AdmitReply{CanAdmit: true, Direct: true})
			d.Accepted()
			d.PrefillDone()
			d.Finished(true)
			return d.Decoder()
		}
		dA := run("a", 592)
		if run("b", bInput) == dA {
			t.Fatalf("a and b both on d%d", dA)
		}
		a2 := x.Begin(1, Request{Session: "a", Turn: 2, Input: 800, Output: 8, Blocks: []uint64{'a', 2}})
		if a := a2.Action(); a.Kind != ActAdmit || a.D != dA {
			t.Fatalf("a's turn 2 first asks %+v, want its decoder d%d", a, dA)
		}
		a2.Reply(AdmitReply{Reason: "real-large-append", CachedTokens: 592})
		return a2.Action(), dA
	}
	for _, c := range []struct {
		home     bool
		bInput   int
		wantSeed bool
	}{{true, 692, true}, {true, 92, false}, {false, 692, false},
		// b of 212 + 8 = 220 tokens leaves 804 free: the turn's 800 + 8 do
		// not fit, its prompt alone would.
		{true, 212, true}} {
		a, dA := play(c.home, c.bInput)
		if seed := a.Kind == ActSeed && a.D == dA && a.P == 0; seed != c.wantSeed {
			t.Errorf("home %t, b of %d tokens: next action %+v (dA = d%d), want a reseed back to dA %t", c.home, c.bInput, a, dA, c.wantSeed)
		}
		if !c.wantSeed && (a.Kind != ActAdmit || a.D != 1-dA) {
			t.Errorf("home %t, b of %d tokens: next action %+v, want the other decoder asked", c.home, c.bInput, a)
		}
	}
}

// TestPinBookStaleCopyOnTwoDecoders: session a ends on d1 (600 tokens),
// then its next turn runs on d0 (d1 avoided), so a's copy on d1 is one its
// session left: on d1 it makes room and costs nothing (a request needing
// all of d1's 1,024 tokens pushes out nothing that costs a reseed). Forgetting
// d0 drops a's hold there only; d1 still holds the copy until it reports it.
func TestPinBookStaleCopyOnTwoDecoders(t *testing.T) {
	cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 2, TauAppend: 8192,
		MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16}
	x := NewDispatcher(cfg, []string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
	x.KeepPinBook()
	run := func(turn, input int, avoid int) int {
		d := x.Begin(float64(turn), Request{Session: "a", Turn: turn, Input: input, Output: 8, Blocks: []uint64{1, uint64(turn)}, Avoid: []int{avoid}})
		d.Reply(AdmitReply{CanAdmit: true, Direct: true})
		d.Accepted()
		d.Finished(true)
		return d.Decoder()
	}
	if d := run(1, 592, 0); d != 1 {
		t.Fatalf("turn 1 on d%d, want d1", d)
	}
	if d := run(2, 292, 1); d != 0 {
		t.Fatalf("turn 2 on d%d, want d0", d)
	}
	if tok, n := x.pushedOut(1, 1024, nil); tok != 0 || n != 0 {
		t.Errorf("d1 with a's stale copy: pushes out %d tokens in %d sessions, want none", tok, n)
	}
	if tok, n := x.pushedOut(0, 1024, nil); tok != 300 || n != 1 {
		t.Errorf("d0 with a's live copy: pushes out %d tokens in %d sessions, want 300 in 1", tok, n)
	}
	x.ForgetDecoder(0)
	if n0, _ := x.PinnedIdle(0); n0 != 0 {
		t.Errorf("d0 forgotten: %d idle sessions there, want 0", n0)
	}
	if n1, tok := x.PinnedIdle(1); n1 != 1 || tok != 600 {
		t.Errorf("d0 forgotten: d1 holds %d sessions %d tokens, want 1, 600", n1, tok)
	}
}

// TestPinBookOffUnlessRead: without a reader of the book (ColdTrimWeight,
// HomeReseed) or KeepPinBook, a finished direct append of 300 + 20 tokens
// books nothing, so a KVC run pays nothing for the book; with
// ColdTrimWeight set it books the 320 tokens.
func TestPinBookOffUnlessRead(t *testing.T) {
	for _, w := range []float64{0, 0.5} {
		cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 2, TauAppend: 8192,
			MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack, BlockSize: 16,
			V3: V3Config{ColdRoute: true, ColdTrimWeight: w}}
		x := NewDispatcher(cfg, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1, IndexBlocks: 64})
		d := x.Begin(0, Request{Session: "a", Turn: 1, Input: 300, Output: 20, Blocks: []uint64{1}})
		d.Reply(AdmitReply{CanAdmit: true, Direct: true})
		d.Accepted()
		d.Finished(true)
		want := 0
		if w > 0 {
			want = 320
		}
		if _, tok := x.PinnedIdle(0); tok != want {
			t.Errorf("ColdTrimWeight %v: the book holds %d tokens, want %d", w, tok, want)
		}
	}
}
