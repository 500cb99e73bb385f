package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Row is one headline metric across runs. Deltas compare every run with
// the first (the baseline): relative change for amounts, percentage points
// for shares, because "+50% of a 2% share" reads worse than "+1 pp".
type Row struct {
	Key    string    `json:"metric"` // stable machine name, e.g. ttft_p99
	Label  string    `json:"label"`  // human name, e.g. "TTFT p99"
	Unit   string    `json:"unit"`   // s, ms, req/s, tok/s, count, share
	Better string    `json:"better"` // lower | higher | "" (neither)
	Values []float64 `json:"values"`
}

// IsShare reports whether the row is a 0..1 share (shown in %, deltas in pp).
func (r Row) IsShare() bool { return r.Unit == "share" }

// Delta is run i's change against run 0: relative for amounts (0.1 = +10%),
// absolute for shares. ok is false for the baseline and when the baseline is
// zero for a relative delta.
func (r Row) Delta(i int) (d float64, ok bool) {
	if i == 0 || i >= len(r.Values) {
		return 0, false
	}
	base, v := r.Values[0], r.Values[i]
	if math.IsNaN(base) || math.IsNaN(v) {
		return 0, false
	}
	if r.IsShare() {
		return v - base, true
	}
	if base == 0 {
		return 0, false
	}
	return (v - base) / math.Abs(base), true
}

// HeadlineRows computes the headline table from summaries alone, so
// `pdhybrid bench` can pass in-memory summaries and `report --compare` can
// read summary.json without touching metrics.jsonl.
func HeadlineRows(sums []metrics.Summary) []Row {
	col := func(f func(s *metrics.Summary) float64) []float64 {
		out := make([]float64, len(sums))
		for i := range sums {
			out[i] = f(&sums[i])
		}
		return out
	}
	var rows []Row
	add := func(key, label, unit, better string, f func(s *metrics.Summary) float64) {
		rows = append(rows, Row{key, label, unit, better, col(f)})
	}
	add("requests", "requests", "count", "", func(s *metrics.Summary) float64 { return float64(s.Requests) })
	add("completed", "completed", "count", "higher", func(s *metrics.Summary) float64 { return float64(s.Completed) })
	add("failures", "failures (all causes)", "count", "lower", func(s *metrics.Summary) float64 { return float64(s.Errors) })
	stats := func(key, label, unit string, scale float64, st func(s *metrics.Summary) metrics.Stats) {
		fig := func(f func(metrics.Stats) float64) func(s *metrics.Summary) float64 {
			return func(s *metrics.Summary) float64 {
				if x := st(s); x.Count == 0 && x == (metrics.Stats{}) {
					return none // no sample (summary.json's nulls read back as zeros)
				}
				return f(st(s)) * scale
			}
		}
		add(key+"_mean", label+" mean", unit, "lower", fig(func(x metrics.Stats) float64 { return x.Mean }))
		add(key+"_p50", label+" p50", unit, "lower", fig(func(x metrics.Stats) float64 { return x.P50 }))
		add(key+"_p90", label+" p90", unit, "lower", fig(func(x metrics.Stats) float64 { return x.P90 }))
		add(key+"_p99", label+" p99", unit, "lower", fig(func(x metrics.Stats) float64 { return x.P99 }))
	}
	stats("ttft", "TTFT", "s", 1, func(s *metrics.Summary) metrics.Stats { return s.TTFTStats })
	stats("tpot", "TPOT", "ms", 1e3, func(s *metrics.Summary) metrics.Stats { return s.TPOTStats })
	stats("e2el", "E2E latency", "s", 1, func(s *metrics.Summary) metrics.Stats { return s.LatencyStats })
	add("request_throughput", "request throughput", "req/s", "higher", func(s *metrics.Summary) float64 { return s.RequestThroughput })
	add("output_throughput", "output throughput", "tok/s", "higher", func(s *metrics.Summary) float64 { return s.OutputThroughput })
	add("request_goodput", "goodput (within SLO)", "req/s", "higher", func(s *metrics.Summary) float64 { return s.RequestGoodput })
	add("cache_hit_ratio", "cache hit share (tokens)", "share", "higher", func(s *metrics.Summary) float64 {
		if s.Completed == 0 {
			return none
		}
		return s.CacheHitRatio
	})
	add("cache_hit_requests", "cache hit share (requests)", "share", "higher", func(s *metrics.Summary) float64 {
		if s.Completed == 0 {
			return none
		}
		return float64(s.CacheHitRequests) / float64(s.Completed)
	})
	add("direct_to_d_share", "direct-to-D share", "share", "", func(s *metrics.Summary) float64 {
		if s.Completed == 0 {
			return none
		}
		return s.DirectToDShare
	})
	add("duration", "duration", "s", "", func(s *metrics.Summary) float64 { return s.DurationS })
	return rows
}

// none is a headline value over no request (a latency when none
// completed): shown as "—", written as null or an empty CSV cell, never 0.
var none = math.NaN()

// CountRow is a count per run (failure causes, execution modes).
type CountRow struct {
	Name   string `json:"name"`
	Counts []int  `json:"counts"`
}

// countRows unions a per-run map over runs, largest total first.
func countRows(sums []metrics.Summary, m func(s *metrics.Summary) map[string]int) []CountRow {
	idx := map[string]int{}
	var rows []CountRow
	for i := range sums {
		for k, v := range m(&sums[i]) {
			j, ok := idx[k]
			if !ok {
				j = len(rows)
				idx[k] = j
				rows = append(rows, CountRow{Name: k, Counts: make([]int, len(sums))})
			}
			rows[j].Counts[i] += v
		}
	}
	total := func(r CountRow) (t int) {
		for _, c := range r.Counts {
			t += c
		}
		return t
	}
	sort.Slice(rows, func(i, j int) bool {
		if ti, tj := total(rows[i]), total(rows[j]); ti != tj {
			return ti > tj
		}
		return rows[i].Name < rows[j].Name
	})
	return rows
}

// FailureRows are failures by cause ("status: error"), per run.
func FailureRows(sums []metrics.Summary) []CountRow {
	return countRows(sums, func(s *metrics.Summary) map[string]int { return s.FailureCauses })
}

// ModeRows are requests by execution mode, per run.
func ModeRows(sums []metrics.Summary) []CountRow {
	return countRows(sums, func(s *metrics.Summary) map[string]int { return s.ExecutionModes })
}

// WriteTable writes the headline, failure-cause and execution-mode tables
// for runs named names (same order as sums; the first is the baseline) in
// format text (aligned columns), csv (one tidy row per metric and run) or
// json (one object).
func WriteTable(w io.Writer, format string, names []string, sums []metrics.Summary) error {
	if len(names) != len(sums) {
		return fmt.Errorf("report: %d names for %d summaries", len(names), len(sums))
	}
	if len(sums) == 0 {
		return fmt.Errorf("report: no runs to tabulate")
	}
	head, fails, modes := HeadlineRows(sums), FailureRows(sums), ModeRows(sums)
	stops := make([]string, len(sums)) // "" for a complete run
	for i := range sums {
		stops[i] = sums[i].StopReason
	}
	switch format {
	case "text", "":
		return writeText(w, names, stops, head, fails, modes)
	case "csv":
		return writeCSV(w, names, stops, head, fails, modes)
	case "json":
		return writeJSON(w, names, stops, head, fails, modes)
	}
	return fmt.Errorf("report: unknown table format %q (want text, csv or json)", format)
}

// FormatValue renders a headline value for people: shares in %, counts as
// integers, everything else with four significant digits.
func FormatValue(r Row, v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case r.IsShare():
		return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
	case r.Unit == "count":
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return formatNum(v)
}

// FormatDelta renders run i's delta against the baseline, or "" for none.
func FormatDelta(r Row, i int) string {
	d, ok := r.Delta(i)
	switch {
	case !ok:
		return ""
	case r.IsShare():
		return fmt.Sprintf("%+.1fpp", d*100)
	}
	return fmt.Sprintf("%+.1f%%", d*100)
}

// formatNum prints about four significant digits without exponents for
// the magnitudes runs produce.
func formatNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.001:
		return strconv.FormatFloat(v, 'f', 3+int(math.Max(0, -math.Floor(math.Log10(a)))), 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func writeText(w io.Writer, names, stops []string, head []Row, fails, modes []CountRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := []string{"metric", "unit"}
	for i, n := range names {
		hdr = append(hdr, n)
		if i > 0 {
			hdr = append(hdr, "Δ vs "+names[0])
		}
	}
	line := func(cells []string) {
		// Left-align the first two columns by padding them ourselves;
		// tabwriter right-aligns every cell.
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	fmt.Fprintf(w, "baseline: %s\n", names[0])
	for i, r := range stops {
		if r != "" {
			fmt.Fprintf(w, "INCOMPLETE: %s stopped early (%s): its figures cover only the requests that ended before the stop\n", names[i], r)
		}
	}
	fmt.Fprintln(w)
	line(padLeft(hdr, head))
	for _, r := range head {
		cells := []string{r.Label, r.Unit}
		for i, v := range r.Values {
			cells = append(cells, FormatValue(r, v))
			if i > 0 {
				cells = append(cells, orDash(FormatDelta(r, i)))
			}
		}
		line(padLeft(cells, head))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range []struct {
		title string
		rows  []CountRow
	}{{"failures by cause", fails}, {"requests by execution mode", modes}} {
		fmt.Fprintf(w, "\n%s\n", t.title)
		if len(t.rows) == 0 {
			fmt.Fprintln(w, "  (none)")
			continue
		}
		width := 0
		for _, r := range t.rows {
			width = max(width, len(r.Name))
		}
		cells := append([]string{fmt.Sprintf("%-*s", width, "")}, names...)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		for _, r := range t.rows {
			cells := []string{fmt.Sprintf("%-*s", width, r.Name)}
			for _, c := range r.Counts {
				cells = append(cells, strconv.Itoa(c))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// padLeft left-aligns the label and unit columns under a right-aligning
// tabwriter by padding them to the widest entry.
func padLeft(cells []string, rows []Row) []string {
	wl, wu := len("metric"), len("unit")
	for _, r := range rows {
		wl, wu = max(wl, len(r.Label)), max(wu, len(r.Unit))
	}
	out := append([]string(nil), cells...)
	out[0] = fmt.Sprintf("%-*s", wl, out[0])
	out[1] = fmt.Sprintf("%-*s", wu, out[1])
	return out
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func writeCSV(w io.Writer, names, stops []string, head []Row, fails, modes []CountRow) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"table", "metric", "unit", "run", "value", "delta", "delta_unit"})
	for i, r := range stops {
		cw.Write([]string{"run", "complete", "bool", names[i], strconv.FormatBool(r == ""), "", ""})
		if r != "" {
			cw.Write([]string{"run", "stop_reason", "text", names[i], r, "", ""})
		}
	}
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, r := range head {
		du := "relative"
		if r.IsShare() {
			du = "absolute"
		}
		for i, v := range r.Values {
			d, ok := r.Delta(i)
			ds := ""
			if ok {
				ds = num(d)
			}
			cw.Write([]string{"headline", r.Key, r.Unit, names[i], num(v), ds, du})
		}
	}
	for _, t := range []struct {
		name string
		rows []CountRow
	}{{"failure_cause", fails}, {"execution_mode", modes}} {
		for _, r := range t.rows {
			for i, c := range r.Counts {
				cw.Write([]string{t.name, r.Name, "count", names[i], strconv.Itoa(c), "", ""})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonRow adds deltas (null where undefined) to a Row for scripts.
type jsonRow struct {
	Row
	Values    []*float64 `json:"values"` // null: no value (no request completed)
	Deltas    []*float64 `json:"deltas"`
	DeltaUnit string     `json:"delta_unit"` // relative (0.1 = +10%) | absolute
}

func writeJSON(w io.Writer, names, stops []string, head []Row, fails, modes []CountRow) error {
	out := struct {
		Runs           []string   `json:"runs"`
		Baseline       string     `json:"baseline"`
		Complete       []bool     `json:"complete"`     // per run: replayed its whole workload
		StopReasons    []string   `json:"stop_reasons"` // per run: why it stopped early, "" if complete
		Headline       []jsonRow  `json:"headline"`
		FailureCauses  []CountRow `json:"failure_causes"`
		ExecutionModes []CountRow `json:"execution_modes"`
	}{Runs: names, Baseline: names[0], StopReasons: stops, FailureCauses: fails, ExecutionModes: modes}
	for _, r := range stops {
		out.Complete = append(out.Complete, r == "")
	}
	if out.FailureCauses == nil {
		out.FailureCauses = []CountRow{}
	}
	if out.ExecutionModes == nil {
		out.ExecutionModes = []CountRow{}
	}
	for _, r := range head {
		j := jsonRow{Row: r, DeltaUnit: "relative"}
		if r.IsShare() {
			j.DeltaUnit = "absolute"
		}
		for i, v := range r.Values {
			if math.IsNaN(v) {
				j.Values = append(j.Values, nil)
			} else {
				j.Values = append(j.Values, &v)
			}
			if d, ok := r.Delta(i); ok {
				j.Deltas = append(j.Deltas, &d)
			} else {
				j.Deltas = append(j.Deltas, nil)
			}
		}
		out.Headline = append(out.Headline, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
