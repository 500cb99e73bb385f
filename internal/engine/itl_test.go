package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// refGaps is the per-token definition the folded histogram must match: before
// each decode run ends, every decoding sequence is owed its first gap (from
// its previous token to the end of the run's first step) and the run's later
// steps; a completed request's gaps are added in completion order, an aborted
// one's dropped.
type refGaps struct {
	owed map[*Request][][2]float64 // gap, count
	h    metrics.GapHistogram
}

func (g *refGaps) beforeAdvance(w *Worker) {
	p := &w.plan
	if !w.busy || p.decodeK <= 0 {
		return
	}
	w.settleBatch() // the batch's last token times, read below
	for _, r := range w.decoding {
		if r.Stage != StageDecoding {
			continue
		}
		g.owed[r] = append(g.owed[r], [2]float64{w.stepStart + p.base - r.lastTokenAt, 1})
		for i := 1; i < p.decodeK; {
			span := p.decodeK - i
			if p.slope > 0 {
				d := p.base + p.slope*float64(i)
				span = min(span, max(1, int(0.005*d/p.slope)))
			}
			g.owed[r] = append(g.owed[r], [2]float64{p.base + p.slope*(float64(i)+float64(span-1)/2), float64(span)})
			i += span
		}
	}
}

func (g *refGaps) finished(r *Request) {
	for _, x := range g.owed[r] {
		g.h.Add(x[0], int64(x[1]))
	}
	delete(g.owed, r)
}

// TestFoldedGapsMatchPerTokenGaps drives colocated workers (SGLang's
// scheduler with a context-dependent step, and vLLM's with a pool small
// enough to preempt) through random arrivals and random aborts of running
// requests, and holds the folded histogram to the per-token definition:
// the same count, buckets, Min and Max, and the mean and spread to
// rounding.
func TestFoldedGapsMatchPerTokenGaps(t *testing.T) {
	var preemptions int64
	defer func() {
		if preemptions == 0 {
			t.Error("no preemption on the small vLLM pools: the parked spans are not tested")
		}
	}()
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		compact := seed/2%2 == 0 // compact the log at every step, or only as it doubles
		h := metrics.NewGapHistogram()
		cfg := Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20, Gaps: h}
		if seed%2 == 1 {
			cfg = Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 64, PoolTokens: 400, Gaps: h}
		}
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ref := &refGaps{owed: map[*Request][][2]float64{}}
		var reqs []*Request
		now, aborted, preempted, closedAborts := 0.0, 0, int64(0), 0
		// step advances the worker to its next event, the reference seeing
		// the batch before and the requests that finished; false when idle.
		step := func() bool {
			next, ok := w.NextTime()
			if !ok {
				return false
			}
			ref.beforeAdvance(w)
			now = next
			w.Advance(now)
			for _, ev := range w.TakeEvents() {
				if ev.Kind == EvFinished {
					ref.finished(ev.Req)
				}
			}
			return true
		}
		for i := range 200 {
			r := &Request{ID: int64(i + 1), Kind: Full, Input: 10 + rng.IntN(100), Output: 1 + rng.IntN(60)}
			reqs = append(reqs, r)
			if err := w.Submit(now, r); err != nil {
				t.Fatal(err)
			}
			for range rng.IntN(8) {
				if !step() {
					break
				}
				if compact {
					w.compactGaps()
				}
				for _, v := range reqs {
					if v.Stage == StageWaiting && v.gapSt.closed != nil && rng.IntN(2) == 0 {
						closedAborts++ // preempted, waiting to compute again
						w.Abort(now, v)
						delete(ref.owed, v)
						aborted++
					}
				}
				if rng.IntN(10) == 0 && len(w.decoding) > 0 {
					v := w.decoding[rng.IntN(len(w.decoding))]
					if v.gapSt.closed != nil {
						closedAborts++
					}
					w.Abort(now, v)
					delete(ref.owed, v)
					aborted++
				}
			}
		}
		for step() {
		}
		preempted = w.Stats().Preemptions
		want := &ref.h
		if h.Count() != want.Count() || h.Min() != want.Min() || h.Max() != want.Max() {
			t.Fatalf("seed %d: folded %d gaps in [%v, %v], per token %d in [%v, %v]", seed, h.Count(), h.Min(), h.Max(), want.Count(), want.Min(), want.Max())
		}
		for q := 0.0; q <= 1; q += 0.01 {
			if a, b := h.Quantile(q), want.Quantile(q); a != b {
				t.Fatalf("seed %d: q%.2f folded %v, per token %v", seed, q, a, b)
			}
		}
		if rel(h.Mean(), want.Mean()) > 1e-12 || rel(h.Std(), want.Std()) > 1e-9 {
			t.Fatalf("seed %d: mean %v std %v, per token %v %v", seed, h.Mean(), h.Std(), want.Mean(), want.Std())
		}
		if aborted == 0 || want.Count() == 0 {
			t.Fatalf("seed %d: %d aborted, %d gaps: the scenario tests nothing", seed, aborted, want.Count())
		}
		preemptions += preempted
		t.Logf("seed %d: %d preemptions, %d aborted with closed spans", seed, preempted, closedAborts)
		if n := len(w.gapLog.runs); n > 512 {
			t.Fatalf("seed %d: idle worker keeps %d runs in its gap log", seed, n)
		}
	}
}

func rel(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / max(math.Abs(a), math.Abs(b))
}

// TestRetractLiveGaps: a run that stops with requests decoding reports ITL
// over the completed ones only.
func TestRetractLiveGaps(t *testing.T) {
	h := metrics.NewGapHistogram()
	w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20, Gaps: h})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := w.Submit(0, &Request{ID: int64(i + 1), Kind: Full, Input: 100, Output: 20 + 200*i}); err != nil {
			t.Fatal(err)
		}
	}
	var done int64
	for range 4 {
		next, _ := w.NextTime()
		w.Advance(next)
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvFinished {
				done += int64(ev.Req.Output - 1)
			}
		}
	}
	if done == 0 || h.Count() <= done || len(w.decoding) == 0 {
		t.Fatalf("%d gaps folded, %d of them completed, %d decoding: want both kinds", h.Count(), done, len(w.decoding))
	}
	w.RetractLiveGaps()
	if h.Count() != done {
		t.Fatalf("%d gaps left after retracting the live requests', want the completed %d", h.Count(), done)
	}
}
