package engine

import "testing"

func chain(ns uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = ns<<32 | uint64(i+1)
	}
	return out
}

func sessionWorker(t *testing.T, ev Eviction, pool int64) *Worker {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool,
		Session: SessionConfig{Enabled: true, Eviction: ev, TrimStallS: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// seedOn runs a KVC seed on d: the whole prompt's KV arrives from P and the
// session keeps it.
func seedOn(t *testing.T, w *Worker, now float64, sess string, blocks []uint64, input, output int) float64 {
	t.Helper()
	r := &Request{ID: 1, Kind: DecodeOnly, Session: sess, KeepSession: true, Blocks: blocks, Input: input, Output: output}
	if err := w.Reserve(now, r); err != nil {
		t.Fatal(err)
	}
	w.TakeEvents()
	if err := w.StartDecode(now, r); err != nil {
		t.Fatal(err)
	}
	end, _ := drive(w, now)
	checkPool(t, w)
	return end
}

// A seeded session is resident: its next turn is admitted as a direct
// append that prefills only the new tokens on D.
func TestSessionSeedThenDirectAppend(t *testing.T) {
	w := sessionWorker(t, EvictSession, 50000)
	b := chain(1, 120)
	now := seedOn(t, w, 0, "s", b[:100], 6400, 10)
	rep := w.AdmitSession(now, AdmitQuery{Session: "s", Blocks: b, Input: 7680, Output: 5, MaxAppend: 8192})
	if !rep.CanAdmit || rep.Mode != AdmitDirect || rep.CachedTokens != 6400 {
		t.Fatalf("reply %+v, want a direct append over 6,400 cached tokens", rep)
	}
	if rep := w.AdmitSession(now, AdmitQuery{Session: "s", Blocks: b, Input: 7680, Output: 5, MaxAppend: 1000}); rep.CanAdmit || rep.Reason != ReasonLargeAppend {
		t.Fatalf("append of 1,280 over τ_append 1,000: reply %+v", rep)
	}
	r := &Request{ID: 2, Kind: Full, Session: "s", KeepSession: true, Blocks: b, Input: 7680, Output: 5}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	drive(w, now)
	checkPool(t, w)
	if r.CachedTokens != 6400 || w.Stats().PrefillTokens != 1280 {
		t.Fatalf("direct append cached %d, prefilled %d; want 6,400 and 1,280", r.CachedTokens, w.Stats().PrefillTokens)
	}
	if got := w.Sessions(); len(got) != 1 || got[0] != "s" {
		t.Fatalf("sessions %v", got)
	}
}

// Under pressure a session-granular cache frees a whole idle session (and
// charges the trim as a stall); a revisit is a reseed of everything. A
// block-granular cache loses only the oldest leaves and a revisit appends
// on what is left.
func TestSessionEvictionGranularity(t *testing.T) {
	for _, tc := range []struct {
		ev         Eviction
		wantMode   AdmitMode
		wantCached func(int) bool
	}{
		{EvictSession, AdmitSeed, func(c int) bool { return c == 0 }},
		{EvictBlock, AdmitDirect, func(c int) bool { return c > 0 && c < 12800 }},
	} {
		w := sessionWorker(t, tc.ev, 30000)
		a, b := chain(1, 200), chain(2, 282)
		now := seedOn(t, w, 0, "a", a, 12800, 4)
		// Session b needs 18,000 + 4 tokens: 30,000 − 12,803 held is not
		// enough without freeing some of a.
		rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4})
		if !rep.CanAdmit || rep.Mode != AdmitSeed {
			t.Fatalf("%d: b's admission %+v", tc.ev, rep)
		}
		if tc.ev == EvictSession && (rep.Trimmed != 1 || rep.TrimmedTok < 12800) {
			t.Fatalf("session granularity trimmed %d sessions / %d tokens, want a whole", rep.Trimmed, rep.TrimmedTok)
		}
		now = seedOn(t, w, now, "b", b, 18000, 4)
		if tc.ev == EvictSession && w.Stats().StallS != 0.5 {
			t.Fatalf("trim stall %v s, want 0.5", w.Stats().StallS)
		}
		rep = w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: append(a, chain(3, 10)...), Input: 13440, Output: 4})
		if rep.Mode != tc.wantMode || !tc.wantCached(rep.CachedTokens) {
			t.Fatalf("granularity %d: revisit %+v", tc.ev, rep)
		}
		checkPool(t, w)
	}
}

// A per-D session cap refuses a new session unless an idle one can go.
func TestSessionCap(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000,
		Session: SessionConfig{Enabled: true, Cap: 1}})
	r := &Request{ID: 1, Kind: DecodeOnly, Session: "a", KeepSession: true, Blocks: chain(1, 10), Input: 640, Output: 200}
	w.Reserve(0, r)
	w.StartDecode(0, r)
	w.Advance(0) // a is decoding: not idle
	if rep := w.AdmitSession(0, AdmitQuery{Session: "b", Blocks: chain(2, 10), Input: 640, Output: 4}); rep.CanAdmit || rep.Reason != ReasonSessionCap {
		t.Fatalf("second session with a busy first one: %+v", rep)
	}
	now, _ := drive(w, 0)
	if rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: chain(2, 10), Input: 640, Output: 4}); !rep.CanAdmit || rep.Trimmed != 1 {
		t.Fatalf("second session once the first is idle: %+v", rep)
	}
}

// A session that nearly fills its decoder can still take its next turn
// direct: the pin on its old KV is released when the turn is admitted (the
// turn locks what it reuses), so the old partial block does not crowd the
// turn out of its own pool. A 20-request seed-swe run on the H100 profile
// once stalled on this.
func TestDirectAppendNearlyFillingThePool(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 10, PoolTokens: 1000,
		Session: SessionConfig{Enabled: true}})
	b := chain(1, 96)
	first := append(append([]uint64(nil), b[:90]...), 777) // 905 tokens: 90 whole blocks + 5 in its own last block
	now := seedOn(t, w, 0, "s", first, 905, 2)
	r := &Request{ID: 2, Kind: Full, Session: "s", KeepSession: true, Blocks: b, Input: 958, Output: 40}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	_, evs := drive(w, now)
	done := false
	for _, ev := range evs {
		done = done || (ev.Kind == EvFinished && ev.Req == r)
	}
	if !done || r.CachedTokens != 900 {
		t.Fatalf("direct append finished %v with %d cached; want it to run over the 900 whole-block tokens", done, r.CachedTokens)
	}
	checkPool(t, w)
}

// capacity-backup keeps a seed's prompt on the prefill worker through LRU
// pressure, up to min(4, max(1, pool / (2 · prompt))) sessions; without it
// the prompt is evicted like any cache entry.
func TestPrefillCapacityBackup(t *testing.T) {
	for _, keep := range []bool{false, true} {
		w, _ := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 10, PoolTokens: 3000,
			PrefixCache: true, PrefillBackup: keep})
		run := func(id int64, sess string, blocks []uint64, seed bool) {
			r := &Request{ID: id, Kind: PrefillOnly, Session: sess, KeepSession: seed, Blocks: blocks, Input: len(blocks) * 10}
			if err := w.Submit(0, r); err != nil {
				t.Fatal(err)
			}
			drive(w, 0)
			if err := w.Release(0, r); err != nil {
				t.Fatal(err)
			}
		}
		a := chain(1, 100)
		run(1, "a", a, true)
		for i := int64(2); i < 6; i++ {
			run(i, "x", chain(uint64(i), 100), false) // plain traffic filling the pool
		}
		kept := w.PrefixMatch(a, 1000) == 1000
		if kept != keep {
			t.Fatalf("backup %v: session a's seed-time prompt kept %v (backups %v)", keep, kept, w.Backups())
		}
		checkPool(t, w)
	}
}
