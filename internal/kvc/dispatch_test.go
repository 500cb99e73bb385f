package kvc

import "testing"

func kvcDispatcher(reset RejectReset, tau int) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: tau, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: reset, Belief: BeliefTrack},
		[]string{"p0"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// serve runs one request through the dispatcher: decoders in refuse answer
// no-space, others admit (direct when the session is pinned there).
func serve(t *testing.T, x *Dispatcher, turn int, refuse map[int]bool) *Dispatch {
	t.Helper()
	d := x.Begin(0, Request{Session: "s", Turn: turn, Blocks: []uint64{1, 2, uint64(10 + turn)}, Input: 150, Output: 5})
	for i := 0; d.Action().Kind == ActAdmit; i++ {
		if i > 10 {
			t.Fatal("admission loop")
		}
		a := d.Action()
		switch {
		case refuse[a.D]:
			d.Reply(AdmitReply{Reason: "no-space"})
		default:
			d.Reply(AdmitReply{CanAdmit: true, Direct: x.session(SessionKey{ID: "s"}).pin == a.D, Reason: "session-not-resident"})
		}
	}
	d.Accepted()
	d.Finished(true)
	return d
}

// Rejects are counted per (session, decoder) from the structured reply; at
// τ_reject the decoder is skipped for the session; with reset on success the
// count returns to 0 after a direct success there, with reset off never.
func TestRejectBlacklistAndReset(t *testing.T) {
	for _, tc := range []struct {
		reset RejectReset
		want  int // rejects left on d0 after a direct success there
	}{{ResetDirect, 0}, {ResetAny, 0}, {ResetOff, 2}} {
		x := kvcDispatcher(tc.reset, 3)
		serve(t, x, 1, nil) // seeds on d0
		if p := x.session(SessionKey{ID: "s"}).pin; p != 0 {
			t.Fatalf("seeded on d%d", p)
		}
		serve(t, x, 2, map[int]bool{0: true}) // d0 refuses: reseed elsewhere
		serve(t, x, 3, map[int]bool{0: true, 1: true, 2: true})
		if got := x.Rejects("s", 0); got != 2 {
			t.Fatalf("%s: %d rejects on d0, want 2", tc.reset, got)
		}
		// Back on d0 (it admits again): the seed case, then a direct one.
		x.session(SessionKey{ID: "s"}).pin = 0
		d := serve(t, x, 4, nil)
		if d.Mode() != "kvcache-direct-to-d-session" {
			t.Fatalf("turn 4 went %s (%v)", d.Mode(), d.Path())
		}
		if got := x.Rejects("s", 0); got != tc.want {
			t.Fatalf("%s: %d rejects on d0 after a direct success, want %d", tc.reset, got, tc.want)
		}
	}
	// At τ_reject the decoder is skipped.
	x := kvcDispatcher(ResetOff, 2)
	serve(t, x, 1, nil)
	serve(t, x, 2, map[int]bool{0: true})
	serve(t, x, 3, map[int]bool{0: true})
	d := x.Begin(0, Request{Session: "s", Turn: 4, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	if a := d.Action(); a.Kind != ActAdmit || a.D == 0 {
		t.Fatalf("after 2 rejects with τ_reject 2, the first admission went to d%d", a.D)
	}
}

// A quiet dispatcher keeps no path and decides as one that does: the same
// actions, modes and reject counts for the same answers.
func TestQuietDispatcherDecidesTheSame(t *testing.T) {
	loud, quiet := kvcDispatcher(ResetDirect, 2), kvcDispatcher(ResetDirect, 2)
	quiet.SetQuiet()
	refuse := []map[int]bool{nil, {0: true}, {0: true, 1: true}, {0: true, 1: true, 2: true}, nil}
	for turn, r := range refuse {
		a, b := serve(t, loud, turn+1, r), serve(t, quiet, turn+1, r)
		if len(a.Path()) == 0 {
			t.Fatalf("turn %d: the recording dispatcher kept no path", turn+1)
		}
		if len(b.Path()) != 0 {
			t.Fatalf("turn %d: the quiet dispatcher kept a path: %q", turn+1, b.Path())
		}
		if a.Mode() != b.Mode() || a.Decoder() != b.Decoder() || loud.Rejects("s", 0) != quiet.Rejects("s", 0) {
			t.Fatalf("turn %d: recording %s on d%d (%d rejects), quiet %s on d%d (%d rejects)", turn+1,
				a.Mode(), a.Decoder(), loud.Rejects("s", 0), b.Mode(), b.Decoder(), quiet.Rejects("s", 0))
		}
	}
}
