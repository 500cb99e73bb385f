package engine

import (
	"math"
	"testing"
)

// A prefill worker's bypass, by hand (roundProfile: a step costs 10 ms plus
// 0.1 ms a token, no attention term; chunks of 4,096). A 12,288-token
// prompt P prefills for a decoder (PrefillOnly) starts at 0: three chunks
// of 0.4196 s. A hosted session's 200-token turn (Full) arrives at 0.001.
//   - No bypass (SGLang's order): the long prompt holds every step's
//     budget, done at 3 × 0.4196 = 1.2588 s; the turn runs alone after it,
//     0.010 + 0.020 = 0.030 s, its first token at 1.2888 s.
//   - PrefillBypassTokens 512: the turn rides in the second step,
//     0.010 + 0.1 ms × (4,096 + 200) = 0.4396 s, its first token at
//     0.4196 + 0.4396 = 0.8592 s; the long prompt is done one chunk later,
//     at 0.8592 + 0.4196 = 1.2788 s (+0.020 s, the turn's 200 tokens).
//   - A bypass smaller than the turn (128), or the field on a worker that
//     is not a prefill worker: as with none.
func TestPrefillWorkerBypassByHand(t *testing.T) {
	for _, tc := range []struct {
		name        string
		role        Role
		bypass      int
		long, short float64
	}{
		{"none", RolePrefill, 0, 1.2588, 1.2888},
		{"512 on P", RolePrefill, 512, 1.2788, 0.8592},
		{"128 on P, under the turn", RolePrefill, 128, 1.2588, 1.2888},
		{"512 on a colocated worker", RoleColocated, 512, 1.2588, 1.2888},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(Config{Name: "p", Role: tc.role, Profile: roundProfile("sglang"), BlockSize: 64, PoolTokens: 100000,
				ChunkTokens: 4096, MaxRunning: 64, PrefixCache: true, ShortestFirst: true, MaxWaitS: 30, PrefillBypassTokens: tc.bypass})
			if err != nil {
				t.Fatal(err)
			}
			long := &Request{ID: 1, Kind: PrefillOnly, Session: "a", Blocks: chain(1, 192), Input: 12288}
			short := &Request{ID: 2, Kind: Full, Session: "b", Blocks: chain(2, 4), Input: 200, Output: 2}
			if tc.role != RolePrefill {
				long.Kind, long.Output = Full, 1
			}
			if err := w.Submit(0, long); err != nil {
				t.Fatal(err)
			}
			w.Advance(0)
			if err := w.Submit(0.001, short); err != nil {
				t.Fatal(err)
			}
			var longDone float64
			now := 0.001
			for {
				tn, ok := w.NextTime()
				if !ok {
					break
				}
				now = tn
				w.Advance(now)
				for _, ev := range w.TakeEvents() {
					if ev.Req == long && (ev.Kind == EvPrefillDone || ev.Kind == EvFirstToken) && longDone == 0 {
						longDone = ev.Time
					}
				}
				if long.Kind == PrefillOnly && longDone > 0 && long.Stage == StageHeld {
					if err := w.Release(now, long); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkPool(t, w)
			if math.Abs(longDone-tc.long) > 1e-9 || math.Abs(short.FirstTokenAt-tc.short) > 1e-9 {
				t.Fatalf("long prompt done at %.4f s, the turn's first token at %.4f s; want %.4f and %.4f", longDone, short.FirstTokenAt, tc.long, tc.short)
			}
		})
	}
}
