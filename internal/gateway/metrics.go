package gateway

// Prometheus metrics at GET /metrics, named pdhybrid_* (docs/metrics.md
// lists them). Each Server has its own registry — tests start many
// gateways in one process, and the default registry would mix them. The
// request metrics come from a recorder wrapped round the writer the final
// attempt answers through; the per-worker gauges are read at scrape time
// from the gateway's own state (in flight, sessions, breakers, drain) and
// from the workers' last /v1/loads reports (loads.go). Where both exist
// (requests on a worker, sessions on a decoder) both are exposed, under
// different names, and each help string says which is which.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Buckets in seconds for LLM serving: TTFT from a cached short prompt
// (~10 ms) to a long queued prefill (minutes); TPOT from 1 ms (a light
// MoE decode batch) to 1 s (a stalled one); e2e up to an hour.
var (
	ttftBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600}
	tpotBuckets = []float64{0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1}
	e2eBuckets  = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600, 1200, 1800, 3600}
)

// Request outcomes, abort reasons and limit rejections (label values).
const (
	outcomeOK          = "ok"                // 200 and a finished answer
	outcomeWorkerError = "worker_error"      // a worker's error status, abort or cut-short answer
	outcomeUnavailable = "unavailable"       // the gateway answered itself: no worker could take it
	outcomeDisconnect  = "client_disconnect" // the client left before the answer finished

	abortOtherLeg   = "other_leg"         // one PD leg failed: the other is aborted
	abortRetry      = "retry"             // the decode leg answered retryably: P aborted before the retry
	abortDisconnect = "client_disconnect" // the client left mid-answer: P aborted

	modeNone = "none" // no execution mode was decided
)

type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	ttft, tpot *prometheus.HistogramVec
	e2e        *prometheus.HistogramVec
	admissions *prometheus.CounterVec
	retries    *prometheus.CounterVec // by worker
	aborts     *prometheus.CounterVec // by reason and worker
	dpSync     *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	// Last reported by the workers (loads.go).
	running, waiting, kvUsed *prometheus.GaugeVec
	kvUsage, sessions, up    *prometheus.GaugeVec
	pollErrors               *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	// The Go runtime's and the process's own series (go_*, process_*):
	// memory, goroutines, GC, CPU, file descriptors.
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		f(v)
		return v
	}
	hv := func(name, help string, b []float64) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}, []string{"mode"})
		f(v)
		return v
	}
	gv := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"role", "worker"})
		f(v)
		return v
	}
	m.requests = cv("pdhybrid_requests_total", "Requests the gateway dispatched, by mechanism, execution mode and outcome (ok, worker_error, unavailable, client_disconnect).", "mechanism", "mode", "outcome")
	m.ttft = hv("pdhybrid_time_to_first_token_seconds", "Time from the parsed request to the first token event relayed, for completed streamed requests, by execution mode.", ttftBuckets)
	m.tpot = hv("pdhybrid_time_per_output_token_seconds", "Mean time between output tokens after the first, (e2e - ttft) / (tokens - 1), for completed streamed requests of two or more tokens, by execution mode.", tpotBuckets)
	m.e2e = hv("pdhybrid_e2e_request_latency_seconds", "Time from the parsed request to the end of its answer, for completed requests, by execution mode.", e2eBuckets)
	m.admissions = cv("pdhybrid_admissions_total", "Decoder admission replies (/session_cache/admit_direct_append), by result (direct, seed, rejected) and the decoder's structured reason.", "result", "reason")
	m.retries = cv("pdhybrid_retries_total", "Requests dispatched again after a worker answered 408, 429 or 5xx (or could not be reached) before anything reached the client, by the worker whose failure caused the retry.", "worker")
	m.aborts = cv("pdhybrid_aborts_total", "Explicit /abort_request calls, by reason (other_leg, retry, client_disconnect) and the worker the abort was sent to.", "reason", "worker")
	m.dpSync = cv("pdhybrid_dp_syncs_total", "D-to-P session KV snapshot syncs (serve --d-to-p-sync), by outcome as the simulator's d_to_p_sync counts them: ok: finalize, or <skipped|failed>: <entry|prepare|dump|finalize>: <reason>.", "outcome")
	m.rejected = cv("pdhybrid_rejected_requests_total", "Requests refused before dispatch, by reason (body_too_large, client_concurrency, bytes_in_flight, client_bytes_in_flight, body_timeout, header_too_large).", "reason")
	m.running = gv("pdhybrid_worker_running_requests", "Running requests the worker last reported (/v1/loads num_running_reqs, summed over DP ranks); the gateway's own count is pdhybrid_worker_inflight_requests.")
	m.waiting = gv("pdhybrid_worker_waiting_requests", "Waiting requests the worker last reported (/v1/loads num_waiting_reqs, summed over DP ranks); the gateway's own count is pdhybrid_worker_inflight_requests.")
	m.sessions = gv("pdhybrid_worker_reported_sessions", "Sessions the decoder last reported resident (/v1/loads num_resident_sessions, an extension of the emulated KVC decoder, summed over DP ranks); absent for a worker that does not report it. The gateway's own belief is pdhybrid_worker_sessions.")
	m.kvUsed = gv("pdhybrid_worker_kv_used_tokens", "KV cache tokens in use the worker last reported (/v1/loads num_used_tokens).")
	m.kvUsage = gv("pdhybrid_worker_kv_usage_ratio", "KV cache usage the worker last reported (/v1/loads token_usage, 0 to 1, mean over DP ranks).")
	m.up = gv("pdhybrid_worker_up", "1 if the worker's last load poll succeeded, else 0.")
	m.pollErrors = cv("pdhybrid_worker_load_poll_errors_total", "Load polls of a worker that failed.", "role", "worker")
	for _, o := range []string{"ok: finalize"} {
		m.dpSync.WithLabelValues(o)
	}
	for _, w := range s.workers {
		m.workerSeries(w.URL)
	}
	for _, r := range []string{rejectBody, rejectClient, rejectBytes, rejectClientBytes, rejectSlowBody, rejectHeader} {
		m.rejected.WithLabelValues(r)
	}
	f(&gatewayState{s: s})
	f(capsCollector{s})
	return m
}

// workerSeries registers a pool member's retry and abort series at 0, so
// they exist before its first failure. Their worker label is one of the
// configured pool's URLs, which bounds it; a worker removed through the
// admin API loses them (dropWorkerSeries).
func (m *metrics) workerSeries(url string) {
	m.retries.WithLabelValues(url)
	for _, r := range []string{abortOtherLeg, abortRetry, abortDisconnect} {
		m.aborts.WithLabelValues(r, url)
	}
}

// dropWorkerSeries forgets a removed worker's retry and abort series.
func (m *metrics) dropWorkerSeries(url string) {
	m.retries.DeleteLabelValues(url)
	m.aborts.DeletePartialMatch(prometheus.Labels{"worker": url})
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// reasonLabel keeps a worker's reason a bounded label: its head before any
// ": detail", and only a plain token (else "other").
func reasonLabel(r string) string {
	r, _, _ = strings.Cut(r, ":")
	if r == "" {
		return "none"
	}
	if !plainReason(r) {
		return "other"
	}
	return r
}

// plainReason is whether r matches ^[a-z0-9_-]{1,64}$. Not a regexp: the
// bounded repeat compiles to 64 copies of the class, and compiling it at
// package init was a third of every pdhybrid process's start-up
// instructions, gateway or not (TestPlainReasonIsTheRegexp).
func plainReason(r string) bool {
	if len(r) == 0 || len(r) > 64 {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (m *metrics) admitted(rep kvc.AdmitReply) {
	result := "rejected"
	if rep.CanAdmit && rep.Direct {
		result = "direct"
	} else if rep.CanAdmit {
		result = "seed"
	}
	m.admissions.WithLabelValues(result, reasonLabel(rep.Reason)).Inc()
}

// abortWhy names why a PD request's prefill leg is aborted after its
// decode leg's answer did not complete.
func abortWhy(ctx context.Context) string {
	if ctx.Err() != nil {
		return abortDisconnect
	}
	return abortOtherLeg
}

// gatewayState is the per-worker gauges read from the gateway's own state
// at scrape time: requests in flight, sessions bound, breaker and drain.
type gatewayState struct{ s *Server }

var (
	descInflight = prometheus.NewDesc("pdhybrid_worker_inflight_requests", "Requests the gateway has dispatched to the worker and not seen end: the gateway's own count, not the worker's report (pdhybrid_worker_running_requests and pdhybrid_worker_waiting_requests).", []string{"role", "worker"}, nil)
	descSessions = prometheus.NewDesc("pdhybrid_worker_sessions", "Sessions the gateway believes bound to the decoder (its routing pin): the gateway's own belief, not the decoder's report (pdhybrid_worker_reported_sessions).", []string{"role", "worker"}, nil)
	descBreaker  = prometheus.NewDesc("pdhybrid_worker_breaker_open", "1 while the decoder's transfer circuit breaker holds seeds and plain PD back, else 0.", []string{"role", "worker"}, nil)
	descDraining = prometheus.NewDesc("pdhybrid_worker_draining", "1 while the worker is drained (no new requests), else 0.", []string{"role", "worker"}, nil)
	descKnown    = prometheus.NewDesc("pdhybrid_sessions", "Sessions the gateway has seen.", nil, nil)
)

func (g *gatewayState) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInflight, descSessions, descBreaker, descDraining, descKnown} {
		ch <- d
	}
}

func (g *gatewayState) Collect(ch chan<- prometheus.Metric) {
	s := g.s
	var out []prometheus.Metric
	s.locked(func() {
		bound := s.sessionsPerDecoder()
		now := s.now()
		for _, w := range s.workers {
			if w.removed {
				continue
			}
			r := s.router(w.Role)
			l := []string{w.Role, w.URL}
			out = append(out, prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(r.Inflight(w.idx)), l...),
				prometheus.MustNewConstMetric(descDraining, prometheus.GaugeValue, b2f(w.draining), l...))
			if w.Role != rolePrefill {
				out = append(out, prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(bound[w.idx]), l...),
					prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, b2f(s.disp.BreakerOpen(now, w.idx)), l...))
			}
		}
		out = append(out, prometheus.MustNewConstMetric(descKnown, prometheus.GaugeValue, float64(len(s.turns))))
	})
	for _, m := range out {
		ch <- m
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// recorder watches the final attempt's answer on its way to the client:
// its status and mode, when its first token event passed, and its last
// event (or whole answer), which says how it finished and how many tokens
// it carried.
type recorder struct {
	http.ResponseWriter
	s      *Server
	q      *request
	start  time.Time
	first  time.Time // the first data event
	status int
	mode   string
	last   []byte // the last data event, or the whole JSON answer
	// completed's answer for last, once parsed: the active D→P trigger and
	// end both ask it
	parsed     bool
	completion int
	done       bool
	ctx        context.Context // the request's (serveRequest's)
	cancel     func()          // ends it (the direct relay's client leaving)
}

func (s *Server) record(w http.ResponseWriter, q *request) *recorder {
	return &recorder{ResponseWriter: w, s: s, q: q, start: time.Now()}
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status, r.parsed = status, false
		r.mode = ""
		if v := r.Header()[hdrMode]; len(v) > 0 {
			r.mode = v[0]
		}
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	switch ev := lastDataEvent(b); {
	case ev != nil:
		if r.first.IsZero() {
			r.first = time.Now()
		}
		r.last, r.parsed = append(r.last[:0], ev...), false
	case !r.q.stream && len(r.last) == 0 && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")):
		r.last, r.parsed = append(r.last[:0], b...), false
	}
	return r.ResponseWriter.Write(b)
}

// lastDataEvent is the object of the last "data: {" line in b (a relay
// writes every complete line one read brought at once), nil if none.
func lastDataEvent(b []byte) []byte {
	for end := len(b); end > 0; {
		start := bytes.LastIndexByte(b[:end], '\n')
		if start == end-1 { // b[:end] ends in a newline: look before it
			start = bytes.LastIndexByte(b[:end-1], '\n')
		}
		line := b[start+1 : end]
		if bytes.HasPrefix(line, []byte("data: {")) {
			return line[len("data: "):]
		}
		end = start + 1
		if start < 0 {
			return nil
		}
	}
	return nil
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// completed reads the answer relayed (its last JSON object or data event):
// whether it finished (status 200, a finish reason other than abort), and
// its completion tokens.
func (r *recorder) completed() (tokens int, ok bool) {
	if !r.parsed {
		r.completion, r.done = r.parse()
		r.parsed = true
	}
	return r.completion, r.done
}

// parse reads the completion tokens of a completed answer from last.
func (r *recorder) parse() (tokens int, ok bool) {
	if r.status != http.StatusOK {
		return 0, false
	}
	if tokens, ok, sure := scanCompletion(r.last); sure {
		return tokens, ok
	}
	var ans struct {
		MetaInfo struct {
			CompletionTokens int `json:"completion_tokens"`
			FinishReason     *struct {
				Type string `json:"type"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	if r.status != http.StatusOK || json.Unmarshal(bytes.TrimSpace(r.last), &ans) != nil ||
		ans.MetaInfo.FinishReason == nil || ans.MetaInfo.FinishReason.Type == "abort" {
		return 0, false
	}
	return ans.MetaInfo.CompletionTokens, true
}

// end counts the request and, when it completed, observes its latencies.
func (r *recorder) end(ctx context.Context) {
	end := time.Now()
	mode := r.mode
	if mode == "" {
		mode = modeNone
	}
	completion, done := r.completed()
	outcome := outcomeWorkerError
	switch {
	case done:
		outcome = outcomeOK
	case ctx.Err() != nil:
		outcome = outcomeDisconnect
	case r.status != http.StatusOK && r.mode == "" && r.status != http.StatusBadGateway: // a 502 is the worker's failure
		outcome = outcomeUnavailable
	}
	m := r.s.met
	m.requests.WithLabelValues(string(r.s.cfg.Dispatch.Mechanism), mode, outcome).Inc()
	if outcome == outcomeOK {
		e2e := end.Sub(r.start).Seconds()
		m.e2e.WithLabelValues(mode).Observe(e2e)
		if r.q.stream && !r.first.IsZero() {
			ttft := r.first.Sub(r.start).Seconds()
			m.ttft.WithLabelValues(mode).Observe(ttft)
			if n := completion; n > 1 {
				m.tpot.WithLabelValues(mode).Observe((e2e - ttft) / float64(n-1))
			}
		}
	}
	if r.s.cfg.LogPrompts {
		r.s.logRequest(r.q, mode, outcome, r.status, end.Sub(r.start))
	}
	switch outcome {
	case outcomeOK:
	case outcomeDisconnect:
		r.s.log.Debug("client left", "mode", mode, "status", r.status, "seconds", end.Sub(r.start).Seconds())
	default:
		r.s.log.Warn("request failed", "mode", mode, "outcome", outcome, "status", r.status, "attempts", r.q.attempt+1,
			"cause", r.q.cause, "seconds", end.Sub(r.start).Seconds())
	}
}
