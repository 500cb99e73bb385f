package sim

import (
	"context"
	"math"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

func profile(t testing.TB) *model.Profile {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func blocks(ns uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = ns<<32 | uint64(i+1)
	}
	return out
}

type memSink struct {
	recs    []metrics.Record
	samples []metrics.WorkerSample
	events  []metrics.Event
}

func (m *memSink) Request(r *metrics.Record) error { m.recs = append(m.recs, *r); return nil }
func (m *memSink) Worker(w *metrics.WorkerSample) error {
	m.samples = append(m.samples, *w)
	return nil
}
func (m *memSink) Event(e *metrics.Event) error { m.events = append(m.events, *e); return nil }

func run(t testing.TB, cfg Config, reqs []trace.Request, bs int) (*Result, *memSink) {
	t.Helper()
	sink := &memSink{}
	res, err := Run(context.Background(), cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: bs}, Reqs: reqs}, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res, sink
}

func one(input, output int) []trace.Request {
	return []trace.Request{{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: input,
		OutputLength: output, HashIDs: blocks(1, trace.BlocksFor(input, 64))}}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSingleRequestColocated(t *testing.T) {
	p := profile(t)
	tm, m := p.Timing, p.Model
	const input, output = 3000, 10
	cfg := Config{Mechanism: PDColo, Colo: 2, Profile: p}
	_, sink := run(t, cfg, one(input, output), 64)
	r := sink.recs[0]
	if want := tm.PrefillS(input, 0); !near(r.TTFTS, want) {
		t.Fatalf("TTFT %v, want prefill %v", r.TTFTS, want)
	}
	// The prefill produced token 1; each later token is one decode step.
	want := tm.PrefillS(input, 0)
	for k := 1; k < output; k++ {
		want += tm.DecodeStepS(m, 1, int64(input+k))
	}
	if !near(r.LatencyS, want) {
		t.Fatalf("latency %v, want %v", r.LatencyS, want)
	}
	if r.ExecutionMode != ModeColoRoute || r.PrefillWorker != "" || r.DecodeWorker != "colo-0" {
		t.Fatalf("labels %+v", r)
	}
}

// TestPrefixHitSavesExactlyCachedTokens: the second turn of a session
// extends the first; P's cache serves the first turn's full blocks and the
// prefill work drops by exactly those tokens.
func TestPrefixHitSavesExactlyCachedTokens(t *testing.T) {
	p := profile(t)
	const in1, in2 = 6400, 9000 // 6400 = 100 full blocks
	b2 := blocks(7, trace.BlocksFor(in2, 64))
	reqs := []trace.Request{
		{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: in1, OutputLength: 5, HashIDs: b2[:100]},
		{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1, InputLength: in2, OutputLength: 5, HashIDs: b2},
	}
	cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p}
	res, sink := run(t, cfg, reqs, 64)
	if got := sink.recs[1].CachedTokens; got != in1 {
		t.Fatalf("turn 2 cached %d, want %d", got, in1)
	}
	ws := res.Workers["prefill-0"]
	if ws.PrefillTokens != in1+(in2-in1) {
		t.Fatalf("prefill tokens %d, want %d", ws.PrefillTokens, in2)
	}
	// Turn 2's prefill time is the uncached part after a cached prefix.
	if want := p.Timing.PrefillS(in2-in1, in1); !near(sink.recs[1].Breakdown.PrefillS, want) {
		t.Fatalf("turn 2 prefill %v, want %v", sink.recs[1].Breakdown.PrefillS, want)
	}
}

func TestPolicies(t *testing.T) {
	p := profile(t)
	var reqs []trace.Request
	id := int64(0)
	for turn := 1; turn <= 3; turn++ {
		for s := 0; s < 4; s++ {
			id++
			parent := int64(-1)
			if turn > 1 {
				parent = id - 4
			}
			reqs = append(reqs, trace.Request{SessionID: string(rune('a' + s)), ChatID: id, ParentChatID: parent,
				Turn: turn, Timestamp: float64(turn * 100), InputLength: 1000 * turn, OutputLength: 3,
				HashIDs: blocks(uint64(s), trace.BlocksFor(1000*turn, 64))})
		}
	}
	for _, pol := range []kvc.Policy{kvc.PolicySticky, kvc.PolicyKVAware} {
		cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p, Policy: pol}
		_, sink := run(t, cfg, reqs, 64)
		pin := map[string]string{}
		for _, r := range sink.recs {
			if prev, ok := pin[r.SessionID]; ok && prev != r.DecodeWorker {
				t.Fatalf("%s: session %s moved %s → %s", pol, r.SessionID, prev, r.DecodeWorker)
			}
			pin[r.SessionID] = r.DecodeWorker
		}
	}
}
