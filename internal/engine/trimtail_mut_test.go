package engine

import "testing"

// trimTailFor on one idle session: a 640-token prompt (10 blocks of 64)
// pinned with its 3-token output tail (a 4-token seed: every token but the
// last has KV). The tail goes first; only what is still short comes from
// the prompt's end, in whole blocks; a need past the prompt evicts the
// session whole. Each row's figures by hand:
//   - short 3: the tail alone frees 3 = short, the prompt keeps all 10 blocks;
//   - short 67: tail 3, then 67 − 3 = 64 is one block: 3 + 64 = 67 freed, 9 kept;
//   - short 68: tail 3, then 65 needs two blocks: 3 + 128 = 131, 8 kept;
//   - short 700: tail 3, then 697 > the 640 held: the whole session goes,
//     3 + 640 = 643 freed, one session eviction and no tail trim.
func TestTrimTailForExact(t *testing.T) {
	for _, tc := range []struct {
		short      int64
		freed      int64
		pinned     int64 // PinnedTokens after: the prompt blocks kept
		tailTrims  int64
		evictions  int64
		stallAfter float64 // 0.5 s + 0.001 s per token freed
	}{
		{3, 3, 640, 1, 0, 0.5 + 0.003},
		{67, 67, 9 * 64, 1, 0, 0.5 + 0.067},
		{68, 131, 8 * 64, 1, 0, 0.5 + 0.131},
		{700, 643, 0, 0, 1, 0.5 + 0.643},
	} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, TrimTail: true, TrimStallS: 0.5, TrimStallPerTokenS: 0.001}})
		if err != nil {
			t.Fatal(err)
		}
		now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
		if got := w.PinnedTokens(); got != 643 {
			t.Fatalf("seeded: %d tokens pinned, want 643 (640 prompt + 3 tail)", got)
		}
		var rep AdmitReply
		if !w.trimTailFor(now, "", tc.short, &rep) {
			t.Fatalf("short %d: nothing trimmed", tc.short)
		}
		if rep.Trimmed != 1 || rep.TrimmedTok != tc.freed {
			t.Errorf("short %d: trimmed %d / %d tokens, want 1 / %d", tc.short, rep.Trimmed, rep.TrimmedTok, tc.freed)
		}
		if got := w.PinnedTokens(); got != tc.pinned {
			t.Errorf("short %d: %d tokens pinned after, want %d", tc.short, got, tc.pinned)
		}
		st := w.Stats()
		if st.TailTrims != tc.tailTrims || st.SessionEvictions != tc.evictions {
			t.Errorf("short %d: %d tail trims, %d evictions; want %d, %d", tc.short, st.TailTrims, st.SessionEvictions, tc.tailTrims, tc.evictions)
		}
		if !near(st.StallS, tc.stallAfter) {
			t.Errorf("short %d: stall %v s, want %v", tc.short, st.StallS, tc.stallAfter)
		}
		checkPool(t, w)
	}
}
