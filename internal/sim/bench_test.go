package sim

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// kvcV3Preset is what --kvc-preset v3 sets (cmd/pdhybrid/kvcv3flags.go).
var kvcV3Preset = KVCv3{Preset: "v3", DBudgetTokens: 262144, ColdRoute: true, ColdInflightTokens: 6144, Inline: true,
	LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true, BalanceStarts: true, PHostQueueTokens: 16384, BalanceHalfLifeS: 30, PrefillBypassTokens: 512,
	PrefillOrder: "shortest", PrefillMaxWaitS: 30}

// kvcBench are the kvcache-centric mechanism's benchmark configurations on
// 1P3D: its defaults (KVC v2) and the v3 preset.
func kvcBench(p *model.Profile) []Config {
	return []Config{
		{Name: "kvc", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p},
		{Name: "kvc-v3", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: kvcV3Preset}},
	}
}

// BenchmarkSimAgentic simulates 20,000 requests of the built-in agentic
// workload per iteration (naive PD 1P3D, DP x4 sticky and kv-aware, KVC v2
// and v3 1P3D).
func BenchmarkSimAgentic(b *testing.B) {
	p := profile(b)
	for _, cfg := range append([]Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp-sticky", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky, Profile: p},
		{Name: "dp-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
	}, kvcBench(p)...) {
		b.Run(cfg.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sc := synth.DefaultAgentic()
				sc.Sessions, sc.Requests, sc.ArrivalRate = 0, 20000, 0.002
				st, err := synth.NewAgentic(sc)
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(context.Background(), cfg, st, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Replay.Requests), "requests/op")
			}
		})
	}
}

// BenchmarkSimWeka replays a converted WEKA trace named by PDHYBRID_WEKA
// (skipped when unset): the 3 s-per-mechanism target (naive PD, DP
// kv-aware, KVC v2 and v3).
func BenchmarkSimWeka(b *testing.B) {
	path := os.Getenv("PDHYBRID_WEKA")
	if path == "" {
		b.Skip("set PDHYBRID_WEKA to a converted weka trace (pdhybrid trace convert --from weka)")
	}
	p := profile(b)
	for _, cfg := range append([]Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
	}, kvcBench(p)...) {
		b.Run(cfg.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				rd, err := trace.NewReader(f, path, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Run(context.Background(), cfg, rd, nil, nil); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// BenchmarkSimGroups simulates BLIS's agentic spec straight from its
// generator (synth.DefaultGroups: 634 sessions, 5,072 requests with a 40K
// shared prefix and ~7K appends) per iteration: the ≤ 0.1 s-per-run target
// of DESIGN §7 on one core (GOMAXPROCS=1). KVC v2 and v3 run it too.
func BenchmarkSimGroups(b *testing.B) {
	p := profile(b)
	for _, cfg := range append([]Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp-sticky", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky, Profile: p},
		{Name: "dp-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
	}, kvcBench(p)...) {
		b.Run(cfg.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				st, err := synth.NewGroups(synth.DefaultGroups())
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(context.Background(), cfg, st, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Replay.Requests), "requests/op")
			}
		})
	}
}

// shortStream is the scale workload: n independent one-turn
// requests, 512±256 tokens in, 128±64 out, arriving at 400/s (the groups
// generator with no shared prefix and one round; `pdhybrid trace synth
// groups --groups 1 --prefix-tokens 0 --rounds 1 --rate 400 --append-mean
// 512 --append-std 256 --output-mean 128 --output-std 64 --sessions n`
// writes the same stream).
func shortStream(tb testing.TB, n int) synth.Stream { return shortStreamAt(tb, n, 400) }

// shortStreamAt is shortStream arriving at rate requests/s.
func shortStreamAt(tb testing.TB, n int, rate float64) synth.Stream {
	g := synth.DefaultGroups()
	g.Groups, g.PrefixTokens, g.Sessions, g.ArrivalRate, g.Rounds = 1, 0, n, rate, 1
	g.AppendMean, g.AppendStd, g.OutputMean, g.OutputStd = 512, 256, 128, 64
	st, err := synth.NewGroups(g)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// scaleConfigs are the mechanisms the scale benchmark runs: the ones that
// keep up with 400 short requests/s on 8 GPUs, and those of the 4-GPU
// comparison.
func scaleConfigs(p *model.Profile) []Config {
	return []Config{
		{Name: "pd-1p3d", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp4-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
		{Name: "dp8-mixed", Mechanism: PDColo, Colo: 8, MixedChunk: true, Profile: p},
		{Name: "kvc-1p3d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p},
		{Name: "kvc-v3-1p3d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: kvcV3Preset}},
		{Name: "kvc-1p7d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 7, Profile: p},
		{Name: "kvc-v3-1p7d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 7, Profile: p, KVC: KVC{V3: kvcV3Preset}},
	}
}

// BenchmarkSimScale runs the short-request workload at 10K, 100K and 1M
// requests per mechanism (PDHYBRID_SCALE=10000,100000 picks sizes): the
// ns/op of one size over the one before shows the growth, which the issue
// wants linear (within 12× from 100K to 1M).
func BenchmarkSimScale(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if s := os.Getenv("PDHYBRID_SCALE"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				b.Fatalf("PDHYBRID_SCALE=%q: want comma-separated request counts > 0", s)
			}
			sizes = append(sizes, n)
		}
	}
	p := profile(b)
	for _, cfg := range scaleConfigs(p) {
		cfg.MaxBacklog = -1
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", cfg.Name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					res, err := Run(context.Background(), cfg, shortStream(b, n), nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(res.Replay.Requests), "requests/op")
				}
			})
		}
	}
}
