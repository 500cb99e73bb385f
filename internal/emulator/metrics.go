package emulator

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// Load and metrics, under SGLang's names: /v1/loads (entrypoints/v1_loads.py,
// GetLoadsReqOutput in io_struct.py), the /get_load shim (GetLoadReqOutput)
// and Prometheus /metrics (metrics/collector.py: SchedulerMetricsCollector's
// gauges, TokenizerMetricsCollector's counters and histograms). Times are
// model seconds. Where SGLang averages over recent batches the emulator
// states its own window: gen_throughput over the last 10 model seconds of
// finished requests, cache_hit_rate and utilization over the worker's life.

// loadSnap is the worker's state at one instant (taken on the driver).
type loadSnap struct {
	now                                float64
	running, waiting                   int
	used, cached, reserved, capacity   int64
	pendingPrefill                     int64
	maxRunning                         int
	tokenUsage, hitRate, genTput, util float64
	prefillPrealloc, prefillInflight   int
	decodePrealloc, decodeTransfer     int
	sessions                           int // resident sessions (session-aware decoders)
	kv                                 kvStats
	stats                              engine.Stats
}

func (s *Server) snapshot(now float64) loadSnap {
	w := s.w
	st := s.stats()
	l := loadSnap{
		now: now, running: w.Running(), waiting: w.Queued(),
		used: w.Used(), cached: w.CachedTokens(), reserved: w.Reserved(), capacity: w.Capacity(),
		maxRunning: s.cfg.MaxRunning, kv: s.kv, stats: st, genTput: s.load.rate(now),
		sessions: w.ResidentSessions(),
	}
	if l.maxRunning == 0 {
		l.maxRunning = 128 // the engine's default
	}
	if l.capacity > 0 {
		l.tokenUsage = float64(l.used-l.cached) / float64(l.capacity)
	}
	if tot := st.CachedTokens + st.PrefillTokens; tot > 0 {
		l.hitRate = float64(st.CachedTokens) / float64(tot)
	}
	if now > 0 {
		l.util = min(st.BusyS/now, 1)
	}
	for _, rs := range s.reqs {
		switch rs.er.Stage {
		case engine.StageWaiting:
			l.pendingPrefill += int64(rs.er.Input)
			if rs.kind == legDecode {
				l.decodePrealloc++
			}
		case engine.StageReserved:
			l.decodeTransfer++
		case engine.StageNew:
			if rs.kind == legPrefill {
				l.prefillPrealloc++ // in the bootstrap queue
				l.waiting++
				l.pendingPrefill += int64(rs.er.Input)
			}
		case engine.StageHeld:
			l.prefillInflight++
		}
	}
	return l
}

// stats is the worker's counters, those of workers /flush_cache replaced
// included.
func (s *Server) stats() engine.Stats {
	a, b := s.base, s.w.Stats()
	a.PrefillSteps += b.PrefillSteps
	a.DecodeSteps += b.DecodeSteps
	a.PrefillTokens += b.PrefillTokens
	a.CachedTokens += b.CachedTokens
	a.KVWaits += b.KVWaits
	a.EvictedTokens += b.EvictedTokens
	a.SessionEvictions += b.SessionEvictions
	a.StallS += b.StallS
	a.BusyS += b.BusyS
	return a
}

// snapshotOr503 is takeSnapshot for a handler: when the driver has
// stopped it answers 503 and reports false.
func (s *Server) snapshotOr503(w http.ResponseWriter) (loadSnap, bool) {
	l, ok := s.takeSnapshot()
	if !ok {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
	}
	return l, ok
}

// takeSnapshot asks the driver; false when it has stopped.
func (s *Server) takeSnapshot() (loadSnap, bool) {
	var l loadSnap
	ok := s.d.do(func(now float64) { l = s.snapshot(now) })
	return l, ok
}

// loadWindow is the generated tokens of requests finished in the last
// loadWindowS model seconds.
type loadWindow struct {
	t []float64
	n []int
}

const loadWindowS = 10

func (l *loadWindow) add(t float64, n int) {
	l.t, l.n = append(l.t, t), append(l.n, n)
	l.trim(t)
}

func (l *loadWindow) trim(now float64) {
	i := 0
	for i < len(l.t) && l.t[i] < now-loadWindowS {
		i++
	}
	if i > 0 {
		l.t, l.n = append(l.t[:0], l.t[i:]...), append(l.n[:0], l.n[i:]...)
	}
}

func (l *loadWindow) rate(now float64) float64 {
	l.trim(now)
	sum := 0
	for _, n := range l.n {
		sum += n
	}
	if now <= 0 {
		return 0
	}
	return float64(sum) / min(float64(loadWindowS), now)
}

// kvStats describes the last KV transfer that landed (prefill workers).
type kvStats struct {
	lastBytes   int64
	lastLatency float64 // seconds
	totalBytes  int64
}

func (k *kvStats) record(t *engine.Transfer) {
	k.lastBytes, k.lastLatency = t.Bytes, t.DoneAt-t.StartedAt
	k.totalBytes += t.Bytes
}

func (k kvStats) speedGBs() float64 {
	if k.lastLatency <= 0 {
		return 0
	}
	return float64(k.lastBytes) / k.lastLatency / 1e9
}

// metrics is the worker's Prometheus registry: gauges read from a snapshot
// at scrape time, counters and histograms fed as requests end.
type metrics struct {
	s      *Server
	reg    *prometheus.Registry
	labels prometheus.Labels

	prompt, generation, cached, requests, abortedN prometheus.Counter
	bootFail, xferFail, evictions                  prometheus.Counter
	ttft, e2e, queue                               prometheus.Histogram
	itl                                            *countHist
	itlDesc                                        *prometheus.Desc
	gauges                                         []gaugeDef
}

type gaugeDef struct {
	desc *prometheus.Desc
	get  func(l *loadSnap) float64
}

// SGLang's histogram buckets (collector.py).
var (
	ttftBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	e2eBuckets   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	itlBuckets   = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000}
	queueBuckets = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

func newMetrics(s *Server) *metrics {
	m := &metrics{s: s, reg: prometheus.NewRegistry(), labels: prometheus.Labels{
		"model_name": s.cfg.ServedModelName, "engine_type": s.engineType(), "tp_rank": "0", "pp_rank": "0",
	}}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: m.labels})
		m.reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, b []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b, ConstLabels: m.labels})
		m.reg.MustRegister(h)
		return h
	}
	m.prompt = counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generation = counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.cached = counter("sglang:cached_tokens_total", "Number of cached prompt tokens.")
	m.requests = counter("sglang:num_requests_total", "Number of requests processed.")
	m.abortedN = counter("sglang:num_aborted_requests_total", "Number of requests aborted.")
	m.bootFail = counter("sglang:num_bootstrap_failed_reqs_total", "The number of bootstrap failed requests.")
	m.xferFail = counter("sglang:num_transfer_failed_reqs_total", "The number of transfer failed requests.")
	m.evictions = counter("pdhybrid:session_evictions_total", "Sessions a session-aware decode cache evicted (emulator extension).")
	m.ttft = hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.e2e = hist("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", e2eBuckets)
	m.queue = hist("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", queueBuckets)
	m.itl = newCountHist(itlBuckets)
	m.itlDesc = prometheus.NewDesc("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", nil, m.labels)
	g := func(name, help string, get func(l *loadSnap) float64) {
		m.gauges = append(m.gauges, gaugeDef{prometheus.NewDesc(name, help, nil, m.labels), get})
	}
	g("sglang:num_running_reqs", "The number of running requests.", func(l *loadSnap) float64 { return float64(l.running) })
	g("sglang:num_used_tokens", "The number of used tokens.", func(l *loadSnap) float64 { return float64(l.used - l.cached) })
	g("sglang:token_usage", "The token usage.", func(l *loadSnap) float64 { return l.tokenUsage })
	g("sglang:gen_throughput", "The generation throughput (token/s).", func(l *loadSnap) float64 { return l.genTput })
	g("sglang:num_queue_reqs", "The number of requests in the waiting queue.", func(l *loadSnap) float64 { return float64(l.waiting) })
	g("sglang:cache_hit_rate", "The prefix cache hit rate.", func(l *loadSnap) float64 { return l.hitRate })
	g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", func(l *loadSnap) float64 { return float64(l.capacity) })
	g("sglang:utilization", "The utilization.", func(l *loadSnap) float64 { return l.util })
	g("sglang:num_prefill_prealloc_queue_reqs", "The number of requests in the prefill prealloc queue.", func(l *loadSnap) float64 { return float64(l.prefillPrealloc) })
	g("sglang:num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue.", func(l *loadSnap) float64 { return float64(l.prefillInflight) })
	g("sglang:num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue.", func(l *loadSnap) float64 { return float64(l.decodePrealloc) })
	g("sglang:num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue.", func(l *loadSnap) float64 { return float64(l.decodeTransfer) })
	g("sglang:kv_transfer_speed_gb_s", "The transfer speed of the KV cache in GB/s.", func(l *loadSnap) float64 { return l.kv.speedGBs() })
	g("sglang:kv_transfer_latency_ms", "The transfer latency of the KV cache in ms.", func(l *loadSnap) float64 { return l.kv.lastLatency * 1e3 })
	g("sglang:kv_transfer_total_mb", "The total number of tokens transferred in the KV cache.", func(l *loadSnap) float64 { return float64(l.kv.lastBytes) / 1e6 })
	m.reg.MustRegister(m)
	return m
}

// Describe and Collect make the snapshot gauges and the ITL histogram a
// prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range m.gauges {
		ch <- g.desc
	}
	ch <- m.itlDesc
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	n, sum, buckets := m.itl.read()
	ch <- prometheus.MustNewConstHistogram(m.itlDesc, n, sum, buckets)
	l, ok := m.s.takeSnapshot()
	if !ok {
		return
	}
	for _, g := range m.gauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.get(&l))
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) firstToken(ttft float64) { m.ttft.Observe(ttft) }
func (m *metrics) aborted()                { m.abortedN.Inc() }
func (m *metrics) bootstrapFailed()        { m.bootFail.Inc() }
func (m *metrics) transferFailed()         { m.xferFail.Inc() }
func (m *metrics) sessionEvicted(int)      { m.evictions.Inc() }

// finished records a completed request; decodeS is the time from its first
// token to its last, spread evenly over its gaps (SGLang likewise observes
// an interval divided by the tokens it produced).
func (m *metrics) finished(prompt, gen, cached int, e2e, decodeS, queue float64) {
	m.requests.Inc()
	m.prompt.Add(float64(prompt))
	m.generation.Add(float64(gen))
	if cached > 0 {
		m.cached.Add(float64(cached))
	}
	m.e2e.Observe(e2e)
	m.queue.Observe(queue)
	if gen > 1 {
		m.itl.addN(decodeS/float64(gen-1), uint64(gen-1), decodeS)
	}
}

// countHist is a histogram that takes many equal observations at once.
type countHist struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64
	n      uint64
	sum    float64
}

func newCountHist(b []float64) *countHist {
	return &countHist{bounds: b, counts: make([]uint64, len(b))}
}

func (h *countHist) addN(v float64, n uint64, sum float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n += n
	h.sum += sum
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i] += n
			return
		}
	}
}

// read is the count, sum and cumulative bucket counts.
func (h *countHist) read() (uint64, float64, map[float64]uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[float64]uint64, len(h.bounds))
	var c uint64
	for i, b := range h.bounds {
		c += h.counts[i]
		out[b] = c
	}
	return h.n, h.sum, out
}
