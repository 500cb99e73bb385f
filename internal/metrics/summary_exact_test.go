package metrics

import (
	"math"
	"reflect"
	"testing"
)

// near reports whether got is want to rounding (relative 1e-9).
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// checkStats compares a distribution with one computed by hand.
func checkStats(t *testing.T, name string, got, want Stats) {
	t.Helper()
	if got.Count != want.Count || !near(got.Mean, want.Mean) || !near(got.Std, want.Std) ||
		!near(got.P50, want.P50) || !near(got.P90, want.P90) || !near(got.P95, want.P95) ||
		!near(got.P99, want.P99) || !near(got.Max, want.Max) {
		t.Errorf("%s = %+v, want %+v", name, got, want)
	}
}

// checkMs compares vLLM's millisecond figures with the hand-computed
// distribution in seconds, times 1000.
func checkMs(t *testing.T, name string, got [7]float64, st Stats) {
	t.Helper()
	want := [7]float64{st.Mean * 1000, st.P50 * 1000, st.Std * 1000, st.P50 * 1000, st.P90 * 1000, st.P95 * 1000, st.P99 * 1000}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Errorf("%s ms (mean, median, std, p50, p90, p95, p99) = %v, want %v", name, got, want)
			return
		}
	}
}

// TestSummaryExact: every figure of a small run, computed by hand. The
// records arrive out of order (the first added is not the first sent), sit
// on the SLO's bounds (a request exactly at a bound is good), and include
// a one-token answer (no TPOT) and one with no decode worker.
func TestSummaryExact(t *testing.T) {
	c := NewCollector(SLO{TTFTS: 1, TPOTS: 0.25, LatencyS: 4})
	recs := []Record{
		// good: every figure exactly at its bound; direct to D, no prefill worker
		{Status: StatusCompleted, ArrivalS: 5, TTFTS: 1, LatencyS: 4, TPOTS: 0.25, OutputLength: 9, InputLength: 100, CachedTokens: 40, UncachedTokens: 60, ExecutionMode: "kvcache-direct-to-d-session", DecodeWorker: "d0"},
		// bad TTFT; P/D
		{Status: StatusCompleted, ArrivalS: 1, TTFTS: 2, LatencyS: 6, TPOTS: 0.5, OutputLength: 9, InputLength: 200, UncachedTokens: 200, ExecutionMode: "pd", PrefillWorker: "p0", DecodeWorker: "d0"},
		// good: one token, so its TPOT is neither judged nor averaged
		{Status: StatusCompleted, ArrivalS: 2, TTFTS: 0.5, LatencyS: 3, TPOTS: 9, OutputLength: 1, InputLength: 50, CachedTokens: 50, ExecutionMode: "kvcache-direct-to-d-session-via-local-prefill", DecodeWorker: "d1"},
		// bad TPOT
		{Status: StatusCompleted, ArrivalS: 3, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.3, OutputLength: 5, InputLength: 10, UncachedTokens: 10, ExecutionMode: "pd", PrefillWorker: "p0", DecodeWorker: "d1"},
		// bad latency; no worker named
		{Status: StatusCompleted, ArrivalS: 4, TTFTS: 0.25, LatencyS: 4.5, TPOTS: 0.1, OutputLength: 3, InputLength: 40, CachedTokens: 10, UncachedTokens: 30, ExecutionMode: "pd"},
		{Status: StatusTimeout, ArrivalS: 0.5, LatencyS: 20, Error: "timeout: after 20s", ExecutionMode: "pd"},
		{Status: StatusAborted, ArrivalS: 6, LatencyS: 1},
		{Status: StatusFailed, ArrivalS: 7, LatencyS: 0.5, Error: "refused: busy", ExecutionMode: "pd", DecodeWorker: "d9"},
	}
	for i := range recs {
		c.Add(&recs[i])
	}
	s := c.Summary(0)

	// Span: first sent at 0.5 (the timeout), last ended at 0.5+20.
	if s.DurationS != 20 || !s.Complete {
		t.Errorf("duration %v complete %v, want 20 true", s.DurationS, s.Complete)
	}
	counts := [8]int{s.Requests, s.Completed, s.Errors, s.Failed, s.Timeouts, s.Aborts, s.Failures, s.GoodRequests}
	if counts != [8]int{8, 5, 3, 3, 1, 1, 1, 2} {
		t.Errorf("requests, completed, errors, failed, timeouts, aborts, failures, good = %v, want [8 5 3 3 1 1 1 2]", counts)
	}
	if want := map[string]int{"timeout: timeout": 1, "aborted: unknown": 1, "failed: refused": 1}; !reflect.DeepEqual(s.FailureCauses, want) {
		t.Errorf("failure causes %v, want %v", s.FailureCauses, want)
	}
	if want := map[string]int{"kvcache-direct-to-d-session": 1, "kvcache-direct-to-d-session-via-local-prefill": 1, "pd": 5}; !reflect.DeepEqual(s.ExecutionModes, want) {
		t.Errorf("execution modes %v, want %v", s.ExecutionModes, want)
	}
	tokens := [5]int64{s.TotalInputTokens, s.TotalOutputTokens, s.PromptTokens, s.CachedTokens, int64(s.CacheHitRequests)}
	if tokens != [5]int64{400, 27, 400, 100, 3} {
		t.Errorf("input, output, prompt, cached tokens, cache-hit requests = %v, want [400 27 400 100 3]", tokens)
	}
	if s.CacheHitRatio != 0.25 || s.DirectToDShare != 0.4 {
		t.Errorf("cache hit ratio %v direct-to-D share %v, want 0.25 0.4", s.CacheHitRatio, s.DirectToDShare)
	}
	rates := [4]float64{s.RequestThroughput, s.OutputThroughput, s.TotalTokenThrough, s.RequestGoodput}
	for i, want := range [4]float64{5.0 / 20, 27.0 / 20, 427.0 / 20, 2.0 / 20} {
		if !near(rates[i], want) {
			t.Errorf("request, output, total token throughput, goodput = %v; [%d] want %v", rates, i, want)
		}
	}
	if want := map[string]Load{
		"d0": {Requests: 2, PromptTokens: 300, PrefillTokens: 60, OutputTokens: 18},
		"d1": {Requests: 2, PromptTokens: 60, PrefillTokens: 0, OutputTokens: 6},
	}; !reflect.DeepEqual(s.PerDecodeLoad, want) {
		t.Errorf("per-decode load %v, want %v", s.PerDecodeLoad, want)
	}
	if want := map[string]Load{"p0": {Requests: 2, PromptTokens: 210, PrefillTokens: 210}}; !reflect.DeepEqual(s.PerPrefillLoad, want) {
		t.Errorf("per-prefill load %v, want %v", s.PerPrefillLoad, want)
	}

	// TTFT 0.25 0.5 0.5 1 2: mean 0.85, squares 0.36+2·0.1225+0.0225+1.3225 = 1.95;
	// p90 at rank 3.6 = 1 + 0.6·(2−1).
	ttft := Stats{Count: 5, Mean: 0.85, Std: math.Sqrt(1.95 / 5), P50: 0.5, P90: 1.6, P95: 1.8, P99: 1.96, Max: 2}
	// TPOT 0.1 0.25 0.3 0.5 (the one-token answer left out): mean 0.2875,
	// squares 0.081875; p50 at rank 1.5 = 0.275, p90 at 2.7 = 0.3 + 0.7·0.2.
	tpot := Stats{Count: 4, Mean: 0.2875, Std: math.Sqrt(0.081875 / 4), P50: 0.275, P90: 0.44, P95: 0.47, P99: 0.494, Max: 0.5}
	// Latency 2 3 4 4.5 6: mean 3.9, squares 3.61+0.81+0.01+0.36+4.41 = 9.2.
	lat := Stats{Count: 5, Mean: 3.9, Std: math.Sqrt(9.2 / 5), P50: 4, P90: 5.4, P95: 5.7, P99: 5.94, Max: 6}
	checkStats(t, "ttft", s.TTFTStats, ttft)
	checkStats(t, "tpot", s.TPOTStats, tpot)
	checkStats(t, "latency", s.LatencyStats, lat)
	checkMs(t, "ttft", [7]float64{s.MeanTTFTMs, s.MedianTTFTMs, s.StdTTFTMs, s.P50TTFTMs, s.P90TTFTMs, s.P95TTFTMs, s.P99TTFTMs}, ttft)
	checkMs(t, "tpot", [7]float64{s.MeanTPOTMs, s.MedianTPOTMs, s.StdTPOTMs, s.P50TPOTMs, s.P90TPOTMs, s.P95TPOTMs, s.P99TPOTMs}, tpot)
	checkMs(t, "e2el", [7]float64{s.MeanE2ELMs, s.MedianE2ELMs, s.StdE2ELMs, s.P50E2ELMs, s.P90E2ELMs, s.P95E2ELMs, s.P99E2ELMs}, lat)

	// A duration given by the caller replaces the measured span.
	s = c.Summary(10)
	if s.DurationS != 10 || s.RequestThroughput != 0.5 || s.RequestGoodput != 0.2 {
		t.Errorf("Summary(10): duration %v throughput %v goodput %v, want 10 0.5 0.2", s.DurationS, s.RequestThroughput, s.RequestGoodput)
	}
}

// TestSummaryITLExact: the *_itl_ms fields are the histogram's figures
// times 1000; an empty histogram gives none.
func TestSummaryITLExact(t *testing.T) {
	c := NewCollector(SLO{})
	c.Add(&Record{Status: StatusCompleted, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.1, OutputLength: 16})
	c.SetITL(NewGapHistogram())
	if s := c.Summary(0); s.MeanITLMs != nil || s.P50ITLMs != nil || s.P99ITLMs != nil {
		t.Fatal("an empty gap histogram gave ITL figures")
	}
	h := NewGapHistogram()
	h.Add(0.01, 3)
	h.Add(0.02, 3)
	h.Add(0.1, 4)
	c.SetITL(h)
	s := c.Summary(0)
	got := [7]*float64{s.MeanITLMs, s.MedianITLMs, s.StdITLMs, s.P50ITLMs, s.P90ITLMs, s.P95ITLMs, s.P99ITLMs}
	want := [7]float64{h.Mean(), h.Quantile(0.5), h.Std(), h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.95), h.Quantile(0.99)}
	for i := range got {
		if got[i] == nil || !near(*got[i], want[i]*1000) {
			t.Fatalf("ITL field %d (mean, median, std, p50, p90, p95, p99) = %v, want %v ms", i, got[i], want[i]*1000)
		}
	}
	// Ranks: 0.5·9 → 4 (0.02), 0.9·9 → 8 (0.1): within a bucket (1 %).
	if math.Abs(*s.MedianITLMs-20) > 0.2 || math.Abs(*s.P90ITLMs-100) > 1 || !near(*s.MeanITLMs, (0.03+0.06+0.4)/10*1000) {
		t.Errorf("ITL median %v p90 %v mean %v ms, want about 20, 100, 49", *s.MedianITLMs, *s.P90ITLMs, *s.MeanITLMs)
	}
}

// TestSummaryDegenerate: the guards against dividing by zero, and an SLO
// of zeros (no bound) judging every completed request good.
func TestSummaryDegenerate(t *testing.T) {
	// One completed request with no prompt, sent and ended at 0: no span.
	c := NewCollector(SLO{})
	c.Add(&Record{Status: StatusCompleted, TTFTS: 0, LatencyS: 0, OutputLength: 2, TPOTS: 0})
	s := c.Summary(0)
	if s.CacheHitRatio != 0 || s.DurationS != 0 || s.RequestThroughput != 0 || s.OutputThroughput != 0 || s.TotalTokenThrough != 0 || s.RequestGoodput != 0 {
		t.Errorf("no prompt, no span: ratio %v duration %v rates %v %v %v %v, want all 0",
			s.CacheHitRatio, s.DurationS, s.RequestThroughput, s.OutputThroughput, s.TotalTokenThrough, s.RequestGoodput)
	}
	// Only failures: no share of completed requests.
	f := NewCollector(SLO{})
	f.Add(&Record{Status: StatusFailed, ArrivalS: 1, LatencyS: 1, Error: "x"})
	if s := f.Summary(0); s.DirectToDShare != 0 || s.Completed != 0 || s.DurationS != 1 {
		t.Errorf("only failures: share %v completed %d duration %v, want 0 0 1", s.DirectToDShare, s.Completed, s.DurationS)
	}
	// No bound set: slow requests are still good.
	g := NewCollector(SLO{})
	g.Add(&Record{Status: StatusCompleted, TTFTS: 3, LatencyS: 9, TPOTS: 0.5, OutputLength: 13})
	if s := g.Summary(0); s.GoodRequests != 1 {
		t.Errorf("SLO of zeros: %d good, want 1", s.GoodRequests)
	}
	// Each bound alone, just over it: bad.
	for _, slo := range []SLO{{TTFTS: 2.9}, {TPOTS: 0.49}, {LatencyS: 8.9}} {
		g := NewCollector(slo)
		g.Add(&Record{Status: StatusCompleted, TTFTS: 3, LatencyS: 9, TPOTS: 0.5, OutputLength: 13})
		if s := g.Summary(0); s.GoodRequests != 0 {
			t.Errorf("SLO %+v: %d good, want 0", slo, s.GoodRequests)
		}
	}
}

// TestDescribeExact: population std (divided by n), not sample std, and
// numpy's interpolated percentiles.
func TestDescribeExact(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	// mean 2.5, squares 2.25+0.25+0.25+2.25 = 5; p90 at rank 2.7 = 3.7.
	checkStats(t, "1..4", Describe(xs), Stats{Count: 4, Mean: 2.5, Std: math.Sqrt(5.0 / 4), P50: 2.5, P90: 3.7, P95: 3.85, P99: 3.97, Max: 4})
	checkStats(t, "one", Describe([]float64{7}), Stats{Count: 1, Mean: 7, P50: 7, P90: 7, P95: 7, P99: 7, Max: 7})
	for _, c := range []struct{ q, want float64 }{{-5, 1}, {0, 1}, {25, 1.75}, {100, 4}, {150, 4}} {
		if got := Percentile([]float64{1, 2, 3, 4}, c.q); !near(got, c.want) {
			t.Errorf("p%v of 1..4 = %v, want %v", c.q, got, c.want)
		}
	}
}
