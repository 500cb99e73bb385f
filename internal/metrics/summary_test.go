package metrics

import (
	"encoding/json"
	"math"
	"testing"
)

func TestPercentileMatchesNumpy(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	// numpy.percentile(range(1, 11), q) with linear interpolation.
	for _, c := range []struct{ q, want float64 }{{0, 1}, {50, 5.5}, {90, 9.1}, {99, 9.91}, {100, 10}} {
		if got := Percentile(xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("p%v = %v, want %v", c.q, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty percentile must be 0")
	}
}

// TestFailuresStayOutOfLatencyStats: the seed's bug was averaging failed
// requests' latencies into the summary.
func TestFailuresStayOutOfLatencyStats(t *testing.T) {
	c := NewCollector(SLO{TTFTS: 1})
	c.Add(&Record{Status: StatusCompleted, ArrivalS: 0, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.1, OutputLength: 16, InputLength: 100, CachedTokens: 60, ExecutionMode: "m", DecodeWorker: "d0"})
	c.Add(&Record{Status: StatusCompleted, ArrivalS: 1, TTFTS: 1.5, LatencyS: 3, TPOTS: 0.1, OutputLength: 16, InputLength: 100, ExecutionMode: "m", DecodeWorker: "d1"})
	c.Add(&Record{Status: StatusTimeout, ArrivalS: 2, LatencyS: 100, Error: "timeout: after 100s", ExecutionMode: "m"})
	c.Add(&Record{Status: StatusFailed, ArrivalS: 3, LatencyS: 0, Error: "kv-pool-too-small: decode-1: needs 9 tokens"})
	s := c.Summary(0)
	if s.Requests != 4 || s.Completed != 2 || s.Timeouts != 1 || s.Failures != 1 || s.Errors != 2 {
		t.Fatalf("counts %+v", s)
	}
	if s.TTFTStats.Count != 2 || s.TTFTStats.Mean != 1 || s.LatencyStats.Max != 3 {
		t.Fatalf("latency stats include failed requests: %+v %+v", s.TTFTStats, s.LatencyStats)
	}
	if s.FailureCauses["timeout: timeout"] != 1 || s.FailureCauses["failed: kv-pool-too-small"] != 1 {
		t.Fatalf("causes %v", s.FailureCauses)
	}
	if s.GoodRequests != 1 {
		t.Fatalf("goodput counted %d good requests under TTFT ≤ 1 s, want 1", s.GoodRequests)
	}
	// Span: first send at 0, last end at 2+100 = 102.
	if s.DurationS != 102 || math.Abs(s.RequestThroughput-2.0/102) > 1e-12 {
		t.Fatalf("duration %v throughput %v", s.DurationS, s.RequestThroughput)
	}
	if s.CacheHitRatio != 60.0/200 || s.CacheHitRequests != 1 {
		t.Fatalf("cache %v %v", s.CacheHitRatio, s.CacheHitRequests)
	}
	if s.MeanTTFTMs != 1000 || s.P50TTFTMs != 1000 {
		t.Fatalf("vLLM names: mean %v p50 %v", s.MeanTTFTMs, s.P50TTFTMs)
	}
}

func TestCause(t *testing.T) {
	for in, want := range map[string]string{"": "unknown", "timeout": "timeout", "input-too-long: 5 > 4": "input-too-long"} {
		if got := Cause(in); got != want {
			t.Errorf("Cause(%q) = %q, want %q", in, got, want)
		}
	}
}

// A run where no request completed has no latency: summary.json says
// null, not 0, and reads back with zero counts.
func TestSummaryEmptyIsNull(t *testing.T) {
	c := NewCollector(SLO{})
	c.Add(&Record{Status: StatusFailed, Error: "refused: x"})
	b, err := json.Marshal(c.Summary(0))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"p50_ttft_ms", "p99_e2el_ms", "mean_tpot_ms", "cache_hit_ratio", "direct_to_d_share"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	ttft := m["ttft_stats_s"].(map[string]any)
	if ttft["count"] != 0.0 || ttft["p99"] != nil {
		t.Errorf("ttft_stats_s %v, want count 0 and null figures", ttft)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil || back.Completed != 0 || back.Failures != 1 || back.TTFTStats.Count != 0 {
		t.Errorf("read back %+v (%v)", back, err)
	}
	// A completed request's figures are numbers.
	c.Add(&Record{Status: StatusCompleted, TTFTS: 0.5, LatencyS: 1, OutputLength: 4, TPOTS: 0.1, InputLength: 10})
	b, _ = json.Marshal(c.Summary(0))
	m = nil
	json.Unmarshal(b, &m)
	if m["p50_ttft_ms"] != 500.0 || m["ttft_stats_s"].(map[string]any)["p50"] != 0.5 {
		t.Errorf("one completed request: p50_ttft_ms %v, ttft_stats_s %v", m["p50_ttft_ms"], m["ttft_stats_s"])
	}
}
