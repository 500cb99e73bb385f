package engine

import "testing"

// A seed's output tail should be named under the next turn's ids, as a
// direct append's is: DecodeOnly requests never run prefillDone, so
// lastWhole stays 0 and nameOutput drops the tail.
func TestRegressionSeedOutputNamed(t *testing.T) {
	for _, seed := range []bool{false, true} {
		w := sessionWorker(t, EvictSession, 50000)
		b := chain(1, 120)
		var now float64
		if seed {
			now = seedOn(t, w, 0, "s", b[:100], 6400, 200)
		} else {
			r := &Request{ID: 1, Kind: Full, Session: "s", KeepSession: true, Blocks: b[:100], Input: 6400, Output: 200}
			if err := w.Submit(0, r); err != nil {
				t.Fatal(err)
			}
			now, _ = drive(w, 0)
		}
		rep := w.AdmitSession(now, AdmitQuery{Session: "s", Blocks: b, Input: 7680, Output: 5, MaxAppend: 8192})
		// 6400 prompt + 199 output KV tokens: 103 whole blocks = 6592.
		if rep.CachedTokens != 6592 {
			t.Errorf("first turn seed=%v: next turn finds %d cached, want 6592 (prompt + named output)", seed, rep.CachedTokens)
		}
		checkPool(t, w)
	}
}

// With block granularity sessions are never dropped from dsess, so a
// session cap refuses every new session once Cap sessions ever visited,
// even when the pool is empty.
func TestRegressionSessionCapBlockGranularity(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000,
		Session: SessionConfig{Enabled: true, Cap: 1, Eviction: EvictBlock}})
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
	// make a's KV go away entirely: fill and drain the pool with other work
	// is not even needed; the cap alone refuses.
	rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: chain(2, 10), Input: 640, Output: 4})
	if !rep.CanAdmit {
		t.Errorf("second session on an idle block-granular decoder with cap 1: %+v (a is idle and evictable)", rep)
	}
}

// nameOutput's makeRoom trims with now = 0 and no exception: naming a
// session's own output can evict that very session, so its next turn is
// told "session-was-evicted" and reseeded although another idle session
// was the one to trim.
func TestRegressionNameOutputTrimsItsOwnSession(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 10, PoolTokens: 990,
		Session: SessionConfig{Enabled: true}})
	sb := append(chain(1, 40), 999) // 409 tokens: 40 whole blocks + 9
	r := &Request{ID: 1, Kind: Full, Session: "s", KeepSession: true, Blocks: sb, Input: 409, Output: 42}
	if err := w.Submit(0, r); err != nil {
		t.Fatal(err)
	}
	now, _ := drive(w, 0)
	w.TakeEvents()
	now = seedOn(t, w, now+1, "o", chain(2, 50), 500, 40)
	next := append(chain(1, 40), chain(3, 20)...) // continues s's whole blocks
	rep := w.AdmitSession(now+1, AdmitQuery{Session: "s", Blocks: next, Input: 600, Output: 4, MaxAppend: 8192})
	if rep.Mode != AdmitDirect {
		t.Errorf("s's next turn: %+v; sessions now %v (s evicted itself while naming its output)", rep, w.Sessions())
	}
	for _, ev := range w.TakeEvents() {
		if ev.Kind == EvSessionEvicted && ev.Time < now {
			t.Errorf("eviction of %s reported at t=%v, before now=%v", ev.Session, ev.Time, now)
		}
	}
	checkPool(t, w)
}

// At block granularity makeRoomFor compares the oldest tail with the oldest
// leaf once, then lets Nibble free across as many leaves as it needs:
// leaves newer than a tail go before the tail.
func TestRegressionNibbleSkipsOlderTail(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 10, PoolTokens: 250,
		Session: SessionConfig{Enabled: true, Eviction: EvictBlock}})
	c := chain(5, 10)
	now := 0.0
	sub := func(id int64, sess string, b []uint64, in, out int) {
		r := &Request{ID: id, Kind: Full, Session: sess, KeepSession: sess != "", Blocks: b, Input: in, Output: out}
		if err := w.Submit(now, r); err != nil {
			t.Fatal(err)
		}
		now, _ = drive(w, now)
		now += 1
	}
	sub(1, "", chain(1, 1), 10, 1)   // leaf L1, oldest
	sub(2, "a", c[:5], 50, 101)      // prompt (inner node later) + 100-token tail
	sub(3, "", c, 100, 1)            // leaf c[5:10], newer than a's tail
	sub(4, "", chain(7, 10), 100, 1) // needs 101 with 40 free
	if got := w.PrefixMatch(c, 100); got != 100 {
		t.Errorf("c lost %d of its tokens while session a's older tail (live %v) was kept", 100-got, w.tail(SessionKey{ID: "a"}) != nil)
	}
	checkPool(t, w)
}

// A run cut before it started behind a trim's stall is replanned, and the
// rest of the stall is reported again: EvStall events sum past Stats.StallS.
func TestRegressionStallReportedTwice(t *testing.T) {
	w := sessionWorker(t, EvictSession, 30000)
	now := seedOn(t, w, 0, "a", chain(1, 200), 12800, 4)
	if rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: chain(2, 282), Input: 18000, Output: 50}); rep.Trimmed != 1 {
		t.Fatalf("%+v", rep)
	}
	b := &Request{ID: 2, Kind: DecodeOnly, Session: "b", KeepSession: true, Blocks: chain(2, 282), Input: 18000, Output: 50}
	w.Reserve(now, b)
	w.StartDecode(now, b)
	w.Advance(now) // plans b's run behind the 0.5 s stall
	c := &Request{ID: 3, Kind: DecodeOnly, Input: 100, Output: 5}
	w.Reserve(now+0.1, c)
	w.StartDecode(now+0.1, c) // cuts the run that has not started
	_, evs := drive(w, now+0.1)
	evs = append(w.TakeEvents(), evs...)
	var sum float64
	for _, ev := range evs {
		if ev.Kind == EvStall {
			sum += ev.Stall
		}
	}
	if !near(sum, w.Stats().StallS) {
		t.Errorf("EvStall events sum to %.3f s, StallS is %.3f s", sum, w.Stats().StallS)
	}
}
