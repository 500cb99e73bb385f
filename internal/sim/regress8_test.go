package sim

import (
	"context"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Naive-PD decode workers cache nothing, so kv-aware routing must not score
// them on blocks it once sent there: the requests spread over every decode
// worker instead of piling onto decode-0 (they all did before).
func TestPDKVAwareSpreadsDecodes(t *testing.T) {
	cfg := Config{Profile: profile(t), Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware}
	sink := &memSink{}
	if _, err := runSource(t, cfg, agentic(t, 30, 0.2), sink); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, r := range sink.recs {
		per[r.DecodeWorker]++
	}
	for _, d := range []string{"decode-0", "decode-1", "decode-2"} {
		if per[d] < len(sink.recs)/10 {
			t.Errorf("%s got %d of %d requests; want a fair share (per worker: %v)", d, per[d], len(sink.recs), per)
		}
	}
}

func runSource(t testing.TB, cfg Config, src Source, sink Sink) (*Result, error) {
	t.Helper()
	return Run(context.Background(), cfg, src, sink, nil)
}
