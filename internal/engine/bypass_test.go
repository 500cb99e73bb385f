package engine

import "testing"

// A session-aware decoder with BypassTokens lets a short request ride past
// a long chunked prefill: a 40,960-token prompt starts at 0 (five steps of
// 8,192), a 128-token request arrives just after. With a bypass of 512
// tokens its first token comes at 0.38 s, with the long prompt's second
// step; without one at 1.66 s, after all five. The long prompt's own first
// token moves by the short one's 128 tokens of work (1.641 → 1.643 s).
func TestPrefillBypass(t *testing.T) {
	run := func(bypass int) (long, short float64) {
		w, err := New(Config{Name: "d", Role: RoleColocated, Profile: testProfile(t), BlockSize: 64, PoolTokens: 400000, ChunkTokens: 8192,
			MaxRunning: 64, PrefixCache: true, Session: SessionConfig{Enabled: true, BypassTokens: bypass}})
		if err != nil {
			t.Fatal(err)
		}
		a := &Request{ID: 1, Kind: Full, Session: "a", Blocks: chain(1, 640), Input: 40960, Output: 2}
		b := &Request{ID: 2, Kind: Full, Session: "b", Blocks: chain(2, 2), Input: 128, Output: 2}
		if err := w.Submit(0, a); err != nil {
			t.Fatal(err)
		}
		w.Advance(0) // the owner's first step: the worker plans it
		if err := w.Submit(0.001, b); err != nil {
			t.Fatal(err)
		}
		drive(w, 0.001)
		checkPool(t, w)
		return a.FirstTokenAt, b.FirstTokenAt
	}
	l0, s0 := run(0)
	l1, s1 := run(512)
	t.Logf("no bypass: long %.3f s, short %.3f s; bypass 512: long %.3f s, short %.3f s", l0, s0, l1, s1)
	if !(s0 > l0) {
		t.Fatalf("without a bypass the short request's first token at %.3f s, before the long one's %.3f s", s0, l0)
	}
	if !(s1 < l1/4) {
		t.Fatalf("with a bypass the short request's first token at %.3f s, want within the long prefill (%.3f s)", s1, l1)
	}
	if l1 > l0*1.01 {
		t.Fatalf("the bypass delayed the long prompt's first token from %.3f s to %.3f s", l0, l1)
	}
}
