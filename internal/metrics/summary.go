package metrics

import (
	"math"
	"slices"
	"strings"
)

// Stats is the seed's distribution shape (seconds).
type Stats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// SLO is the service-level objective for goodput: a completed request counts
// as good when every given bound holds. Zero bounds are ignored.
type SLO struct {
	TTFTS    float64 `json:"ttft_s,omitempty"`
	TPOTS    float64 `json:"tpot_s,omitempty"`
	LatencyS float64 `json:"e2el_s,omitempty"`
}

// Load counts what one worker did.
type Load struct {
	Requests      int   `json:"requests"`
	PromptTokens  int64 `json:"prompt_tokens"`  // input tokens of requests it served
	PrefillTokens int64 `json:"prefill_tokens"` // tokens it actually computed in prefill
	OutputTokens  int64 `json:"output_tokens"`
}

// Summary is summary.json. The first block uses the seed's names, the second
// vLLM `bench serve` names (milliseconds), so results compare with both.
//
// A summary describes what it measured: whether the run finished its
// workload (Complete; StopReason says why not), the model, the workload and
// its time scale, the client's concurrency limit, and when it ran. The
// simulator fills Complete and StopReason; the command that started the run
// fills the rest (the simulator itself has no wall clock).
type Summary struct {
	Mechanism string `json:"mechanism,omitempty"`
	Policy    string `json:"policy,omitempty"`

	// Complete is true when the run replayed its whole workload. A run that
	// stopped early (interrupted, or a limit reached) has Complete false and
	// StopReason set; its figures cover only the requests that ended before
	// the stop. Summaries written before this field existed read as complete
	// (StopReason empty): test Stopped(), not Complete, when reading files.
	Complete   bool   `json:"complete"`
	StopReason string `json:"stop_reason,omitempty"`
	// Warnings are what the run said on stderr while it ran (an overload
	// building up, say), kept with its figures.
	Warnings []string `json:"warnings,omitempty"`
	// DToPSync counts D→P snapshot outcomes by "<event>: <stage>" (ok:
	// finalize, skipped: entry, failed: prepare, ...); absent when off.
	DToPSync map[string]int `json:"d_to_p_sync,omitempty"`

	ModelID  string `json:"model_id,omitempty"` // served model (vLLM's model_id)
	Hardware string `json:"hardware,omitempty"` // hardware profile of every worker
	Date     string `json:"date,omitempty"`     // run start, RFC 3339 (vLLM's date)
	Workload string `json:"workload,omitempty"` // trace file or built-in generator with its settings
	Version  string `json:"pdhybrid_version,omitempty"`
	// RequestRate is the offered load: requests per second of (scaled)
	// trace time between the first and the last request's timestamp; 0 when
	// fewer than two distinct timestamps. Closed-loop replay holds a turn
	// until its parent ends, so the achieved rate can be lower.
	RequestRate float64 `json:"request_rate"`
	// MaxConcurrency is the client's limit on requests in flight; null when
	// unlimited (as vLLM writes it).
	MaxConcurrency *int    `json:"max_concurrency"`
	TimeScale      float64 `json:"time_scale,omitempty"` // trace time was divided by this
	// WorkerSampleIntervalS is the period of structural/workers.jsonl.
	WorkerSampleIntervalS float64 `json:"worker_sample_interval_s,omitempty"`

	Requests         int             `json:"requests"`
	Errors           int             `json:"errors"` // failed + timeout + aborted
	Failures         int             `json:"failures"`
	Timeouts         int             `json:"timeouts"`
	Aborts           int             `json:"aborts"`
	FailureCauses    map[string]int  `json:"failure_causes"` // "<status>: <cause>" → count
	LatencyStats     Stats           `json:"latency_stats_s"`
	TTFTStats        Stats           `json:"ttft_stats_s"`
	TPOTStats        Stats           `json:"tpot_stats_s"`
	ExecutionModes   map[string]int  `json:"execution_modes"`
	PerDecodeLoad    map[string]Load `json:"per_decode_load"`
	PerPrefillLoad   map[string]Load `json:"per_prefill_load"`
	CacheHitRequests int             `json:"cache_hit_requests"` // completed requests with cached_tokens > 0
	CachedTokens     int64           `json:"cached_tokens"`
	PromptTokens     int64           `json:"prompt_tokens"`
	CacheHitRatio    float64         `json:"cache_hit_ratio"` // cached / prompt tokens over completed requests
	DirectToDShare   float64         `json:"direct_to_d_share"`

	DurationS         float64 `json:"duration"`
	Completed         int     `json:"completed"`
	Failed            int     `json:"failed"`
	TotalInputTokens  int64   `json:"total_input_tokens"`
	TotalOutputTokens int64   `json:"total_output_tokens"`
	RequestThroughput float64 `json:"request_throughput"` // completed requests / s
	OutputThroughput  float64 `json:"output_throughput"`  // output tokens / s
	TotalTokenThrough float64 `json:"total_token_throughput"`
	RequestGoodput    float64 `json:"request_goodput"` // good requests / s under SLO
	GoodRequests      int     `json:"good_requests"`
	SLO               SLO     `json:"slo"`

	MeanTTFTMs   float64 `json:"mean_ttft_ms"`
	MedianTTFTMs float64 `json:"median_ttft_ms"`
	StdTTFTMs    float64 `json:"std_ttft_ms"`
	P50TTFTMs    float64 `json:"p50_ttft_ms"`
	P90TTFTMs    float64 `json:"p90_ttft_ms"`
	P95TTFTMs    float64 `json:"p95_ttft_ms"`
	P99TTFTMs    float64 `json:"p99_ttft_ms"`
	MeanTPOTMs   float64 `json:"mean_tpot_ms"`
	MedianTPOTMs float64 `json:"median_tpot_ms"`
	StdTPOTMs    float64 `json:"std_tpot_ms"`
	P50TPOTMs    float64 `json:"p50_tpot_ms"`
	P90TPOTMs    float64 `json:"p90_tpot_ms"`
	P95TPOTMs    float64 `json:"p95_tpot_ms"`
	P99TPOTMs    float64 `json:"p99_tpot_ms"`
	// ITL: inter-token latency over every gap between consecutive tokens of
	// completed requests (token-weighted, as vLLM computes it), from the
	// GapHistogram given to Collector.SetITL. Absent when none was given:
	// ITL is not TPOT, so it is never filled from TPOT.
	MeanITLMs    *float64 `json:"mean_itl_ms,omitempty"`
	MedianITLMs  *float64 `json:"median_itl_ms,omitempty"`
	StdITLMs     *float64 `json:"std_itl_ms,omitempty"`
	P50ITLMs     *float64 `json:"p50_itl_ms,omitempty"`
	P90ITLMs     *float64 `json:"p90_itl_ms,omitempty"`
	P95ITLMs     *float64 `json:"p95_itl_ms,omitempty"`
	P99ITLMs     *float64 `json:"p99_itl_ms,omitempty"`
	MeanE2ELMs   float64  `json:"mean_e2el_ms"`
	MedianE2ELMs float64  `json:"median_e2el_ms"`
	StdE2ELMs    float64  `json:"std_e2el_ms"`
	P50E2ELMs    float64  `json:"p50_e2el_ms"`
	P90E2ELMs    float64  `json:"p90_e2el_ms"`
	P95E2ELMs    float64  `json:"p95_e2el_ms"`
	P99E2ELMs    float64  `json:"p99_e2el_ms"`
}

// Collector accumulates records into a Summary. Only completed requests enter
// latency statistics; the rest are counted by status and cause.
type Collector struct {
	slo                 SLO
	ttft, tpot, latency []float64
	s                   Summary
	direct              int
	firstArrival        float64
	lastFinish          float64
	seen                bool
	itl                 *GapHistogram
}

// Stopped reports whether the run stopped before replaying its workload.
func (s *Summary) Stopped() bool { return s.StopReason != "" }

// SetITL gives the collector the run's inter-token gaps; Summary reports
// their distribution as the *_itl_ms fields. The collector reads h only in
// Summary, so the caller may keep adding to it until then. nil leaves ITL
// out of the summary.
func (c *Collector) SetITL(h *GapHistogram) { c.itl = h }

// NewCollector returns a collector judging goodput by slo.
func NewCollector(slo SLO) *Collector {
	return &Collector{slo: slo, s: Summary{
		FailureCauses:  map[string]int{},
		ExecutionModes: map[string]int{},
		PerDecodeLoad:  map[string]Load{},
		PerPrefillLoad: map[string]Load{},
		SLO:            slo,
	}}
}

// Reserve makes room for n more requests' latencies: a caller that knows
// how many requests will end (a trace counted before the run) grows no list
// as they do, so none of the lists' earlier arrays is left behind (on a run
// that never collects, every byte allocated is a fresh page).
func (c *Collector) Reserve(n int) {
	if n <= 0 {
		return
	}
	c.ttft = slices.Grow(c.ttft, n)
	c.tpot = slices.Grow(c.tpot, n)
	c.latency = slices.Grow(c.latency, n)
}

// Add folds one finished request in.
func (c *Collector) Add(r *Record) {
	s := &c.s
	s.Requests++
	if !c.seen || r.ArrivalS < c.firstArrival {
		c.firstArrival = r.ArrivalS
	}
	c.seen = true
	if end := r.ArrivalS + r.LatencyS; end > c.lastFinish {
		c.lastFinish = end
	}
	if r.Status != StatusCompleted {
		s.Errors++
		switch r.Status {
		case StatusTimeout:
			s.Timeouts++
		case StatusAborted:
			s.Aborts++
		default:
			s.Failures++
		}
		s.FailureCauses[string(r.Status)+": "+Cause(r.Error)]++
		if r.ExecutionMode != "" {
			s.ExecutionModes[r.ExecutionMode]++
		}
		return
	}
	s.Completed++
	s.ExecutionModes[r.ExecutionMode]++
	if r.ExecutionMode == "kvcache-direct-to-d-session" || r.ExecutionMode == "kvcache-direct-to-d-session-via-local-prefill" {
		c.direct++ // on the extension, or do_local_prefill (kvc.PathMode)
	}
	s.TotalInputTokens += int64(r.InputLength)
	s.TotalOutputTokens += int64(r.OutputLength)
	s.PromptTokens += int64(r.InputLength)
	s.CachedTokens += int64(r.CachedTokens)
	if r.CachedTokens > 0 {
		s.CacheHitRequests++
	}
	c.ttft = append(c.ttft, r.TTFTS)
	c.latency = append(c.latency, r.LatencyS)
	if r.OutputLength > 1 {
		c.tpot = append(c.tpot, r.TPOTS)
	}
	if c.good(r) {
		s.GoodRequests++
	}
	if r.DecodeWorker != "" {
		l := s.PerDecodeLoad[r.DecodeWorker]
		l.Requests++
		l.PromptTokens += int64(r.InputLength)
		l.OutputTokens += int64(r.OutputLength)
		if r.PrefillWorker == "" {
			l.PrefillTokens += int64(r.UncachedTokens)
		}
		s.PerDecodeLoad[r.DecodeWorker] = l
	}
	if r.PrefillWorker != "" {
		l := s.PerPrefillLoad[r.PrefillWorker]
		l.Requests++
		l.PromptTokens += int64(r.InputLength)
		l.PrefillTokens += int64(r.UncachedTokens)
		s.PerPrefillLoad[r.PrefillWorker] = l
	}
}

func (c *Collector) good(r *Record) bool {
	if c.slo.TTFTS > 0 && r.TTFTS > c.slo.TTFTS {
		return false
	}
	if c.slo.TPOTS > 0 && r.OutputLength > 1 && r.TPOTS > c.slo.TPOTS {
		return false
	}
	if c.slo.LatencyS > 0 && r.LatencyS > c.slo.LatencyS {
		return false
	}
	return true
}

// Cause is the class of an error message "<cause>: <detail>": the text
// before the first colon. Summaries count failures by it so that details
// (sizes, worker names) do not split one cause into many.
func Cause(msg string) string {
	if i := strings.IndexByte(msg, ':'); i >= 0 {
		return msg[:i]
	}
	if msg == "" {
		return "unknown"
	}
	return msg
}

// Summary computes the run's summary. durationS overrides the measured span
// (first arrival to last finish) when positive. The summary says Complete;
// a caller whose run stopped early clears it and sets StopReason.
func (c *Collector) Summary(durationS float64) Summary {
	s := c.s
	if durationS <= 0 {
		durationS = c.lastFinish - c.firstArrival
	}
	s.DurationS = durationS
	s.Complete = true
	s.Failed = s.Errors
	var keys []uint64 // one radix-sort scratch for the three lists
	s.TTFTStats = describe(c.ttft, &keys)
	s.TPOTStats = describe(c.tpot, &keys)
	s.LatencyStats = describe(c.latency, &keys)
	if s.PromptTokens > 0 {
		s.CacheHitRatio = float64(s.CachedTokens) / float64(s.PromptTokens)
	}
	if s.Completed > 0 {
		s.DirectToDShare = float64(c.direct) / float64(s.Completed)
	}
	if durationS > 0 {
		s.RequestThroughput = float64(s.Completed) / durationS
		s.OutputThroughput = float64(s.TotalOutputTokens) / durationS
		s.TotalTokenThrough = float64(s.TotalInputTokens+s.TotalOutputTokens) / durationS
		s.RequestGoodput = float64(s.GoodRequests) / durationS
	}
	ms := func(st Stats) (mean, median, std, p50, p90, p95, p99 float64) {
		return st.Mean * 1e3, st.P50 * 1e3, st.Std * 1e3, st.P50 * 1e3, st.P90 * 1e3, st.P95 * 1e3, st.P99 * 1e3
	}
	s.MeanTTFTMs, s.MedianTTFTMs, s.StdTTFTMs, s.P50TTFTMs, s.P90TTFTMs, s.P95TTFTMs, s.P99TTFTMs = ms(s.TTFTStats)
	s.MeanTPOTMs, s.MedianTPOTMs, s.StdTPOTMs, s.P50TPOTMs, s.P90TPOTMs, s.P95TPOTMs, s.P99TPOTMs = ms(s.TPOTStats)
	if h := c.itl; h != nil && h.Count() > 0 {
		ptr := func(v float64) *float64 { v *= 1e3; return &v }
		s.MeanITLMs, s.StdITLMs = ptr(h.Mean()), ptr(h.Std())
		s.MedianITLMs, s.P50ITLMs = ptr(h.Quantile(0.5)), ptr(h.Quantile(0.5))
		s.P90ITLMs, s.P95ITLMs, s.P99ITLMs = ptr(h.Quantile(0.9)), ptr(h.Quantile(0.95)), ptr(h.Quantile(0.99))
	}
	s.MeanE2ELMs, s.MedianE2ELMs, s.StdE2ELMs, s.P50E2ELMs, s.P90E2ELMs, s.P95E2ELMs, s.P99E2ELMs = ms(s.LatencyStats)
	return s
}

// Describe computes count, mean, population std and percentiles of xs
// (sorted in place).
func Describe(xs []float64) Stats {
	var keys []uint64
	return describe(xs, &keys)
}

// describe is Describe with the radix sort's scratch in *keys, grown as
// needed and kept for the caller's next list.
func describe(xs []float64, keys *[]uint64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	sortFloatsWith(xs, keys)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return Stats{
		Count: len(xs),
		Mean:  mean,
		Std:   math.Sqrt(ss / float64(len(xs))),
		P50:   Percentile(xs, 50),
		P90:   Percentile(xs, 90),
		P95:   Percentile(xs, 95),
		P99:   Percentile(xs, 99),
		Max:   xs[len(xs)-1],
	}
}

// Percentile returns the q-th percentile (0–100) of sorted xs with linear
// interpolation between closest ranks (numpy's default), so figures match
// the seed's Python reports.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 100 {
		return sorted[n-1]
	}
	pos := q / 100 * float64(n-1)
	lo := int(math.Floor(pos))
	frac := pos - float64(lo)
	if lo+1 >= n {
		return sorted[n-1]
	}
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}
