package sim

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TestPinBookMatchesTheEngine holds the router's pin book (kvc/pinbook.go)
// to the decoders it believes in: over random traces on KVC clusters with
// small pools (so that decoders trim), session-granular trims of idle
// sessions and every eviction report delivered, after every instant of the
// run each decoder's idle pinned sessions, their count and the sum of their
// sizes, are what the router's book says, and no count of the book is ever
// negative.
func TestPinBookMatchesTheEngine(t *testing.T) {
	p := profile(t)
	checks, trimmed := 0, 0
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 24))
		reqs := randTrace(rng, 150)
		want := 20000 + rng.Float64()*40000
		frac := (want*float64(p.Model.KVBytesPerToken()) + float64(p.Model.WeightBytes) + float64(p.Hardware.WorkspaceBytes)) / float64(p.Hardware.HBMBytes)
		cfg := Config{Profile: p, Mechanism: KVCacheCentric, Prefill: 1 + rng.IntN(2), Decode: 1 + rng.IntN(3),
			PrefillMemFraction: frac, DecodeMemFraction: frac, ChunkTokens: 512 + rng.IntN(8192), MixedChunk: rng.IntN(2) == 0,
			KVC: KVC{TauAppend: 256 + rng.IntN(4096), TauReject: rng.IntN(4), SessionCap: rng.IntN(4), SeedMinTurn: 1,
				Gate: []string{"worker", "router"}[rng.IntN(2)], Reset: "direct", Belief: "track", Trim: "idle", Eviction: "session"}}
		if rng.IntN(2) == 0 {
			cfg.KVC.V3 = KVCv3{DBudgetTokens: 262144, ColdRoute: true, ColdInflightTokens: 6144, Inline: true, LocalFallback: true,
				TypedRejects: true, WholeOnP: true, PHosts: true, PrefillBypassTokens: 512, PrefillOrder: "shortest"}
			if rng.IntN(2) == 0 {
				cfg.KVC.V3.TPOTSLOMs = 12
			}
		}
		if rng.IntN(3) == 0 {
			cfg.HiCache = &HiCache{Ratio: 2, WritePolicy: "write_through"}
		}
		s, err := newSim(cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: reqs}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.disp.KeepPinBook()
		check := func(s *Sim) {
			if !s.disp.PinBookOK() {
				t.Fatalf("seed %d at %.6f s: the pin book breaks its invariants", seed, s.now)
			}
			for d, wi := range s.decodes {
				n, tok := s.workers[wi].IdlePinned()
				bn, btok := s.disp.PinnedIdle(d)
				if bn != n || int64(btok) != tok {
					t.Fatalf("seed %d (%+v) at %.6f s: %s holds %d idle sessions pinned, %d tokens; the book says %d, %d",
						seed, cfg.KVC, s.now, s.workers[wi].Name(), n, tok, bn, btok)
				}
			}
			checks++
		}
		afterDrain = check
		err = s.loop(context.Background())
		afterDrain = nil
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		check(s)
		for _, wi := range s.decodes {
			trimmed += int(s.workers[wi].Stats().SessionEvictions)
		}
	}
	t.Logf("%d checks, %d sessions trimmed", checks, trimmed)
	if trimmed == 0 || checks == 0 {
		t.Fatalf("%d checks, %d sessions trimmed: the test proves nothing", checks, trimmed)
	}
}
