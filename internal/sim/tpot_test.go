package sim

import (
	"context"
	"math"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc/kvctest"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TPOT is the mean time between output tokens after the first: (e2e −
// TTFT) / (tokens − 1), as the gateway's histogram and vLLM compute it
// (mutant: divided by tokens).
func TestTPOTDivisor(t *testing.T) {
	toks := kvctest.NewPrompts().Next(kvctest.Turn{Session: "s", New: 3000}, nil)
	r := trace.Request{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: len(toks), OutputLength: 50, HashIDs: kvctest.Blocks(toks, 64)}
	sink := &memSink{}
	s, err := newSim(Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 1, Profile: profile(t)},
		&SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: []trace.Request{r}}, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.recs) != 1 || sink.recs[0].Status != metrics.StatusCompleted {
		t.Fatalf("records %+v", sink.recs)
	}
	m := sink.recs[0]
	if want := (m.LatencyS - m.TTFTS) / 49; m.TTFTS <= 0 || math.Abs(m.TPOTS-want) > 1e-12 {
		t.Fatalf("TPOT %v s; (e2e %v − TTFT %v) / 49 = %v", m.TPOTS, m.LatencyS, m.TTFTS, want)
	}
}
