package engine

import "testing"

// The boundaries the mutation round found unheld (docs/mutation.md): each
// test fails on the named mutant.

// τ_append is the largest direct append: an append of exactly τ_append is
// admitted direct, one token more is real-large-append (mutant: > → >=).
func TestTauAppendBoundary(t *testing.T) {
	w := sessionWorker(t, EvictSession, 50000)
	b := chain(1, 120)
	now := seedOn(t, w, 0, "s", b[:100], 6400, 10)
	q := AdmitQuery{Session: "s", Blocks: b, Input: 7680, Output: 5} // appends 1,280 over 6,400 cached
	q.MaxAppend = 1280
	if rep := w.AdmitSession(now, q); !rep.CanAdmit || rep.Mode != AdmitDirect {
		t.Fatalf("an append of 1,280 = τ_append: %+v, want a direct append", rep)
	}
	q.MaxAppend = 1279
	if rep := w.AdmitSession(now, q); rep.CanAdmit || rep.Reason != ReasonLargeAppend {
		t.Fatalf("an append of 1,280 over τ_append 1,279: %+v, want real-large-append", rep)
	}
}

// Output tails and radix leaves go in one least-recently-used order: a
// tail older than every leaf goes first, and the leaves stay (mutant: the
// comparison reversed).
func TestEvictionTailBeforeNewerLeaf(t *testing.T) {
	w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1000, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	now := 0.0
	run := func(r *Request) {
		t.Helper()
		if err := w.Submit(now, r); err != nil {
			t.Fatal(err)
		}
		now, _ = drive(w, now)
		checkPool(t, w)
	}
	run(&Request{ID: 1, Kind: Full, Session: "a", Blocks: chain(1, 4), Input: 256, Output: 20}) // a's prompt leaf and a 19-token tail, at t1
	run(&Request{ID: 2, Kind: Full, Blocks: chain(2, 4), Input: 256, Output: 1})                // b's leaf at t2
	run(&Request{ID: 3, Kind: Full, Blocks: chain(1, 4), Input: 256, Output: 1})                // a's leaf touched at t3
	if w.tail(SessionKey{ID: "a"}) == nil {
		t.Fatal("no output tail kept for a")
	}
	// 481 tokens needed, 469 free: the oldest entry, a's tail, is enough.
	run(&Request{ID: 4, Kind: Full, Blocks: chain(3, 8), Input: 480, Output: 1})
	if w.tail(SessionKey{ID: "a"}) != nil {
		t.Fatal("a's tail, the least recently used, was kept")
	}
	if m := w.tree.Match(chain(2, 4), 64); m.Tokens != 256 {
		t.Fatalf("b's prompt leaf, newer than a's tail, lost: %d of 256 tokens cached", m.Tokens)
	}
}

// The low watermark trims on past what an admission needs only when the
// admission had to trim (mutants: the trigger without its trim, or after
// two).
func TestLowWatermarkTrigger(t *testing.T) {
	setup := func() (*Worker, float64) {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 10000,
			Session: SessionConfig{Enabled: true, LowWatermark: 0.3}})
		if err != nil {
			t.Fatal(err)
		}
		now := seedOn(t, w, 0, "s1", chain(1, 47), 3000, 1)
		now = seedOn(t, w, now, "s2", chain(2, 47), 3000, 1)
		return w, now
	}
	// 4,000 free: 1,004 fit without a trim, though short of the watermark.
	w, now := setup()
	if rep := w.AdmitSession(now, AdmitQuery{Session: "s3", Blocks: chain(3, 16), Input: 1000, Output: 4}); !rep.CanAdmit || rep.Trimmed != 0 {
		t.Fatalf("an admission that fits: %+v, want no trim", rep)
	}
	// 5,004 need one trim (s1); the watermark (3,000 more) takes s2 too.
	w, now = setup()
	if rep := w.AdmitSession(now, AdmitQuery{Session: "s3", Blocks: chain(3, 79), Input: 5000, Output: 4}); !rep.CanAdmit || rep.Trimmed != 2 {
		t.Fatalf("an admission that trimmed once: %+v, want the watermark's second trim", rep)
	}
}

// A waiting request whose uncached prompt is exactly BypassTokens still
// rides past a long chunked prefill (mutant: > → >=).
func TestPrefillBypassBoundary(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleColocated, Profile: testProfile(t), BlockSize: 64, PoolTokens: 400000, ChunkTokens: 8192,
		MaxRunning: 64, PrefixCache: true, Session: SessionConfig{Enabled: true, BypassTokens: 128}})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Session: "a", Blocks: chain(1, 640), Input: 40960, Output: 2}
	b := &Request{ID: 2, Kind: Full, Session: "b", Blocks: chain(2, 2), Input: 128, Output: 2}
	if err := w.Submit(0, a); err != nil {
		t.Fatal(err)
	}
	w.Advance(0)
	if err := w.Submit(0.001, b); err != nil {
		t.Fatal(err)
	}
	drive(w, 0.001)
	checkPool(t, w)
	if !(b.FirstTokenAt < a.FirstTokenAt/4) {
		t.Fatalf("128 uncached tokens with a bypass of 128: first token at %.3f s, want within the long prefill (%.3f s)", b.FirstTokenAt, a.FirstTokenAt)
	}
}
