package sim

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/synth"
)

func kvcConfig(t testing.TB) Config {
	return Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: profile(t)}
}

func smallAppend(t testing.TB, sessions, turns, initial, appendTok int) Source {
	t.Helper()
	c := synth.DefaultSmallAppend()
	c.Sessions, c.Turns, c.InitialTokens, c.AppendTokens = sessions, turns, initial, appendTok
	g, err := synth.NewSmallAppend(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// On the seed's small-append microbenchmark every turn after the first goes
// direct to the decoder holding its session and prefills only its append;
// turn 1 is a seed through P.
func TestKVCDirectAppends(t *testing.T) {
	sink := &memSink{}
	res, err := runSource(t, kvcConfig(t), smallAppend(t, 8, 6, 32768, 512), sink)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, r := range sink.recs {
		if r.Status != metrics.StatusCompleted {
			t.Fatalf("request %d: %s %s", r.ChatID, r.Status, r.Error)
		}
		modes[r.ExecutionMode]++
		if r.ExecutionMode == "kvcache-direct-to-d-session" {
			// The append: the previous turn's output (256 tokens, its last
			// one has no KV) and 512 new tokens, from the last whole block.
			if r.UncachedTokens > 512+256+64 || r.PrefillWorker != "" {
				t.Fatalf("direct append %+v prefilled %d tokens", r, r.UncachedTokens)
			}
		}
	}
	if modes["pd-router-turn1-seed"] != 8 || modes["kvcache-direct-to-d-session"] != 40 {
		t.Fatalf("modes %v, want 8 seeds and 40 direct appends", modes)
	}
	if res.Summary.ExecutionModes["kvcache-direct-to-d-session"] != 40 {
		t.Fatalf("summary modes %v", res.Summary.ExecutionModes)
	}
}

// Appends above τ_append are refused by the decoder (real-large-append) and
// reseeded; raising τ_append sends them direct (the seed's F16: 53% → 92%).
func TestKVCAppendThreshold(t *testing.T) {
	share := func(tau int) float64 {
		cfg := kvcConfig(t)
		cfg.KVC.TauAppend = tau
		sink := &memSink{}
		if _, err := runSource(t, cfg, smallAppend(t, 6, 6, 20000, 4000), sink); err != nil {
			t.Fatal(err)
		}
		direct := 0
		for _, r := range sink.recs {
			if r.ExecutionMode == "kvcache-direct-to-d-session" {
				direct++
			} else if r.Turn > 1 && !strings.Contains(r.ExecutionMode, "real-large-append") {
				t.Fatalf("τ_append %d: turn %d went %s (path %v)", tau, r.Turn, r.ExecutionMode, r.Path)
			}
		}
		return float64(direct) / float64(len(sink.recs))
	}
	lo, hi := share(2048), share(8192)
	if lo != 0 || hi < 0.8 {
		t.Fatalf("direct share %.2f at τ_append 2048, %.2f at 8192; want 0 and ≥ 0.8", lo, hi)
	}
}
