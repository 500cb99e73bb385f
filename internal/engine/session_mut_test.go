package engine

import "testing"

// A seeded session at session granularity pins its whole prompt and its
// output tail: a 640-token prompt and a 4-token seed hold 640 + 3 tokens
// (the last token has no KV), none of it evictable. At block granularity
// nothing is pinned: the prompt is plain cache (640 evictable) and the
// tail is evictable too, 640 + 3 = 643.
func TestPinnedAndEvictableExact(t *testing.T) {
	for _, tc := range []struct {
		ev        Eviction
		pinned    int64
		evictable int64
	}{
		{EvictSession, 643, 0},
		{EvictBlock, 0, 643},
	} {
		w := sessionWorker(t, tc.ev, 30000)
		seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
		if got := w.PinnedTokens(); got != tc.pinned {
			t.Errorf("eviction %d: %d tokens pinned, want %d", tc.ev, got, tc.pinned)
		}
		if got := w.evictable(); got != tc.evictable {
			t.Errorf("eviction %d: %d tokens evictable, want %d", tc.ev, got, tc.evictable)
		}
	}
}

// A whole-session trim charges TrimStallS + TrimStallPerTokenS per token
// freed, from now: the 643 tokens of the seed above at 0.5 s + 1 ms per
// token stall the scheduler 1.143 s, reported as one EvStall. A trim that
// costs nothing reports no stall and leaves stallUntil where it was.
func TestChargeTrimExact(t *testing.T) {
	for _, tc := range []struct {
		fixed, perTok float64
		stall         float64
	}{
		{0.5, 0.001, 0.5 + 0.643},
		{0, 0.001, 0.643},
		{0, 0, 0},
	} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, TrimStallS: tc.fixed, TrimStallPerTokenS: tc.perTok}})
		if err != nil {
			t.Fatal(err)
		}
		now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
		w.TakeEvents()
		before := w.stallUntil
		var rep AdmitReply
		if !w.trimOne(now, "", &rep) || rep.Trimmed != 1 || rep.TrimmedTok != 643 {
			t.Fatalf("trim %+v, want one session of 643 tokens", rep)
		}
		if !near(w.Stats().StallS, tc.stall) {
			t.Errorf("%v + %v/token: stall %v s, want %v", tc.fixed, tc.perTok, w.Stats().StallS, tc.stall)
		}
		stalls := 0
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvStall {
				stalls++
				if !near(ev.Stall, tc.stall) || ev.Time != now {
					t.Errorf("stall event %+v, want %v s at %v", ev, tc.stall, now)
				}
			}
		}
		wantUntil := now + tc.stall
		if tc.stall == 0 {
			wantUntil = before
		}
		if stalls != map[bool]int{true: 0, false: 1}[tc.stall == 0] || !near(w.stallUntil, wantUntil) {
			t.Errorf("%v + %v/token: %d stall events, stall until %v; want until %v", tc.fixed, tc.perTok, stalls, w.stallUntil, wantUntil)
		}
	}
}

// With a cap of two, two seeded sessions both stay resident: holdCap trims
// only while MORE than the cap are resident.
func TestHoldCapAtTheCap(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
		Session: SessionConfig{Enabled: true, Cap: 2}})
	if err != nil {
		t.Fatal(err)
	}
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
	seedOn(t, w, now, "b", chain(2, 10), 640, 4)
	if got := w.ResidentSessions(); got != 2 || w.Stats().SessionEvictions != 0 {
		t.Fatalf("%d resident, %d evicted; want both resident at cap 2", got, w.Stats().SessionEvictions)
	}
}

// A seed shorter than one block (30 tokens in its one partial block) has
// no whole block to name its output tail under, and is kept all the same:
// 30 prompt tokens + 3 tail pinned.
func TestSeedShorterThanABlock(t *testing.T) {
	w := sessionWorker(t, EvictSession, 30000)
	seedOn(t, w, 0, "a", chain(1, 1), 30, 4)
	if got := w.PinnedTokens(); got != 33 || w.ResidentSessions() != 1 {
		t.Fatalf("%d pinned, %d resident; want 33 and 1", got, w.ResidentSessions())
	}
}

// Sessions lists the most recently used first, ties by id: a ended at the
// first seed's end, b later, c and d together at a third time.
func TestSessionsOrder(t *testing.T) {
	w := sessionWorker(t, EvictSession, 30000)
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
	now = seedOn(t, w, now+1, "b", chain(2, 10), 640, 4)
	now++
	// d before c, so that map order alone does not decide the tie.
	for i, sess := range []string{"d", "c"} {
		r := &Request{ID: int64(10 + i), Kind: DecodeOnly, Session: sess, KeepSession: true, Blocks: chain(uint64(3+i), 10), Input: 640, Output: 4}
		if err := w.Reserve(now, r); err != nil {
			t.Fatal(err)
		}
		if err := w.StartDecode(now, r); err != nil {
			t.Fatal(err)
		}
	}
	drive(w, now)
	got := w.Sessions()
	want := []string{"c", "d", "b", "a"}
	if len(got) != len(want) {
		t.Fatalf("sessions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sessions %v, want %v", got, want)
		}
	}
	if a, c := w.sess(SessionKey{ID: "a"}).lastUse, w.sess(SessionKey{ID: "c"}).lastUse; w.sess(SessionKey{ID: "d"}).lastUse != c || a >= w.sess(SessionKey{ID: "b"}).lastUse {
		t.Fatalf("lastUse a %v b %v c %v d %v: the scenario lost its tie", a, w.sess(SessionKey{ID: "b"}).lastUse, c, w.sess(SessionKey{ID: "d"}).lastUse)
	}
}

// ForgetSession: an unknown session is a no-op; an evicted one's record
// goes at once; a resident one's stays (Tracked counts it) until its
// eviction drops it.
func TestForgetSession(t *testing.T) {
	w := sessionWorker(t, EvictSession, 30000)
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
	now = seedOn(t, w, now, "b", chain(2, 10), 640, 4)
	w.ForgetSession("nobody")
	if w.Tracked() != 2 {
		t.Fatalf("%d tracked after forgetting an unknown session, want 2", w.Tracked())
	}
	var rep AdmitReply
	if !w.trimOne(now, "b", &rep) { // evicts a, the only other
		t.Fatal("no trim")
	}
	if w.Tracked() != 2 || w.ResidentSessions() != 1 {
		t.Fatalf("after evicting a: %d tracked, %d resident; want 2 and 1 (a's record kept)", w.Tracked(), w.ResidentSessions())
	}
	w.ForgetSession("a")
	if w.Tracked() != 1 {
		t.Fatalf("after forgetting evicted a: %d tracked, want 1", w.Tracked())
	}
	w.ForgetSession("b")
	if w.Tracked() != 1 {
		t.Fatalf("forgetting resident b dropped its record at once: %d tracked", w.Tracked())
	}
	if !w.trimOne(now, "", &rep) {
		t.Fatal("no trim of b")
	}
	if w.Tracked() != 0 || w.ResidentSessions() != 0 {
		t.Fatalf("after evicting forgotten b: %d tracked, %d resident; want 0 and 0", w.Tracked(), w.ResidentSessions())
	}
}

// At block granularity an eviction forgets the session; one with a
// request still here no longer counts as resident: 1 → 0.
func TestEvictBlockSessionWithRequestHere(t *testing.T) {
	w := sessionWorker(t, EvictBlock, 30000)
	r := &Request{ID: 1, Kind: DecodeOnly, Session: "a", KeepSession: true, Blocks: chain(1, 10), Input: 640, Output: 4}
	w.sessionStart(0, r)
	if w.ResidentSessions() != 1 {
		t.Fatalf("%d resident with a request here, want 1", w.ResidentSessions())
	}
	w.evictSession(0, w.sess(SessionKey{ID: "a"}))
	if w.ResidentSessions() != 0 || w.Tracked() != 0 {
		t.Fatalf("after eviction: %d resident, %d tracked; want 0 and 0", w.ResidentSessions(), w.Tracked())
	}
}

// IngestSnapshot in a 640-token pool (10 blocks of 64) with nothing
// evictable but what the snapshot itself does not lock. add is the tokens
// not yet cached: (blocks − matched − 1)·64 + the last block's tokens.
func TestIngestSnapshotRoom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // blocks of chain(1, …) ingested first, whole
		blocks int
		tokens int64
		ok     bool
		added  int64
	}{
		// 10 whole blocks: add = 9·64 + 64 = 640, exactly the pool.
		{"fills the pool", 0, 10, 640, true, 640},
		// 11 blocks, 650 tokens: the last holds 650 − 640 = 10, add = 650 > 640.
		{"ten tokens too many", 0, 11, 650, false, 0},
		// 5 blocks cached first: add = (10 − 5 − 1)·64 + 64 = 320, the free rest.
		{"the rest after a prefix", 5, 10, 640, true, 320},
		// 3 blocks, 128 tokens: the last block would hold 0: taken whole, add 192.
		{"empty last block taken whole", 0, 3, 128, true, 192},
		// 10 whole blocks cached: nothing to add.
		{"already cached", 10, 10, 640, true, 0},
	} {
		w := snapshotPrefill(t, 640)
		if tc.before > 0 {
			if n, ok := w.IngestSnapshot(0, chain(1, tc.before), 0); !ok || n != int64(tc.before)*64 {
				t.Fatalf("%s: first ingest %d %v", tc.name, n, ok)
			}
		}
		n, ok := w.IngestSnapshot(1, chain(1, tc.blocks), tc.tokens)
		if ok != tc.ok || n != tc.added {
			t.Errorf("%s: ingest added %d, ok %v; want %d, %v", tc.name, n, ok, tc.added, tc.ok)
		}
		if want := int64(tc.before)*64 + tc.added; w.CachedTokens() != want {
			t.Errorf("%s: %d tokens cached, want %d", tc.name, w.CachedTokens(), want)
		}
		checkPool(t, w)
	}
}
