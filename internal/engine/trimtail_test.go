package engine

import "testing"

// A tail trim cuts from the least recently used session only what the
// room needs and leaves it pinned on the rest: a's 12,800 tokens (200
// blocks of 64) meet b's 18,004 in a pool of 30,000, so 805 tokens must go
// (its 3-token output tail, then 13 blocks). a stays resident on 187
// blocks, and its revisit is a direct append of what it lost and its new
// tokens. With TailMaxWaiting 0 and a request waiting in the queue the trim
// frees the whole session, as at session granularity.
func TestTailTrim(t *testing.T) {
	for _, tc := range []struct{ waiting bool }{{false}, {true}} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, TrimTail: true, TrimStallS: 0.5}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := chain(1, 200), chain(2, 282)
		now := seedOn(t, w, 0, "a", a, 12800, 4)
		if tc.waiting {
			// One request in the queue (put there by hand: a real one
			// would be admitted, trimming, as it arrived).
			w.waiting.push(&Request{ID: 9, Kind: Full, Blocks: chain(5, 10), Input: 640, Output: 4})
		}
		rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4})
		if !rep.CanAdmit || rep.Trimmed != 1 {
			t.Fatalf("waiting %v: b's admission %+v, want one trim", tc.waiting, rep)
		}
		if want := int64(3 + 13*64); !tc.waiting && rep.TrimmedTok != want {
			t.Fatalf("tail trim freed %d tokens, want %d (the output tail and 13 blocks)", rep.TrimmedTok, want)
		}
		if got := w.Stats().TailTrims; got != map[bool]int64{false: 1, true: 0}[tc.waiting] {
			t.Fatalf("waiting %v: %d tail trims", tc.waiting, got)
		}
		if tc.waiting {
			if w.Stats().SessionEvictions != 1 {
				t.Fatalf("with a request waiting: %d sessions evicted, want a whole", w.Stats().SessionEvictions)
			}
			continue
		}
		checkPool(t, w)
		now = seedOn(t, w, now, "b", b, 18000, 4)
		rep = w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: append(a, chain(3, 10)...), Input: 13440, Output: 4, MaxAppend: 8192})
		if !rep.CanAdmit || rep.Mode != AdmitDirect || rep.CachedTokens != 187*64 {
			t.Fatalf("revisit %+v, want a direct append over 187 blocks (11,968 tokens)", rep)
		}
		checkPool(t, w)
	}
}

// keptBlocks keeps the most whole blocks whose loss from the end frees the
// need, and none when the whole path must go.
func TestKeptBlocks(t *testing.T) {
	for _, tc := range []struct {
		n     int
		held  int64
		short int64
		want  int
	}{
		{10, 640, 1, 9},    // the last block alone
		{10, 640, 64, 9},   // exactly one block
		{10, 640, 65, 8},   // a token more: two
		{10, 600, 24, 9},   // a partial last block of 24 tokens
		{10, 600, 25, 8},   // and one more token
		{10, 640, 640, 0},  // all of it
		{10, 640, 5000, 0}, // more than it holds
		{0, 0, 1, 0},
	} {
		if got := keptBlocks(tc.n, tc.held, 64, tc.short); got != tc.want {
			t.Errorf("keptBlocks(%d, %d, 64, %d) = %d, want %d", tc.n, tc.held, tc.short, got, tc.want)
		}
	}
}
