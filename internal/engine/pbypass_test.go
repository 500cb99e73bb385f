package engine

import (
	"cmp"
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
//   - PrefillBypassAhead: the turn runs alone in the second step, 0.030 s,
//     its first token at 0.4196 + 0.030 = 0.4496 s; the long prompt's two
//     chunks follow, done at 0.4496 + 2 × 0.4196 = 1.2888 s.
//   - Ahead, but the short prompt one P prefills for a decoder
//     (PrefillOnly): not taken ahead, it rides in the second step as with
//     the bypass alone (0.8592 s, the long prompt 1.2788 s).
//   - A room of exactly the turn's 200 tokens takes it ahead too; with no
//     running slot left (MaxRunning 1, the long prompt's) it waits as with
//     none.
//   - A bypass smaller than the turn (128), or the field on a worker that
//     is not a prefill worker: as with none.
func TestPrefillWorkerBypassByHand(t *testing.T) {
	for _, tc := range []struct {
		name        string
		role        Role
		bypass      int
		ahead       bool
		long, short float64
		forD        bool // the short prompt is PrefillOnly
		maxRunning  int  // 0: 64
	}{
		{"none", RolePrefill, 0, false, 1.2588, 1.2888, false, 0},
		{"512 on P", RolePrefill, 512, false, 1.2788, 0.8592, false, 0},
		{"512 on P, ahead", RolePrefill, 512, true, 1.2888, 0.4496, false, 0},
		{"512 on P, ahead, a prompt for a decoder", RolePrefill, 512, true, 1.2788, 0.8592, true, 0},
		{"200 on P, ahead, the turn at the room", RolePrefill, 200, true, 1.2888, 0.4496, false, 0},
		{"512 on P, ahead, no running slot", RolePrefill, 512, true, 1.2588, 1.2888, false, 1},
		{"128 on P, under the turn", RolePrefill, 128, false, 1.2588, 1.2888, false, 0},
		{"128 on P, ahead, under the turn", RolePrefill, 128, true, 1.2588, 1.2888, false, 0},
		{"512 on a colocated worker", RoleColocated, 512, true, 1.2588, 1.2888, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(Config{Name: "p", Role: tc.role, Profile: roundProfile("sglang"), BlockSize: 64, PoolTokens: 100000,
				ChunkTokens: 4096, MaxRunning: cmp.Or(tc.maxRunning, 64), PrefixCache: true, ShortestFirst: true, MaxWaitS: 30, PrefillBypassTokens: tc.bypass, PrefillBypassAhead: tc.ahead})
			if err != nil {
				t.Fatal(err)
			}
			long := &Request{ID: 1, Kind: PrefillOnly, Session: "a", Blocks: chain(1, 192), Input: 12288}
			short := &Request{ID: 2, Kind: Full, Session: "b", Blocks: chain(2, 4), Input: 200, Output: 2}
			if tc.role != RolePrefill {
				long.Kind, long.Output = Full, 1
			}
			if tc.forD {
				short.Kind, short.Output = PrefillOnly, 0
			}
			if err := w.Submit(0, long); err != nil {
				t.Fatal(err)
			}
			w.Advance(0)
			if err := w.Submit(0.001, short); err != nil {
				t.Fatal(err)
			}
			var longDone, shortDone float64
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
					if ev.Req == short && (ev.Kind == EvPrefillDone || ev.Kind == EvFirstToken) && shortDone == 0 {
						shortDone = ev.Time
					}
				}
				for _, r := range []*Request{long, short} {
					if r.Kind == PrefillOnly && r.Stage == StageHeld {
						if err := w.Release(now, r); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			checkPool(t, w)
			if math.Abs(longDone-tc.long) > 1e-9 || math.Abs(shortDone-tc.short) > 1e-9 {
				t.Fatalf("long prompt done at %.4f s, the short one's prefill at %.4f s; want %.4f and %.4f", longDone, shortDone, tc.long, tc.short)
			}
		})
	}
}

// TestPrefillBypassAheadNeverTwice: with PrefillBypassAhead a stream of
// short prompts cannot hold the long one back. The 12,288-token prompt of
// TestPrefillWorkerBypassByHand starts at 0; 200-token turns (Full, one
// output token) arrive from
// 0.001 s every 0.01 s, faster than a step of two of them (0.010 + 0.1 ms
// × 400 = 0.050 s) serves them. By hand: chunk 1, 0–0.4196 s; two short
// prompts ahead, to 0.4696; chunk 2 with two riding (0.4196 + 0.040 =
// 0.4596 s), to 0.9292; two ahead, to 0.9792; chunk 3, its budget full, to
// 1.3988 s. Ahead steps back to back would never end it.
func TestPrefillBypassAheadNeverTwice(t *testing.T) {
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: roundProfile("sglang"), BlockSize: 64, PoolTokens: 1 << 22,
		ChunkTokens: 4096, MaxRunning: 4096, PrefixCache: true, ShortestFirst: true, PrefillBypassTokens: 512, PrefillBypassAhead: true})
	if err != nil {
		t.Fatal(err)
	}
	long := &Request{ID: 1, Kind: PrefillOnly, Session: "a", Blocks: chain(1, 192), Input: 12288}
	if err := w.Submit(0, long); err != nil {
		t.Fatal(err)
	}
	w.Advance(0)
	next, id := 0.001, int64(2)
	var done float64
	for done == 0 && next < 10 {
		if tn, ok := w.NextTime(); !ok || tn > next {
			r := &Request{ID: id, Kind: Full, Session: "s", Blocks: chain(uint64(id)*1000, 4), Input: 200, Output: 1}
			if err := w.Submit(next, r); err != nil {
				t.Fatal(err)
			}
			id++
			next += 0.01
			continue
		} else {
			w.Advance(tn)
		}
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvPrefillDone && ev.Req == long {
				done = ev.Time
				if err := w.Release(ev.Time, ev.Req); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if math.Abs(done-1.3988) > 1e-9 {
		t.Fatalf("the long prompt done at %.4f s behind a stream of short ones (0: not within 10 s), want 1.3988 s", done)
	}
}
