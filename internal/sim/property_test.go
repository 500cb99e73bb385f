package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// randTrace makes n requests over growing sessions with random appends,
// compactions, think times, orphans (parents that never appear) and
// prompts over the model's context.
func randTrace(rng *rand.Rand, n int) []trace.Request {
	type sess struct {
		id    string
		chain []uint64
		last  int64
		turn  int
	}
	var ss []*sess
	var out []trace.Request
	ts := 0.0
	for i := 0; i < n; i++ {
		ts += rng.ExpFloat64() * 0.3
		var s *sess
		if len(ss) == 0 || rng.IntN(4) == 0 {
			s = &sess{id: fmt.Sprint("s", len(ss)), last: -1}
			ss = append(ss, s)
		} else {
			s = ss[rng.IntN(len(ss))]
		}
		for k := 1 + rng.IntN(40); k > 0; k-- {
			s.chain = append(s.chain, uint64(len(ss))<<32|uint64(rng.IntN(1<<20)))
		}
		if len(s.chain) > 400 {
			s.chain = s.chain[:1+rng.IntN(5)]
		}
		parent := s.last
		s.turn++
		r := trace.Request{SessionID: s.id, ChatID: int64(i + 1), ParentChatID: parent, Turn: s.turn, Timestamp: ts,
			InputLength: (len(s.chain)-1)*64 + 1 + rng.IntN(64), OutputLength: rng.IntN(200),
			HashIDs: append([]uint64(nil), s.chain...)}
		if rng.IntN(3) == 0 {
			th := rng.Float64() * 2
			r.ThinkTimeS = &th
		}
		if rng.IntN(25) == 0 {
			// Longer than the model's context: fails with its cause.
			r.InputLength = 300000
			r.HashIDs = make([]uint64, trace.BlocksFor(r.InputLength, 64))
			for k := range r.HashIDs {
				r.HashIDs[k] = uint64(i+1)<<40 | uint64(k)
			}
		}
		s.last = r.ChatID
		out = append(out, r)
	}
	return out
}

// TestSimProperty runs random clusters (every mechanism, the peers too, every policy and
// link, small pools, gates, timeouts, mixed chunks) over random traces and
// checks the invariants: every request is recorded exactly once, completed
// ones have a sane TTFT, ITL counts exactly the completed requests' gaps, no
// KVC decoder holds more sessions than its cap, and at the end every
// worker, router counter and replay counter is back to empty; every other
// run in the poison mode of recycle.go.
func TestSimProperty(t *testing.T) {
	p := profile(t)
	statuses := map[metrics.Status]int{}
	byMech := map[Mechanism]int{}
	v3Runs, capped := 0, 0
	for seed := uint64(1); seed <= 1000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		reqs := randTrace(rng, 150)
		cfg := Config{Profile: p, Concurrency: rng.IntN(12), MaxRunning: 1 + rng.IntN(16), ChunkTokens: 512 + rng.IntN(8192),
			MixedChunk: rng.IntN(2) == 0, IgnoreThink: rng.IntN(3) == 0,
			Link:   []string{"rdma-400g", "tcp-loopback", "nvlink"}[rng.IntN(3)],
			Policy: []kvc.Policy{kvc.PolicyDefault, kvc.PolicySticky, kvc.PolicyKVAware}[rng.IntN(3)]}
		if rng.IntN(2) == 0 {
			cfg.TimeoutS = 0.5 + rng.Float64()*20
		}
		if rng.IntN(3) == 0 {
			cfg.TransferTimeoutS = 0.05 + rng.Float64()*2
			cfg.PeerFailure = []string{PeerWindowed, PeerHairTrigger}[rng.IntN(2)]
			cfg.BreakerFailures = 1 + rng.IntN(3)
		}
		// Pools of 20K–60K tokens, so that KV waits and refusals happen.
		want := 20000 + rng.Float64()*40000
		frac := (want*float64(p.Model.KVBytesPerToken()) + float64(p.Model.WeightBytes) + float64(p.Hardware.WorkspaceBytes)) / float64(p.Hardware.HBMBytes)
		switch rng.IntN(4) {
		case 0:
			cfg.Mechanism, cfg.Prefill, cfg.Decode = PDDisaggregation, 1+rng.IntN(2), 1+rng.IntN(3)
			cfg.PrefillMemFraction, cfg.DecodeMemFraction = frac, frac
		case 1:
			cfg.Mechanism, cfg.Prefill, cfg.Decode = KVCacheCentric, 1+rng.IntN(2), 1+rng.IntN(3)
			cfg.PrefillMemFraction, cfg.DecodeMemFraction = frac, frac
			cfg.KVC = KVC{TauAppend: 256 + rng.IntN(4096), TauReject: rng.IntN(4), SessionCap: rng.IntN(4),
				SeedMinTurn: 1 + rng.IntN(2), LowWatermark: rng.Float64() * 0.2, TrimStallS: rng.Float64() * 0.1,
				Gate: []string{"worker", "router"}[rng.IntN(2)], Reset: []string{"direct", "any", "off"}[rng.IntN(3)],
				Belief: []string{"track", "never-shrink"}[rng.IntN(2)], Trim: []string{"idle", "any"}[rng.IntN(2)],
				Eviction: []string{"session", "block"}[rng.IntN(2)], SeedMaxInflight: rng.IntN(3),
				DToP: []string{DToPOff, DToPPassive, DToPOnEvict, DToPActive}[rng.IntN(4)], DToPDeltaTokens: 1 + rng.IntN(4000),
				PrefillBackup:    []string{"release-after-transfer", "capacity-backup"}[rng.IntN(2)],
				SnapshotBufBytes: int64(1+rng.IntN(20000)) * p.Model.KVBytesPerToken()}
			cfg.Policy = []kvc.Policy{kvc.PolicyDefault, kvc.PolicySticky, kvc.PolicyKVAware}[rng.IntN(3)]
			cfg.KVC.HomeHolds = rand.New(rand.NewPCG(seed, 4)).IntN(2) == 0 // its own stream too
			if r6 := rand.New(rand.NewPCG(seed, 6)); cfg.KVC.Eviction == "session" && r6.IntN(2) == 0 {
				cfg.KVC.Eviction, cfg.KVC.TailMaxWaiting = "tail", r6.IntN(3)*r6.IntN(20)
			}
			if r3 := rand.New(rand.NewPCG(seed, 3)); r3.IntN(2) == 0 {
				// KVC v3's options (their own stream: the other draws stay as they were).
				cfg.KVC.V3 = KVCv3{DBudgetTokens: r3.IntN(3) * r3.IntN(80000), MarginTokens: r3.IntN(20000) - 10000,
					ColdRoute: r3.IntN(2) == 0, Inline: r3.IntN(2) == 0, TypedRejects: r3.IntN(2) == 0}
				cfg.KVC.V3.LocalFallback = cfg.KVC.V3.DBudgetTokens > 0 && r3.IntN(2) == 0
				cfg.KVC.V3.WholeOnP = cfg.KVC.V3.LocalFallback && r3.IntN(2) == 0
				if r4 := rand.New(rand.NewPCG(seed, 4)); cfg.KVC.V3.ColdRoute || cfg.KVC.V3.WholeOnP {
					// Later options draw from their own stream too.
					cfg.KVC.V3.PHosts = cfg.KVC.V3.WholeOnP && r4.IntN(2) == 0
					if cfg.KVC.V3.ColdRoute {
						cfg.KVC.V3.ColdInflightTokens = r4.IntN(2) * r4.IntN(10000)
					}
				}
				if r5 := rand.New(rand.NewPCG(seed, 5)); r5.IntN(2) == 0 {
					cfg.KVC.V3.BalanceStarts = true
					cfg.KVC.V3.PHostQueueTokens = r5.IntN(3) * r5.IntN(40000)
					cfg.KVC.V3.BalanceHalfLifeS = float64(r5.IntN(2) * r5.IntN(300))
					cfg.KVC.V3.PrefillBypassTokens = r5.IntN(2) * r5.IntN(2000)
					if r5.IntN(2) == 0 {
						cfg.KVC.V3.PrefillOrder, cfg.KVC.V3.PrefillMaxWaitS = "shortest", float64(r5.IntN(3)*r5.IntN(60))
					}
				}
				if r7 := rand.New(rand.NewPCG(seed, 7)); cfg.KVC.V3.DBudgetTokens > 0 && r7.IntN(2) == 0 {
					// KVC v4's decode isolation: the buckets and the workers' slicing.
					cfg.KVC.V3.TPOTSLOMs = float64(4 + r7.IntN(60))
					cfg.KVC.V3.IsolationMaxPWaitS = float64(r7.IntN(2) * r7.IntN(30))
				}
				v3Runs++
			}
		case 3:
			// The peers, with their knobs spread around their defaults.
			cfg.Mechanism = []Mechanism{PDConditional, PDPrefixDecider, PDDecodeRadix}[rng.IntN(3)]
			cfg.Prefill, cfg.Decode = 1+rng.IntN(2), 1+rng.IntN(3)
			cfg.PrefillMemFraction, cfg.DecodeMemFraction = frac, frac
			cfg.Peer = Peer{Strategy: []string{"isl_bounding", "prefill_load", "isl_or_load"}[rng.IntN(3)],
				EffISLThreshold: rng.IntN(6000), EffISLRatio: rng.Float64(), PrefillBusy: rng.Float64() * 8,
				DecodeBusy: rng.Float64() * rng.Float64(), NonCachedTokens: rng.IntN(3000) - 1, PromptTokens: rng.IntN(2) * rng.IntN(8000),
				ApproxOverlap: rng.IntN(2) == 0, AffinityTTLS: float64(rng.IntN(2)) * rng.Float64() * 20}
			if r8 := rand.New(rand.NewPCG(seed, 8)); r8.IntN(2) == 0 {
				// The 2026 rivals, their SLOs and PPD's weights spread wide.
				cfg.Mechanism = []Mechanism{PDPPD, PDDeflect}[r8.IntN(2)]
				cfg.Peer.Rival = &Rival{TTFTSLOMs: float64(r8.IntN(4000)), TPOTSLOMs: float64(r8.IntN(80)),
					TTFTWeight: r8.Float64() * 3, TPOTWeight: r8.Float64() * 3}
			}
		default:
			cfg.Mechanism, cfg.Colo = PDColo, 1+rng.IntN(4)
			cfg.ColoMemFraction = frac
		}
		// Every other run poisons the records it would recycle (recycle.go):
		// a use after a request's end panics.
		cfg.recycle = []recycleMode{recycleOn, recyclePoison}[seed%2]
		sink := &memSink{}
		s, err := newSim(cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: reqs}, sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.loop(context.Background()); err != nil {
			t.Fatalf("seed %d (%s, %s): %v; recorded %d of %d", seed, cfg.Mechanism, cfg.Link, err, len(sink.recs), len(reqs))
		}
		byMech[cfg.Mechanism]++
		for _, w := range sink.samples {
			if w.KVUsedTokens < 0 || w.KVReservedTokens < 0 || w.KVCachedTokens < 0 || w.KVUsedTokens+w.KVReservedTokens > w.KVCapacityTokens {
				t.Fatalf("seed %d (%s): worker sample out of bounds: %+v", seed, cfg.Mechanism, w)
			}
		}
		seen := map[int64]int{}
		var gaps int64 // ITL's population: every completed request's gaps, no other's
		for _, r := range sink.recs {
			seen[r.ChatID]++
			statuses[r.Status]++
			if r.Status == metrics.StatusCompleted {
				gaps += int64(max(r.OutputLength-1, 0))
			}
			if r.Status == metrics.StatusCompleted && (r.TTFTS <= 0 || r.TTFTS > r.LatencyS+1e-9) {
				t.Fatalf("seed %d: TTFT %v with latency %v", seed, r.TTFTS, r.LatencyS)
			}
		}
		for _, q := range reqs {
			if seen[q.ChatID] != 1 {
				t.Fatalf("seed %d (%s): chat %d recorded %d times", seed, cfg.Mechanism, q.ChatID, seen[q.ChatID])
			}
		}
		if n := s.gaps.Count(); n != gaps {
			t.Fatalf("seed %d (%s): ITL counts %d inter-token gaps; the completed requests have %d", seed, cfg.Mechanism, n, gaps)
		}
		if c := cfg.KVC.SessionCap; cfg.Mechanism == KVCacheCentric && c > 0 {
			for _, wi := range s.decodes {
				if n := s.workers[wi].ResidentSessions(); n > c {
					t.Fatalf("seed %d (%+v): %s ends holding %d sessions over its cap of %d", seed, cfg.KVC, s.workers[wi].Name(), n, c)
				}
			}
			capped++
		}
		for _, w := range s.workers {
			// What is neither running nor evictable at the end is what KVC
			// decoders keep pinned for their sessions.
			if w.Running() != 0 || w.Queued() != 0 || w.Reserved() != 0 || w.Used() != w.CachedTokens()+w.PinnedTokens() {
				t.Fatalf("seed %d (%+v): %s ends with running %d queued %d reserved %d used %d cached %d pinned %d",
					seed, cfg.KVC, w.Name(), w.Running(), w.Queued(), w.Reserved(), w.Used(), w.CachedTokens(), w.PinnedTokens())
			}
		}
		for _, rt := range []*kvc.Router{s.disp.PRouter(), s.disp.DRouter()} {
			if rt == nil {
				continue
			}
			for i := range rt.Names() {
				if rt.Inflight(i) != 0 {
					t.Fatalf("seed %d: router in-flight count %d at the end", seed, rt.Inflight(i))
				}
			}
		}
		if !s.disp.V3Idle() {
			p, d := s.disp.PrefillQueued()
			t.Fatalf("seed %d (%+v): KVC v3 still counts prefill queued at the end: P %v D %v", seed, cfg.KVC.V3, p, d)
		}
		if pt, db := s.disp.ActiveLoad(); pt != 0 || db != 0 {
			t.Fatalf("seed %d (%s): %d prefill tokens and %d decode blocks still counted active at the end", seed, cfg.Mechanism, pt, db)
		}
		if s.active != 0 || s.live != 0 || s.inflight.Len() != 0 {
			t.Fatalf("seed %d: active %d live %d in flight %d at the end", seed, s.active, s.live, s.inflight.Len())
		}
	}
	t.Logf("statuses over all runs: %v; runs per mechanism: %v; KVC v3 runs %d", statuses, byMech, v3Runs)
	if capped == 0 {
		t.Fatal("no KVC run with a session cap: the property test no longer checks it")
	}
	if v3Runs == 0 {
		t.Fatal("no KVC v3 run: the property test no longer covers its options")
	}
	for _, m := range []Mechanism{PDDisaggregation, PDColo, KVCacheCentric, PDConditional, PDPrefixDecider, PDDecodeRadix, PDPPD, PDDeflect} {
		if byMech[m] == 0 {
			t.Fatalf("no run of %s: the property test no longer covers it", m)
		}
	}
	for _, st := range []metrics.Status{metrics.StatusCompleted, metrics.StatusFailed, metrics.StatusTimeout} {
		if statuses[st] == 0 {
			t.Fatalf("no %s request in any run: the property test no longer exercises that path (%v)", st, statuses)
		}
	}
}
