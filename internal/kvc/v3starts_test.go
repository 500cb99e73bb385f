package kvc

import (
	"slices"
	"testing"
)

// startIdle begins a first turn of session s on an idle cluster, accepts
// it and finishes it, and says where it went: "P" whole on a prefill
// worker, else the decoder's name.
func startIdle(t *testing.T, x *Dispatcher, s string, blk uint64, input int) string {
	t.Helper()
	d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: []uint64{blk}, Input: input, Output: 10})
	where := "P"
	if d.Action().Kind != ActWholeP {
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		where = x.d.names[d.Decoder()]
	}
	d.Accepted()
	d.PrefillDone()
	d.Finished(true)
	return where
}

// TestV3BalanceStarts: one P, two decoders, sessions arriving one at a
// time on an idle cluster (every queue empty, nothing in flight), so the
// queues never decide. a, b and c start on d0, d1 and P either way. Then b
// has three more turns on d1, and e, f, g arrive. With BalanceStarts they
// start in turn, as DP's round robin does: d0 and d1 have each started one
// session, so cold routing's tie goes to the one that started fewer, and P
// takes g when it is within its third of the sessions. Without it, the ties
// go by Algorithm 1's order, which counts requests (d1's four against d0's
// one) rather than sessions, and P waits until it hosts fewer sessions than
// every decoder: all three go to d0.
func TestV3BalanceStarts(t *testing.T) {
	for _, tc := range []struct {
		balance bool
		want    []string
	}{
		{true, []string{"d0", "d1", "P", "d0", "d1", "P"}},
		{false, []string{"d0", "d1", "P", "d0", "d0", "d0"}},
	} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true, PHosts: true,
			BalanceStarts: tc.balance})
		var got []string
		for i, s := range []string{"a", "b", "c"} {
			got = append(got, startIdle(t, x, s, uint64(100*(i+1)), 2000))
		}
		for turn := 2; turn <= 4; turn++ {
			d := x.Begin(0, Request{Session: "b", Turn: turn, Blocks: []uint64{200, uint64(200 + turn)}, Input: 2000 + 500*turn, Output: 10})
			if a := d.Action(); a.Kind != ActAdmit || a.D != 1 {
				t.Fatalf("b turn %d: %+v, want an admission on d1; path %v", turn, a, d.Path())
			}
			d.Reply(AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 2000})
			d.Accepted()
			d.PrefillDone()
			d.Finished(true)
		}
		for i, s := range []string{"e", "f", "g"} {
			got = append(got, startIdle(t, x, s, uint64(1000*(i+1)), 2000))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("balance %v: placements %v, want %v", tc.balance, got, tc.want)
		}
		if !x.V3Idle() {
			t.Errorf("balance %v: bookkeeping not empty at the end", tc.balance)
		}
	}
}

// TestV3BalanceStartsQueueCap: P starts a session within its share only
// while its prefill queue is at most PHostQueueTokens. a, b and c start on
// d0, d1 and P; z's 22,000-token prompt is over the decoders' budget and
// its seed waits in P's queue; e starts on a decoder (P is past its third);
// f is within P's share and starts there only if the cap allows 22,000
// tokens queued.
func TestV3BalanceStartsQueueCap(t *testing.T) {
	for _, tc := range []struct {
		cap   int
		wantP bool
	}{{1000, false}, {30000, true}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true, PHosts: true,
			BalanceStarts: true, PHostQueueTokens: tc.cap})
		for i, s := range []string{"a", "b", "c"} {
			startIdle(t, x, s, uint64(100*(i+1)), 2000)
		}
		z := coldTurn(t, x, "z", 900, 22000)
		if z.Prefill() < 0 {
			t.Fatalf("cap %d: z %s, want a seed through P; path %v", tc.cap, z.Mode(), z.Path())
		}
		if e := startIdle(t, x, "e", 1000, 2000); e == "P" {
			t.Fatalf("cap %d: e started on P past its share", tc.cap)
		}
		f := x.Begin(0, Request{Session: "f", Turn: 1, Blocks: []uint64{1100}, Input: 2000, Output: 10})
		if got := f.Action().Kind == ActWholeP; got != tc.wantP {
			t.Errorf("cap %d: f whole on P %v, want %v; path %v", tc.cap, got, tc.wantP, f.Path())
		}
	}
}

// TestV3BalanceHalfLife: cold routing's ties go first to the decoder that
// took the fewest requests lately. a and e start on d0 and b on d1 at time
// 0; b then takes five turns on d1 just before c arrives at 1,000 s. With a
// 90 s half-life d0's two requests of long ago count for nothing against
// d1's five of the last ten seconds, and c starts on d0; counting sessions
// started alone (d0 two, d1 one), c starts on d1, beside the active one.
func TestV3BalanceHalfLife(t *testing.T) {
	for _, tc := range []struct {
		half float64
		want int
	}{{90, 0}, {0, 1}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, BalanceStarts: true, BalanceHalfLifeS: tc.half})
		at := func(now float64, s string, turn int, blocks []uint64, rep AdmitReply) int {
			d := x.Begin(now, Request{Session: s, Turn: turn, Blocks: blocks, Input: 1000 * len(blocks), Output: 10})
			d.Reply(rep)
			d.Accepted()
			d.PrefillDone()
			d.Finished(true)
			return d.Decoder()
		}
		cold := AdmitReply{CanAdmit: true, Reason: "session-not-resident"}
		for i, s := range []string{"a", "b", "e"} {
			if got, want := at(0, s, 1, []uint64{uint64(100 * (i + 1))}, cold), []int{0, 1, 0}[i]; got != want {
				t.Fatalf("half-life %v: %s on d%d, want d%d", tc.half, s, got, want)
			}
		}
		for turn := 2; turn <= 6; turn++ {
			at(float64(988+2*turn), "b", turn, []uint64{200, uint64(200 + turn)}, AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 1000})
		}
		if got := at(1000, "c", 1, []uint64{900}, cold); got != tc.want {
			t.Errorf("half-life %v: c on d%d, want d%d", tc.half, got, tc.want)
		}
	}
}

// The start books by hand: a decoder's recent requests halve every
// half-life (4 taken at 0 are 2 at 2 s with a 2 s half-life, and one more
// then makes 3), and the books grow to the pools' sizes exactly, never
// past them.
func TestV3StartsBooksByHand(t *testing.T) {
	var s v3Starts
	s.grow(1, 2)
	s.grow(3, 2)
	s.grow(2, 4)
	if len(s.p) != 3 || len(s.d) != 4 || len(s.recent) != 4 || len(s.recentAt) != 4 {
		t.Fatalf("books %d/%d/%d/%d long, want 3 prefill and 4 decoder entries", len(s.p), len(s.d), len(s.recent), len(s.recentAt))
	}
	s.recent[1], s.recentAt[1] = 4, 0
	if got := s.recentOn(1, 2, 2); got != 2 {
		t.Errorf("4 requests at 0 s seen at 2 s, half-life 2 s: %v, want 2", got)
	}
	s.took(1, 2, 2)
	if s.recent[1] != 3 || s.recentAt[1] != 2 {
		t.Errorf("one more at 2 s: %v at %v s, want 3 at 2 s", s.recent[1], s.recentAt[1])
	}
}
