package engine

import (
	"math"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Tests that pin slice.go's rules, values worked out by hand. Every cost
// below is a power of two or a sum of them, so the float arithmetic is exact.

// planWorker is a colocated worker with the timing tm, slicing at tpot,
// one prompt waiting, and the decoding requests ds in its batch.
func planWorker(t *testing.T, tm model.Timing, tpot float64, ds ...*Request) *Worker {
	t.Helper()
	p := *testProfile(t)
	p.Timing = tm
	w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1 << 20, ChunkTokens: 1 << 20,
		MixedChunk: true, SliceTPOTS: tpot})
	if err != nil {
		t.Fatal(err)
	}
	w.waiting.push(&Request{ID: 100, Kind: Full, Input: 1000, Output: 1})
	for _, r := range ds {
		r.Stage = StageDecoding
	}
	w.decoding = ds
	return w
}

// slicePlan: b_r = T·(o − 1) − (now − first token) − (o − g)·s; the
// smallest b_r ≥ 0 holds the step to min(b, 16·T) + s − overhead − s, and
// when that is below the work of a 256-token chunk the worker decodes the
// holder's remaining o − g steps.
func TestMutSlicePlan(t *testing.T) {
	const now = 10.0
	for _, tc := range []struct {
		name   string
		tm     model.Timing
		tpot   float64
		ds     []*Request
		steps  int
		decode bool
		room   float64
	}{
		{
			// Slicing off: nothing is planned, whatever the batch.
			name: "off", tm: model.Timing{PrefillOverheadS: 0.25, PrefillPerTokenS: 1.0 / 256}, tpot: 0,
			ds:    []*Request{{ID: 1, Input: 100, Output: 5, generated: 1, FirstTokenAt: now}},
			steps: 0, decode: false, room: math.Inf(1),
		},
		{
			// A one-token request holds no budget: o − 1 = 0 TPOTs to keep.
			name: "one token", tm: model.Timing{PrefillOverheadS: 0.25, PrefillPerTokenS: 1.0 / 256}, tpot: 0.5,
			ds:    []*Request{{ID: 1, Input: 100, Output: 1, generated: 1, FirstTokenAt: now}},
			steps: 0, decode: false, room: math.Inf(1),
		},
		{
			// s = 0.5: A's budget 0.5·2 − 0.5 − 1·0.5 = 0, B's 0.5·4 − 1 −
			// 2·0.5 = 0. A budget of exactly 0 still holds; of a tie the
			// first holds: room 0 + 0.5 − 0.25 − 0.5 = −0.25, so decode A's
			// 3 − 2 = 1 step.
			name: "zero budget, tie", tm: model.Timing{PrefillOverheadS: 0.25, PrefillPerTokenS: 1.0 / 256, DecodeOverheadS: 0.5}, tpot: 0.5,
			ds: []*Request{
				{ID: 1, Input: 100, Output: 3, generated: 2, FirstTokenAt: now - 0.5},
				{ID: 2, Input: 100, Output: 5, generated: 3, FirstTokenAt: now - 1},
			},
			steps: 1, decode: true, room: -0.25,
		},
		{
			// s = 0: budget 0.5·3 = 1.5; room min(1.5, 8) − 0.5 = 1.0, exactly
			// a 256-token chunk's work (256/256): the chunk fits.
			name: "room equals the least chunk", tm: model.Timing{PrefillOverheadS: 0.5, PrefillPerTokenS: 1.0 / 256}, tpot: 0.5,
			ds:    []*Request{{ID: 1, Input: 100, Output: 4, generated: 1, FirstTokenAt: now}},
			steps: 0, decode: false, room: 1.0,
		},
		{
			// The sliding-window read is part of s: 256 context tokens inside
			// a 1,024 window at 1/1024 s a token, s = 0.25; budget 0.5·5 −
			// 1.5 − 4·0.25 = 0; room 0 + 0.25 − 0.25 − 0.25 = −0.25: decode
			// 6 − 2 = 4 steps.
			name: "window in the decode step", tm: model.Timing{PrefillOverheadS: 0.25, PrefillPerTokenS: 1.0 / 256,
				DecodePerWindowCtxTokenS: 1.0 / 1024, SlidingWindow: 1024}, tpot: 0.5,
			ds:    []*Request{{ID: 1, Input: 254, Output: 6, generated: 2, FirstTokenAt: now - 1.5}},
			steps: 4, decode: true, room: -0.25,
		},
	} {
		w := planWorker(t, tc.tm, tc.tpot, tc.ds...)
		steps, decode := w.slicePlan(now)
		if steps != tc.steps || decode != tc.decode || w.sliceRoomS != tc.room {
			t.Errorf("%s: plan (%d, %v), room %v; want (%d, %v), room %v", tc.name, steps, decode, w.sliceRoomS, tc.steps, tc.decode, tc.room)
		}
	}
}

// chunkWorkS counts the next prefill's context: its cached tokens and what
// it has prefilled. 256 tokens after 100 + 28 at 1/1024 s per token² of
// attention: 256·(128 + 256/2)/1024 = 64 s.
func TestMutChunkWorkCountsContext(t *testing.T) {
	w := planWorker(t, model.Timing{PrefillAttnS: 1.0 / 1024}, 0.5)
	if got := w.chunkWorkS(256); got != 32 {
		t.Fatalf("no chunked prefill: %v s, want 256·128/1024 = 32", got)
	}
	w.chunked = &Request{ID: 5, CachedTokens: 100, prefilled: 28}
	if got := w.chunkWorkS(256); got != 64 {
		t.Fatalf("after 100 cached + 28 prefilled: %v s, want 64", got)
	}
}

// sliceChunk: the largest m with PerToken·m + Attn·m·(p + m/2) ≤ room.
func TestMutSliceChunk(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tm       model.Timing
		tpot     float64
		room     float64
		n, p     int
		want     int
		roomLeft float64
	}{
		// Slicing off: no cap, whatever room holds.
		{"off", model.Timing{PrefillPerTokenS: 1.0 / 256}, 0, 0, 100, 0, 100, 0},
		// One token is never cut, nor charged.
		{"one token", model.Timing{PrefillPerTokenS: 1.0 / 256}, 0.5, 1.0 / 1024, 1, 0, 1, 1.0 / 1024},
		// 512 tokens at 1/256 s is 2 s: exactly the room; not charged.
		{"fits exactly", model.Timing{PrefillPerTokenS: 1.0 / 256}, 0.5, 2, 512, 0, 512, 2},
		// Linear: 1 s of room at 1/256 s a token is 256 tokens.
		{"linear", model.Timing{PrefillPerTokenS: 1.0 / 256}, 0.5, 1, 1000, 0, 256, 0},
		// a = 1/2048, b = 1/1024 + 64/1024 = 65/1024, room 1400/2048:
		// b² + 4a·room = (4225 + 1400)/1024² = (75/1024)², so m = (−65 + 75)/1024
		// ÷ (2/2048) = 10; the 10 tokens' work 10/1024 + 10·69/1024 = 700/1024
		// is all the room.
		{"quadratic", model.Timing{PrefillPerTokenS: 1.0 / 1024, PrefillAttnS: 1.0 / 1024}, 0.5, 1400.0 / 2048, 100, 64, 10, 0},
	} {
		w := planWorker(t, tc.tm, tc.tpot)
		w.sliceRoomS = tc.room
		if got := w.sliceChunk(tc.n, tc.p); got != tc.want || w.sliceRoomS != tc.roomLeft {
			t.Errorf("%s: %d tokens, room left %v; want %d, %v", tc.name, got, w.sliceRoomS, tc.want, tc.roomLeft)
		}
	}
}
