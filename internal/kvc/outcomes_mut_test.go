package kvc

import (
	"strings"
	"testing"
)

// The trace names an accepted dispatch with its action and mode.
func TestTraceNamesAccepted(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	var calls []string
	x.SetTrace(func(c string) { calls = append(calls, c) })
	serve(t, x, 1, nil)
	if got := strings.Join(calls, "\n"); !strings.Contains(got, "Accepted ") {
		t.Errorf("trace %q names no Accepted", got)
	}
}

// The trace names Finished and a decoder's SessionEvicted too, each with
// its arguments (both format their line only when a trace is set).
func TestTraceNamesFinishedAndEvicted(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	var calls []string
	x.SetTrace(func(c string) { calls = append(calls, c) })
	serve(t, x, 1, nil)
	x.SessionEvicted(2, "gone")
	got := strings.Join(calls, "\n")
	for _, want := range []string{"Finished ok", "SessionEvicted d2 gone"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace %q names no %q", got, want)
		}
	}
}

// A seed's end of prefill gives its decoder's seed slot back
// (seed-max-inflight 1).
func TestSeedSlotFreedAtPrefillDone(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	x.cfg.SeedMaxInflight = 1
	for i, s := range []string{"a", "b"} {
		d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: []uint64{uint64(10 * (i + 1))}, Input: 150, Output: 5})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		a := d.Action()
		if a.Kind != ActSeed {
			t.Fatalf("%s: %+v, want a seed", s, a)
		}
		d.Accepted()
		if x.seeding[a.D] != 1 {
			t.Fatalf("%s accepted: %d seeds in flight on d%d, want 1", s, x.seeding[a.D], a.D)
		}
		d.PrefillDone()
		if x.seeding[a.D] != 0 {
			t.Fatalf("%s's prefill done: %d seeds in flight on d%d, want 0", s, x.seeding[a.D], a.D)
		}
		d.Finished(true)
	}
}

// A session's first accepted request that fails leaves it unseen (its
// retry is a first turn again), unless another of its requests is in
// flight: that one may still keep it.
func TestFirstFailureForgetsSeenUnlessAnotherInFlight(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	begin := func(turn int) *Dispatch {
		d := x.Begin(0, Request{Session: "s", Turn: turn, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		d.Accepted()
		return d
	}
	d := begin(1)
	d.Finished(false)
	if x.sess(SessionKey{ID: "s"}).seen {
		t.Fatal("the first request failed alone: seen, want unseen")
	}
	a := begin(1)
	b := begin(2)
	a.Finished(false)
	if !x.sess(SessionKey{ID: "s"}).seen {
		t.Error("the first request failed with another in flight: unseen, want seen")
	}
	b.Finished(true)
}

// An eviction report forgets what the decoder held of the session; one
// from a decoder added after the session was placed has nothing to forget.
func TestSessionEvictedForgetsTheBlocks(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	serve(t, x, 1, nil) // seeds on d0: blocks 1, 2, 11
	if ov := x.d.Pick("u", []uint64{1, 2, 11}).Overlap; ov != 3 {
		t.Fatalf("after turn 1 d0 holds %d of its blocks, want 3", ov)
	}
	x.SessionEvicted(0, "s")
	if d := x.d.Pick("u", []uint64{1, 2, 11}); d.Overlap != 0 {
		t.Errorf("after the eviction: %+v, want no overlap anywhere", d)
	}
	x.AddDecoder("d3")
	x.SessionEvicted(3, "s")
}
