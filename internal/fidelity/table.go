package fidelity

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Stat names the statistics the table compares.
var Stat = []string{"ttft mean", "ttft p50", "ttft p90", "ttft p99", "e2e mean", "e2e p50", "e2e p90", "e2e p99"}

func (s Side) values() []float64 {
	return []float64{s.TTFT.Mean, s.TTFT.P50, s.TTFT.P90, s.TTFT.P99, s.E2E.Mean, s.E2E.P50, s.E2E.P90, s.E2E.P99}
}

// Errors are the relative errors per Stat.
func (r *Result) Errors() []float64 {
	sv, rv := r.Sim.values(), r.Real.values()
	out := make([]float64, len(sv))
	for i := range sv {
		out[i] = Err(sv[i], rv[i])
	}
	return out
}

// MedianAbs is the median |error| per Stat over the runs that were not
// overloaded, and the median |error| of the failure count over those that were.
func MedianAbs(res []*Result) (stats []float64, failures float64) {
	cols := make([][]float64, len(Stat))
	var fail []float64
	for _, r := range res {
		if r.Overloaded {
			fail = append(fail, math.Abs(Err(float64(r.Sim.Failed), float64(r.Real.Failed))))
			continue
		}
		for i, e := range r.Errors() {
			cols[i] = append(cols[i], math.Abs(e))
		}
	}
	stats = make([]float64, len(Stat))
	for i := range cols {
		stats[i] = median(cols[i])
	}
	return stats, median(fail)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteTable prints one row per run: real, simulated and error for every
// statistic (seconds), the failures, then the medians. Markdown writes a
// GitHub table (docs/fidelity.md).
func WriteTable(w io.Writer, res []*Result, markdown bool) error {
	var b strings.Builder
	sep, end := "  ", "\n"
	if markdown {
		sep, end = " | ", " |\n"
		b.WriteString("| ")
	}
	head := []string{"run"}
	for _, s := range Stat {
		head = append(head, s+" real", "sim", "err")
	}
	head = append(head, "decode ms/token real", "sim", "err", "failed real", "sim", "KV pool real", "sim")
	b.WriteString(strings.Join(head, sep) + end)
	if markdown {
		b.WriteString("|" + strings.Repeat("---|", len(head)) + "\n")
	}
	for _, r := range res {
		row := []string{r.Run}
		if r.Overloaded {
			row[0] += " (overloaded)"
		}
		sv, rv, ev := r.Sim.values(), r.Real.values(), r.Errors()
		for i := range sv {
			row = append(row, fmt.Sprintf("%.3f", rv[i]), fmt.Sprintf("%.3f", sv[i]), pct(ev[i]))
		}
		row = append(row, fmt.Sprintf("%.2f", 1e3*r.Real.DecodeS), fmt.Sprintf("%.2f", 1e3*r.Sim.DecodeS), pct(Err(r.Sim.DecodeS, r.Real.DecodeS)))
		row = append(row, fmt.Sprint(r.Real.Failed), fmt.Sprint(r.Sim.Failed), fmt.Sprint(r.RealPool), fmt.Sprint(r.PoolTokens))
		if markdown {
			b.WriteString("| ")
		}
		b.WriteString(strings.Join(row, sep) + end)
	}
	med, fail := MedianAbs(res)
	if markdown {
		b.WriteString("\n| median abs error (runs not overloaded) | " + strings.Join(Stat, " | ") + " | failures (overloaded runs) |\n|" + strings.Repeat("---|", len(Stat)+2) + "\n| ")
		var cells []string
		for _, m := range med {
			cells = append(cells, fmt.Sprintf("%.1f %%", 100*m))
		}
		b.WriteString(" | " + strings.Join(cells, " | ") + fmt.Sprintf(" | %.1f %% |\n", 100*fail))
	} else {
		b.WriteString("\nmedian |error| over the runs not overloaded:")
		for i, m := range med {
			fmt.Fprintf(&b, " %s %.1f%%;", Stat[i], 100*m)
		}
		fmt.Fprintf(&b, " failures (overloaded runs) %.1f%%\n", 100*fail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(e float64) string {
	if math.IsNaN(e) {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*e)
}

// Fitted is what `pdhybrid calibrate realruns` writes and `validate
// --coefficients` reads.
type Fitted struct {
	Coefficients model.Coefficients `json:"coefficients"`
	Client       ClientPath         `json:"client"`
	Score        float64            `json:"score,omitempty"`
	Source       string             `json:"source,omitempty"`
}

// LoadFitted reads a Fitted file; unknown fields are errors.
func LoadFitted(path string) (*Fitted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var x Fitted
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	x.Coefficients.Source = path
	return &x, nil
}
