package kvc

import "testing"

// The router waits out a refusing decoder's recommended_pause_ms before its
// next step, at most MaxPauseS (0 takes the seed's 2 s, a negative cap is
// 0); with NoBackpressure it neither waits nor labels the fallback
// -d-backpressure.
func TestBackpressurePause(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mod       func(*DispatchConfig)
		wantDelay float64
		wantMode  string
	}{
		{"default cap", nil, DefaultMaxPauseS, "pd-router-turn1-d-backpressure"},
		{"cap 100 ms", func(c *DispatchConfig) { c.MaxPauseS = 0.1 }, 0.1, "pd-router-turn1-d-backpressure"},
		{"cap above the hint", func(c *DispatchConfig) { c.MaxPauseS = 10 }, 5, "pd-router-turn1-d-backpressure"},
		{"cap 0", func(c *DispatchConfig) { c.MaxPauseS = -1 }, 0, "pd-router-turn1-d-backpressure"},
		{"off", func(c *DispatchConfig) { c.NoBackpressure = true }, 0, "pd-router-fallback-session-not-resident"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newLabelWorld(t, tc.mod, Options{Alpha: 1})
			d := w.x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
			var delays []float64
			for d.Action().Kind == ActAdmit {
				delays = append(delays, d.Action().Delay)
				d.Reply(AdmitReply{Reason: "session-not-resident", PauseMs: 5000})
			}
			delays = append(delays, d.Action().Delay)
			// The first admission has no pause owed; each later step waits
			// for the refusal before it.
			if len(delays) != 4 || delays[0] != 0 {
				t.Fatalf("delays %v, want 3 admissions and the fallback, the first with none", delays)
			}
			for _, got := range delays[1:] {
				if got != tc.wantDelay {
					t.Fatalf("delays %v, want %v s after each refusal", delays, tc.wantDelay)
				}
			}
			if d.Mode() != tc.wantMode {
				t.Fatalf("mode %s, want %s (path %v)", d.Mode(), tc.wantMode, d.Path())
			}
		})
	}
}
