package sim

import (
	"errors"
	"io"
	"sort"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// drain reads a source into memory, so a test can open it twice.
func drain(t *testing.T, src Source) (trace.Header, []trace.Request) {
	t.Helper()
	var out []trace.Request
	for {
		var r trace.Request
		if err := src.Next(&r); errors.Is(err, io.EOF) {
			return src.Header(), out
		} else if err != nil {
			t.Fatal(err)
		}
		r.HashIDs = append([]uint64(nil), r.HashIDs...)
		out = append(out, r)
	}
}

func opener(h trace.Header, reqs []trace.Request) func() (Source, error) {
	return func() (Source, error) { return &SliceSource{H: h, Reqs: reqs}, nil }
}

// A request alone on an idle colocated worker runs at the floor exactly:
// the floor is the engine's own cost, not an estimate beside it.
func TestFloorIsTightAlone(t *testing.T) {
	p := profile(t)
	reqs := one(20000, 30) // 20,000 tokens: three chunks of 8,192 or less
	f, err := floorSamples(opener(trace.Header{Version: 1, BlockSize: 64}, reqs), p, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, sink := run(t, Config{Mechanism: PDColo, Colo: 1, Profile: p}, reqs, 64)
	if r := sink.recs[0]; !near(f.ttft[0], r.TTFTS) || !near(f.e2e[0], r.LatencyS) {
		t.Fatalf("floor ttft %v e2e %v, the run %v %v", f.ttft[0], f.e2e[0], r.TTFTS, r.LatencyS)
	}
}

// No mechanism beats the floor: every order statistic of every run's TTFT
// and e2e latency is at or above the floor's (the k-th fastest request of
// a run is no faster than the k-th smallest floor), on a workload with
// multi-turn sessions and on one whose sessions share prefixes.
func TestNoMechanismBeatsTheFloor(t *testing.T) {
	p := profile(t)
	ag := synth.DefaultAgentic()
	ag.Sessions, ag.ArrivalRate = 12, 0.5
	a, err := synth.NewAgentic(ag)
	if err != nil {
		t.Fatal(err)
	}
	gr := synth.DefaultGroups()
	gr.Sessions, gr.Rounds = 16, 3
	g, err := synth.NewGroups(gr)
	if err != nil {
		t.Fatal(err)
	}
	v3 := KVCv3{DBudgetTokens: 262144, ColdRoute: true, ColdInflightTokens: 6144, Inline: true, LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true, BalanceStarts: true, PHostQueueTokens: 16384, BalanceHalfLifeS: 30, PrefillBypassTokens: 512, PrefillOrder: "shortest", PrefillMaxWaitS: 30}
	cfgs := map[string]Config{
		"naive PD":  {Mechanism: PDDisaggregation, Prefill: 1, Decode: 3},
		"DP sticky": {Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky},
		"KVC v2":    {Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware},
		"KVC v3":    {Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware, KVC: KVC{V3: v3}},
		"Dynamo":    {Mechanism: PDConditional, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware},
		"llm-d":     {Mechanism: PDPrefixDecider, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware},
		"radix":     {Mechanism: PDDecodeRadix, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware},
		"DP SGLang": {Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyCacheAware},
	}
	for wname, src := range map[string]Source{"agentic": a, "groups": g} {
		h, reqs := drain(t, src)
		f, err := floorSamples(opener(h, reqs), p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		sort.Float64s(f.ttft)
		sort.Float64s(f.e2e)
		for name, cfg := range cfgs {
			cfg.Profile = p
			_, sink := run(t, cfg, reqs, h.BlockSize)
			var ttft, e2e []float64
			for _, r := range sink.recs {
				if r.Status == "completed" {
					ttft, e2e = append(ttft, r.TTFTS), append(e2e, r.LatencyS)
				}
			}
			if len(ttft) != len(f.ttft) {
				t.Fatalf("%s on %s: %d completed, the floor has %d", name, wname, len(ttft), len(f.ttft))
			}
			sort.Float64s(ttft)
			sort.Float64s(e2e)
			for k := range ttft {
				if ttft[k] < f.ttft[k]*(1-1e-9) || e2e[k] < f.e2e[k]*(1-1e-9) {
					t.Fatalf("%s on %s: the %d-th fastest request took ttft %v e2e %v, below the floor's %v %v",
						name, wname, k, ttft[k], e2e[k], f.ttft[k], f.e2e[k])
				}
			}
		}
	}
}
