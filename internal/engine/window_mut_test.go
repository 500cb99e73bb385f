package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// windowS by hand, at 1/2 s per windowed token (a power of two: exact).
// Contexts 60, 80, 90 lie inside a window of 100; 100 (at it) and 150 do
// not. Read: 60 + 80 + 90 + 100 + 100 (both capped at the window) = 430 →
// 215 s; per further step one token for each of the 3 inside → 1.5 s.
// Without a window (0) the sliding layers cost nothing.
func TestWindowSByHand(t *testing.T) {
	batch := []*Request{{Input: 50, generated: 10}, {Input: 80}, {Input: 89, generated: 1}, {Input: 99, generated: 1}, {Input: 150}}
	for _, tc := range []struct {
		window        int
		base, perStep float64
	}{
		{100, 215, 1.5},
		{0, 0, 0},
	} {
		w := &Worker{tm: model.Timing{DecodePerWindowCtxTokenS: 0.5, SlidingWindow: tc.window}, decoding: batch}
		if b, s := w.windowS(); b != tc.base || s != tc.perStep {
			t.Errorf("window %d: windowS %v, %v; want %v, %v", tc.window, b, s, tc.base, tc.perStep)
		}
	}
}
