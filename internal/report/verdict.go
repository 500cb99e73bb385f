package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// The verdict is what a reader wants in five seconds: for each statistic
// that decides a serving comparison, which run is best and how far every
// other is from it, then for each KVC run how it does against the best of
// the others. The headline table's deltas compare with the first run
// (naive PD in bench), which is rarely the run to beat.

// verdictStats are the statistics the verdict ranks, in the order shown.
var verdictStats = []string{"ttft_p50", "ttft_p90", "ttft_p99", "e2el_p50", "e2el_p90", "e2el_p99", "tpot_p99", "request_goodput", "failures"}

// VerdictStat is one statistic's ranking: the best run and every other's
// ratio to it (value / best: above 1 is worse for a latency or failures,
// below 1 worse for goodput).
type VerdictStat struct {
	Key    string         `json:"metric"`
	Label  string         `json:"label"`
	Best   string         `json:"best"`       // run name; "" when no run has a value
	Value  string         `json:"best_value"` // the best value with its unit
	Others []VerdictOther `json:"others"`
}

// VerdictOther is a run's place on one statistic against the best.
type VerdictOther struct {
	Run   string `json:"run"`
	Ratio string `json:"ratio"` // "1.8×", "same", "12 vs 0", "—" (no value)
}

// VerdictKVC compares one KVC run with the run that is best most often
// among the others, statistic by statistic.
type VerdictKVC struct {
	Run   string   `json:"run"`
	Other string   `json:"vs"`
	Parts []string `json:"parts"` // "TTFT p99 0.85× (better)"
	Word  string   `json:"verdict"`
}

// Verdict is the verdict block's content.
type Verdict struct {
	Stats []VerdictStat `json:"stats"`
	KVC   []VerdictKVC  `json:"kvc"`
}

// verdictRows are the headline rows the verdict ranks, with short labels.
func verdictRows(sums []metrics.Summary) []Row {
	byKey := map[string]Row{}
	for _, r := range HeadlineRows(sums) {
		byKey[r.Key] = r
	}
	rows := make([]Row, 0, len(verdictStats))
	for _, k := range verdictStats {
		r := byKey[k]
		if k == "e2el_p50" || k == "e2el_p90" || k == "e2el_p99" {
			r.Label = strings.Replace(r.Label, "E2E latency", "e2e", 1)
		}
		if k == "request_goodput" {
			r.Label = "goodput"
		}
		if k == "failures" {
			r.Label = "failures"
		}
		rows = append(rows, r)
	}
	return rows
}

// best is the index of the best value among idx (-1 when none has one).
func best(r Row, idx []int) int {
	b := -1
	for _, i := range idx {
		v := r.Values[i]
		if math.IsNaN(v) {
			continue
		}
		if b < 0 || (r.Better == "higher" && v > r.Values[b]) || (r.Better != "higher" && v < r.Values[b]) {
			b = i
		}
	}
	return b
}

// ratio is v against ref: "1.8×", "same", or for counts against zero
// "12 vs 0".
func ratio(r Row, v, ref float64) string {
	switch {
	case math.IsNaN(v) || math.IsNaN(ref):
		return "—"
	case v == ref:
		return "same"
	case ref == 0:
		return FormatValue(r, v) + " vs " + FormatValue(r, ref)
	}
	x := v / ref
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2g×", x)
}

// withUnit is a value and its unit as the verdict shows it.
func withUnit(r Row, v float64) string {
	s := FormatValue(r, v)
	if r.Unit == "count" || s == "—" {
		return s
	}
	return s + " " + r.Unit
}

// BuildVerdict ranks the runs named names (summaries sums, same order).
// Runs whose mechanism is kvcache-centric are each compared with the
// other run that is best on the most statistics.
func BuildVerdict(names []string, sums []metrics.Summary) Verdict {
	var v Verdict
	rows := verdictRows(sums)
	all := make([]int, len(sums))
	var kvcRuns, others []int
	for i := range sums {
		all[i] = i
		if sums[i].Mechanism == "kvcache-centric" {
			kvcRuns = append(kvcRuns, i)
		} else {
			others = append(others, i)
		}
	}
	wins := make([]int, len(sums)) // among the others: how often each is best
	for _, r := range rows {
		vs := VerdictStat{Key: r.Key, Label: r.Label}
		b := best(r, all)
		if b >= 0 {
			vs.Best, vs.Value = names[b], withUnit(r, r.Values[b])
		}
		for i := range sums {
			if i == b {
				continue
			}
			ref := math.NaN()
			if b >= 0 {
				ref = r.Values[b]
			}
			vs.Others = append(vs.Others, VerdictOther{names[i], ratio(r, r.Values[i], ref)})
		}
		v.Stats = append(v.Stats, vs)
		if o := best(r, others); o >= 0 {
			wins[o]++
		}
	}
	if len(others) == 0 {
		return v
	}
	ref := others[0]
	for _, i := range others {
		if wins[i] > wins[ref] {
			ref = i
		}
	}
	for _, k := range kvcRuns {
		vk := VerdictKVC{Run: names[k], Other: names[ref]}
		var better, worse []string
		for _, r := range rows {
			a, o := r.Values[k], r.Values[ref]
			q := ratio(r, a, o)
			word := ""
			switch {
			case math.IsNaN(a) || math.IsNaN(o) || a == o:
			case (a < o) == (r.Better == "higher"):
				word, worse = "worse", append(worse, r.Label)
			default:
				word, better = "better", append(better, r.Label)
			}
			if word != "" {
				q += " (" + word + ")"
			}
			vk.Parts = append(vk.Parts, r.Label+" "+q)
		}
		switch {
		case len(worse) == 0 && len(better) == 0:
			vk.Word = "the same"
		case len(worse) == 0:
			vk.Word = "better on every statistic that differs"
		case len(better) == 0:
			vk.Word = "worse on every statistic that differs"
		default:
			vk.Word = "mixed: better on " + strings.Join(better, ", ") + "; worse on " + strings.Join(worse, ", ")
		}
		v.KVC = append(v.KVC, vk)
	}
	return v
}

// Lines renders the verdict as plain text lines (bench's stdout, the
// report's block).
func (v Verdict) Lines() (stats, kvc []string) {
	for _, s := range v.Stats {
		if s.Best == "" {
			stats = append(stats, fmt.Sprintf("%s: no run has a value (no request completed)", s.Label))
			continue
		}
		parts := make([]string, 0, len(s.Others))
		same := len(s.Others) > 0
		for _, o := range s.Others {
			parts = append(parts, o.Run+" "+o.Ratio)
			same = same && o.Ratio == "same"
		}
		if same {
			stats = append(stats, fmt.Sprintf("%s: the same in every run (%s)", s.Label, s.Value))
			continue
		}
		l := fmt.Sprintf("%s: best %s (%s)", s.Label, s.Best, s.Value)
		if len(parts) > 0 {
			l += "; " + strings.Join(parts, ", ")
		}
		stats = append(stats, l)
	}
	for _, k := range v.KVC {
		kvc = append(kvc, fmt.Sprintf("%s vs best other (%s): %s — %s", k.Run, k.Other, strings.Join(k.Parts, ", "), k.Word))
	}
	return stats, kvc
}

// WriteVerdict writes the verdict block as text.
func WriteVerdict(w io.Writer, v Verdict) error {
	stats, kvc := v.Lines()
	var b strings.Builder
	b.WriteString("verdict (each run against the best; × = its value / the best's: above 1 is worse for latency and failures, below 1 worse for goodput)\n")
	for _, l := range stats {
		b.WriteString("  " + l + "\n")
	}
	for _, l := range kvc {
		b.WriteString("  " + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
