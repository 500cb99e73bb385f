package sim

import (
	"context"
	"strings"
	"testing"
)

// runWork simulates n short requests arriving at rate/s with cfg and
// returns the run's deterministic cost: the events the simulator handled
// plus every worker's scheduling work (engine.Worker.Work: the waiting
// requests, heap operations and prefix-cache nodes and blocks its
// decisions looked at).
func runWork(t *testing.T, cfg Config, n int, rate float64) uint64 {
	t.Helper()
	cfg.MaxBacklog = -1
	s, err := newSim(cfg, shortStreamAt(t, n, rate), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	work := uint64(s.nEv)
	for _, w := range s.workers {
		work += w.Work()
	}
	return work
}

// TestCostGrowsLinearly: ten times the requests cost at most twelve times
// the work, for every mechanism of the scale benchmark. Work, not wall
// time, so the test holds on a loaded machine. KVC v3 re-matching every
// waiting prompt at every step (before the waiting order kept uncached
// counts) made it 33× the time at 10× the requests, and a trim's scan of
// every pinned session made KVC 1P7D superlinear too.
//
// The cost compared is past a common warm-up of w requests: that of the
// next w requests against that of the next 10·w, so that both are the
// steady state (pools full of kept sessions: trims and evictions at every
// admission, backpressure) and not the start of a run into empty pools.
// Pools of 50,000 tokens fill within the warm-up. The 4-GPU mechanisms get
// 100 requests/s, which they keep up with: past that their queues, and the
// router's backpressure retries with them, grow for the whole run, which is
// the simulated system's cost, not the simulator's.
func TestCostGrowsLinearly(t *testing.T) {
	const w = 1000
	p := *profile(t)
	per := p.Model.KVBytesPerToken()
	p.Hardware.MemFraction = float64(p.Model.WeightBytes+p.Hardware.WorkspaceBytes+50_000*per) / float64(p.Hardware.HBMBytes)
	for _, cfg := range scaleConfigs(&p) {
		rate := 400.0
		if strings.Contains(cfg.Name, "1p3d") || strings.HasPrefix(cfg.Name, "dp4") {
			rate = 100
		}
		warm := runWork(t, cfg, w, rate)
		small := runWork(t, cfg, 2*w, rate) - warm
		large := runWork(t, cfg, 11*w, rate) - warm
		ratio := float64(large) / float64(small)
		t.Logf("%s at %g/s: work %d for requests %d–%d, %d for %d–%d: %.2f×", cfg.Name, rate, small, w, 2*w, large, w, 11*w, ratio)
		if ratio > 12 {
			t.Errorf("%s: %d requests past the warm-up cost %.2f× the work of %d (%d vs %d), want ≤ 12×", cfg.Name, 10*w, ratio, w, large, small)
		}
	}
}
