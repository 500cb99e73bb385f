package engine

import "testing"

// A session's direct append that cannot be admitted yet (the pool is held
// by another request) waits on the queue; its session must stay pinned
// meanwhile. admit() released the pin before making room and kept it
// released when that failed, so another admission took the session's KV
// as plain LRU cache: no eviction was reported (the router still believed
// the session resident) and the append, admitted later, found nothing
// cached (issue 20, "admit() unpins before makeRoomFor").
func TestFailedAdmissionKeepsSessionPinned(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 10, PoolTokens: 1000,
		Session: SessionConfig{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	now := seedOn(t, w, 0, "s", chain(1, 20), 200, 2) // s pins 200 tokens
	// x holds 300 prompt + 400 output tokens for a long decode.
	x := &Request{ID: 2, Kind: Full, Blocks: chain(2, 30), Input: 300, Output: 400}
	if err := w.Submit(now, x); err != nil {
		t.Fatal(err)
	}
	step := func() {
		t.Helper()
		next, ok := w.NextTime()
		if !ok {
			t.Fatal("the worker is idle")
		}
		now = next
		w.Advance(now)
		w.TakeEvents()
	}
	step()
	if x.Stage == StageWaiting {
		t.Fatal("x was not admitted")
	}
	// s's next turn appends 200 tokens + 10 output: more than is free.
	r := &Request{ID: 3, Kind: Full, Session: "s", KeepSession: true, Blocks: chain(1, 40), Input: 400, Output: 10}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	step()
	if r.Stage != StageWaiting {
		t.Fatalf("r admitted (stage %v) with %d free: the scenario needs it to wait", r.Stage, w.free())
	}
	if s := w.sess(SessionKey{ID: "s"}); s == nil || !s.pinned || w.tree.EvictableTokens() != 0 {
		t.Fatalf("after a failed admission: session pinned %v, %d tokens evictable; want it pinned, nothing evictable",
			s != nil && s.pinned, w.tree.EvictableTokens())
	}
	// Another session's seed reserves room meanwhile.
	y := &Request{ID: 4, Kind: DecodeOnly, Session: "y", KeepSession: true, Blocks: chain(3, 15), Input: 150, Output: 2}
	if err := w.Reserve(now, y); err != nil {
		t.Fatal(err)
	}
	_, evs := drive(w, now)
	evicted := false
	for _, ev := range evs {
		evicted = evicted || ev.Kind == EvSessionEvicted && ev.Session == "s"
	}
	if !evicted && r.CachedTokens != 200 {
		t.Fatalf("s's append found %d tokens cached and no eviction of s was reported: its KV was lost silently", r.CachedTokens)
	}
	checkPool(t, w)
}

// Two admissions granted before either seed arrives both pass the session
// cap (a grant reserves nothing, and neither session is resident yet), so
// both seeds made themselves resident over a cap of 1. The simulator's
// property test found it (seed 164). The cap holds once the seeds end: the
// later one trims the least recently used idle session over the cap, as
// its admission would have.
func TestSessionCapConcurrentGrants(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000,
		Session: SessionConfig{Enabled: true, Cap: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if rep := w.AdmitSession(0, AdmitQuery{Session: s, Blocks: chain(uint64(s[0]), 10), Input: 640, Output: 4}); !rep.CanAdmit {
			t.Fatalf("%s: %+v, want a seed granted (nothing resident yet)", s, rep)
		}
	}
	now := seedOn(t, w, 0, "a", chain('a', 10), 640, 4)
	now = seedOn(t, w, now, "b", chain('b', 10), 640, 4)
	if n := w.ResidentSessions(); n > 1 {
		t.Fatalf("%d sessions resident under a session cap of 1", n)
	}
	if _, _, ok := w.SessionPath("b"); !ok {
		t.Fatal("b, the later seed, is not resident")
	}
	checkPool(t, w)
}
