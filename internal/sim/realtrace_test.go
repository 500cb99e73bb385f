package sim

import (
	"context"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

func load(t *testing.T, path, from string) *SliceSource {
	t.Helper()
	return loadWith(t, path, convert.Options{From: from})
}

// loadWith converts a trace with opts into memory.
func loadWith(t *testing.T, path string, opts convert.Options) *SliceSource {
	t.Helper()
	st, err := convert.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	src := &SliceSource{H: st.Header}
	if err := st.Run(func(r *trace.Request) error {
		c := *r
		c.HashIDs = append([]uint64(nil), r.HashIDs...)
		src.Reqs = append(src.Reqs, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestRealTraces replays the converted WEKA Claude Code sessions and the
// Mooncake conversation trace through naive PD 1P3D and DP x4: every request
// is accounted for, and the only failures are prompts over the model's
// context (262,144 tokens), which the WEKA set has.
func TestRealTraces(t *testing.T) {
	p := profile(t)
	for _, tc := range []struct {
		sub, from string
		requests  int
	}{
		{"weka", "weka", 5049},
		{"mooncake/conversation_trace.jsonl", "mooncake", 12031},
	} {
		src := load(t, tracetest.SharedTraces(t, tc.sub), tc.from)
		for _, cfg := range []Config{
			{Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
			{Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky, Profile: p},
		} {
			s := *src
			res, err := Run(context.Background(), cfg, &s, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			sum := res.Summary
			if sum.Requests != tc.requests || res.Replay.Requests != tc.requests {
				t.Fatalf("%s %s: %d requests recorded, want %d", tc.sub, cfg.Mechanism, sum.Requests, tc.requests)
			}
			for cause := range sum.FailureCauses {
				if cause != "failed: input-too-long" {
					t.Fatalf("%s %s: unexpected failure cause %q", tc.sub, cfg.Mechanism, cause)
				}
			}
			if sum.Completed == 0 || sum.TTFTStats.P50 <= 0 {
				t.Fatalf("%s %s: nothing completed", tc.sub, cfg.Mechanism)
			}
			t.Logf("%s %s: %d completed, TTFT p50 %.3fs p99 %.1fs, cache hit %.1f%%",
				tc.sub, cfg.Mechanism, sum.Completed, sum.TTFTStats.P50, sum.TTFTStats.P99, 100*sum.CacheHitRatio)
		}
	}
}
