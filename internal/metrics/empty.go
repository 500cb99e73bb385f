package metrics

import "encoding/json"

// A statistic over no requests has no value: summary.json writes it as
// null, never as 0, because a TTFT p99 of 0 reads as a perfect run when no
// request completed at all. Decoding null leaves a float at 0, so files
// read back as before; readers tell "none" from "zero" by the count
// (Stats.Count, Summary.Completed).

// MarshalJSON writes an empty distribution's figures as null.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	if s.Count > 0 {
		return json.Marshal(plain(s))
	}
	return json.Marshal(struct {
		Count int      `json:"count"`
		Mean  *float64 `json:"mean"`
		Std   *float64 `json:"std"`
		P50   *float64 `json:"p50"`
		P90   *float64 `json:"p90"`
		P95   *float64 `json:"p95"`
		P99   *float64 `json:"p99"`
		Max   *float64 `json:"max"`
	}{})
}

// MarshalJSON writes the millisecond figures (vLLM's names) of a
// distribution with no sample as null, and the ratios over completed
// requests (cache hit ratio, direct-to-D share) as null when none
// completed.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	out := struct {
		plain
		MeanTTFTMs     *float64 `json:"mean_ttft_ms"`
		MedianTTFTMs   *float64 `json:"median_ttft_ms"`
		StdTTFTMs      *float64 `json:"std_ttft_ms"`
		P50TTFTMs      *float64 `json:"p50_ttft_ms"`
		P90TTFTMs      *float64 `json:"p90_ttft_ms"`
		P95TTFTMs      *float64 `json:"p95_ttft_ms"`
		P99TTFTMs      *float64 `json:"p99_ttft_ms"`
		MeanTPOTMs     *float64 `json:"mean_tpot_ms"`
		MedianTPOTMs   *float64 `json:"median_tpot_ms"`
		StdTPOTMs      *float64 `json:"std_tpot_ms"`
		P50TPOTMs      *float64 `json:"p50_tpot_ms"`
		P90TPOTMs      *float64 `json:"p90_tpot_ms"`
		P95TPOTMs      *float64 `json:"p95_tpot_ms"`
		P99TPOTMs      *float64 `json:"p99_tpot_ms"`
		MeanE2ELMs     *float64 `json:"mean_e2el_ms"`
		MedianE2ELMs   *float64 `json:"median_e2el_ms"`
		StdE2ELMs      *float64 `json:"std_e2el_ms"`
		P50E2ELMs      *float64 `json:"p50_e2el_ms"`
		P90E2ELMs      *float64 `json:"p90_e2el_ms"`
		P95E2ELMs      *float64 `json:"p95_e2el_ms"`
		P99E2ELMs      *float64 `json:"p99_e2el_ms"`
		CacheHitRatio  *float64 `json:"cache_hit_ratio"`
		DirectToDShare *float64 `json:"direct_to_d_share"`
	}{plain: plain(s)}
	some := func(n int, v float64) *float64 {
		if n == 0 {
			return nil
		}
		return &v
	}
	t, p, l := s.TTFTStats.Count, s.TPOTStats.Count, s.LatencyStats.Count
	out.MeanTTFTMs, out.MedianTTFTMs, out.StdTTFTMs = some(t, s.MeanTTFTMs), some(t, s.MedianTTFTMs), some(t, s.StdTTFTMs)
	out.P50TTFTMs, out.P90TTFTMs, out.P95TTFTMs, out.P99TTFTMs = some(t, s.P50TTFTMs), some(t, s.P90TTFTMs), some(t, s.P95TTFTMs), some(t, s.P99TTFTMs)
	out.MeanTPOTMs, out.MedianTPOTMs, out.StdTPOTMs = some(p, s.MeanTPOTMs), some(p, s.MedianTPOTMs), some(p, s.StdTPOTMs)
	out.P50TPOTMs, out.P90TPOTMs, out.P95TPOTMs, out.P99TPOTMs = some(p, s.P50TPOTMs), some(p, s.P90TPOTMs), some(p, s.P95TPOTMs), some(p, s.P99TPOTMs)
	out.MeanE2ELMs, out.MedianE2ELMs, out.StdE2ELMs = some(l, s.MeanE2ELMs), some(l, s.MedianE2ELMs), some(l, s.StdE2ELMs)
	out.P50E2ELMs, out.P90E2ELMs, out.P95E2ELMs, out.P99E2ELMs = some(l, s.P50E2ELMs), some(l, s.P90E2ELMs), some(l, s.P95E2ELMs), some(l, s.P99E2ELMs)
	out.CacheHitRatio = some(int(min(s.PromptTokens, 1)), s.CacheHitRatio)
	out.DirectToDShare = some(s.Completed, s.DirectToDShare)
	return json.Marshal(out)
}
