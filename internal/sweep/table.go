package sweep

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Row is one cell of sweep.csv and sweep.json: the cell's values and the
// headline figures of its summary.json, latencies in milliseconds.
type Row struct {
	Cell       string            `json:"cell"` // its folder under the sweep's --out
	Mechanism  string            `json:"mechanism"`
	Policy     string            `json:"policy"`
	Workload   string            `json:"workload"`
	Topology   string            `json:"topology"`
	GPUs       int               `json:"gpus"`
	Knobs      map[string]string `json:"knobs"` // only the knobs that apply to the cell
	Complete   bool              `json:"complete"`
	StopReason string            `json:"stop_reason,omitempty"`
	Requests   int               `json:"requests"`
	Completed  int               `json:"completed"`
	Failures   int               `json:"failures"`           // failed, timed out or aborted
	Warnings   []string          `json:"warnings,omitempty"` // what the run warned of (an overload building up)

	TTFTMeanMs float64 `json:"ttft_mean_ms"`
	TTFTP50Ms  float64 `json:"ttft_p50_ms"`
	TTFTP90Ms  float64 `json:"ttft_p90_ms"`
	TTFTP99Ms  float64 `json:"ttft_p99_ms"`
	E2EMeanMs  float64 `json:"e2e_mean_ms"`
	E2EP50Ms   float64 `json:"e2e_p50_ms"`
	E2EP90Ms   float64 `json:"e2e_p90_ms"`
	E2EP99Ms   float64 `json:"e2e_p99_ms"`
	TPOTP50Ms  float64 `json:"tpot_p50_ms"`
	TPOTP99Ms  float64 `json:"tpot_p99_ms"`

	DirectShare       float64 `json:"direct_share"` // completed requests appended directly on their decoder
	CacheHitRatio     float64 `json:"cache_hit_ratio"`
	RequestThroughput float64 `json:"request_throughput"` // completed requests / s
	OutputThroughput  float64 `json:"output_throughput"`  // output tokens / s
	Goodput           float64 `json:"goodput"`            // requests / s within the SLO
	// SLOAttainment is the share of the cell's requests that completed
	// within every SLO bound (vLLM's --goodput judgement): good requests
	// over all requests, failures counted as missed.
	SLOAttainment float64 `json:"slo_attainment"`

	// Pareto: on the front of TTFT p50 against p99 among the cells of its
	// workload and GPU count (Front says which cells compete).
	Pareto bool `json:"pareto"`
}

// NewRow is cell c's row from its summary.
func NewRow(c Cell, s *metrics.Summary) Row {
	r := Row{Cell: c.Name(), Mechanism: c.Mechanism, Policy: s.Policy, Workload: c.Workload.Name,
		Topology: c.Topology.String(), GPUs: c.Topology.GPUs(), Knobs: map[string]string{},
		Complete: s.Complete, StopReason: s.StopReason, Requests: s.Requests, Completed: s.Completed, Failures: s.Errors, Warnings: s.Warnings,
		TTFTMeanMs: s.MeanTTFTMs, TTFTP50Ms: s.P50TTFTMs, TTFTP90Ms: s.P90TTFTMs, TTFTP99Ms: s.P99TTFTMs,
		E2EMeanMs: s.MeanE2ELMs, E2EP50Ms: s.P50E2ELMs, E2EP90Ms: s.P90E2ELMs, E2EP99Ms: s.P99E2ELMs,
		TPOTP50Ms: s.P50TPOTMs, TPOTP99Ms: s.P99TPOTMs,
		DirectShare: s.DirectToDShare, CacheHitRatio: s.CacheHitRatio,
		RequestThroughput: s.RequestThroughput, OutputThroughput: s.OutputThroughput, Goodput: s.RequestGoodput}
	if s.Requests > 0 {
		r.SLOAttainment = float64(s.GoodRequests) / float64(s.Requests)
	}
	for _, k := range c.Knobs {
		r.Knobs[k.Name] = k.Value
	}
	return r
}

// group is the set of cells a row's Pareto front is drawn within: one
// workload on one number of GPUs (a PD and a colocated cell of 4 GPUs
// compete; cells of different workloads or cluster sizes do not).
func (r Row) group() string { return r.Workload + "\x00" + strconv.Itoa(r.GPUs) }

// MarkFront sets Pareto on the rows no other row of their group beats on
// both TTFT p50 and p99 (lower is better; ties keep both). Only rows that
// finished their workload with the group's fewest failures compete
// (Competes), so a cell does not win by failing its slow requests.
func MarkFront(rows []Row) {
	in := Competes(rows)
	for i := range rows {
		rows[i].Pareto = false
		if !in[i] {
			continue
		}
		front := true
		for j, o := range rows {
			if j == i || !in[j] || o.group() != rows[i].group() {
				continue
			}
			if dominates(o, rows[i]) {
				front = false
				break
			}
		}
		rows[i].Pareto = front
	}
}

// dominates reports whether b beats a: no worse on TTFT p50 and p99 and
// better on one.
func dominates(b, a Row) bool {
	return b.TTFTP50Ms <= a.TTFTP50Ms && b.TTFTP99Ms <= a.TTFTP99Ms && (b.TTFTP50Ms < a.TTFTP50Ms || b.TTFTP99Ms < a.TTFTP99Ms)
}

// Competes says, per row, whether it competes for its group's front: it
// finished its workload, completed requests, and failed no more than the
// group's best such row.
func Competes(rows []Row) []bool {
	fewest := map[string]int{}
	for _, r := range rows {
		if f, ok := fewest[r.group()]; r.Complete && r.Completed > 0 && (!ok || r.Failures < f) {
			fewest[r.group()] = r.Failures
		}
	}
	out := make([]bool, len(rows))
	for i, r := range rows {
		f, ok := fewest[r.group()]
		out[i] = ok && r.Complete && r.Completed > 0 && r.Failures == f
	}
	return out
}

// KnobNames are the knobs any row has, sorted.
func KnobNames(rows []Row) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		for k := range r.Knobs {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// metricCols are the figures of a row after its cell columns, as CSV
// headers with their values.
var metricCols = []struct {
	name string
	get  func(Row) float64
}{
	{"requests", func(r Row) float64 { return float64(r.Requests) }},
	{"completed", func(r Row) float64 { return float64(r.Completed) }},
	{"failures", func(r Row) float64 { return float64(r.Failures) }},
	{"ttft_mean_ms", func(r Row) float64 { return r.TTFTMeanMs }},
	{"ttft_p50_ms", func(r Row) float64 { return r.TTFTP50Ms }},
	{"ttft_p90_ms", func(r Row) float64 { return r.TTFTP90Ms }},
	{"ttft_p99_ms", func(r Row) float64 { return r.TTFTP99Ms }},
	{"e2e_mean_ms", func(r Row) float64 { return r.E2EMeanMs }},
	{"e2e_p50_ms", func(r Row) float64 { return r.E2EP50Ms }},
	{"e2e_p90_ms", func(r Row) float64 { return r.E2EP90Ms }},
	{"e2e_p99_ms", func(r Row) float64 { return r.E2EP99Ms }},
	{"tpot_p50_ms", func(r Row) float64 { return r.TPOTP50Ms }},
	{"tpot_p99_ms", func(r Row) float64 { return r.TPOTP99Ms }},
	{"direct_share", func(r Row) float64 { return r.DirectShare }},
	{"cache_hit_ratio", func(r Row) float64 { return r.CacheHitRatio }},
	{"request_throughput", func(r Row) float64 { return r.RequestThroughput }},
	{"output_throughput", func(r Row) float64 { return r.OutputThroughput }},
	{"goodput", func(r Row) float64 { return r.Goodput }},
	{"slo_attainment", func(r Row) float64 { return r.SLOAttainment }},
}

// WriteCSV writes one header line and one line per row. A knob that does
// not apply to a row's cell is an empty field; numbers are written in full
// (Go's shortest exact form), so they read back equal to summary.json's.
func WriteCSV(w io.Writer, rows []Row) error {
	var knobs []string
	for _, k := range KnobNames(rows) {
		if k != "policy" { // the policy column already holds each cell's policy
			knobs = append(knobs, k)
		}
	}
	cw := csv.NewWriter(w)
	head := []string{"cell", "mechanism", "policy", "workload", "topology", "gpus"}
	head = append(head, knobs...)
	head = append(head, "complete", "stop_reason")
	for _, m := range metricCols {
		head = append(head, m.name)
	}
	head = append(head, "pareto")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range rows {
		rec := []string{r.Cell, r.Mechanism, r.Policy, r.Workload, r.Topology, strconv.Itoa(r.GPUs)}
		for _, k := range knobs {
			rec = append(rec, r.Knobs[k])
		}
		rec = append(rec, strconv.FormatBool(r.Complete), r.StopReason)
		for _, m := range metricCols {
			rec = append(rec, num(m.get(r)))
		}
		rec = append(rec, strconv.FormatBool(r.Pareto))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Table is sweep.json: the grid and one row per cell.
type Table struct {
	Grid Grid  `json:"grid"`
	Rows []Row `json:"rows"`
	// Floors is each workload's latency floor (pdhybrid floor): what no
	// cell of it can be below.
	Floors []Floor `json:"floors,omitempty"`
	// Failed are the cells that did not finish (an error or an
	// interruption), by folder name, with why.
	Failed map[string]string `json:"failed,omitempty"`
}

// Floor is a workload's latency floor in milliseconds: every request
// alone on an idle GPU with an ideal prefix cache (internal/sim/floor.go).
type Floor struct {
	Workload string  `json:"workload"`
	TTFTMean float64 `json:"ttft_mean_ms"`
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP90  float64 `json:"ttft_p90_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	E2EMean  float64 `json:"e2e_mean_ms"`
	E2EP50   float64 `json:"e2e_p50_ms"`
	E2EP90   float64 `json:"e2e_p90_ms"`
	E2EP99   float64 `json:"e2e_p99_ms"`
	Requests int     `json:"requests"`
	Uncached float64 `json:"uncached_share"`
}

// WriteJSON writes t indented.
func WriteJSON(w io.Writer, t Table) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
