package sweep

import (
	"bytes"
	"encoding/csv"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report"
)

func row(cell, workload string, gpus int, p50, p99 float64, failures ...int) Row {
	f := 0
	if len(failures) > 0 {
		f = failures[0]
	}
	return Row{Cell: cell, Workload: workload, GPUs: gpus, Complete: true, Completed: 10, Failures: f, TTFTP50Ms: p50, TTFTP99Ms: p99, Knobs: map[string]string{}}
}

func TestMarkFront(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  []Row
		front string // cells on the front, in row order
	}{
		{"one dominates", []Row{row("a", "w", 4, 1, 1), row("b", "w", 4, 2, 2)}, "a"},
		{"a trade-off keeps both", []Row{row("a", "w", 4, 1, 5), row("b", "w", 4, 2, 2), row("c", "w", 4, 3, 3)}, "a b"},
		{"ties keep both", []Row{row("a", "w", 4, 1, 1), row("b", "w", 4, 1, 1)}, "a b"},
		{"groups do not compete", []Row{row("a", "w", 4, 1, 1), row("b", "w", 8, 2, 2), row("c", "v", 4, 3, 3)}, "a b c"},
		{"failing fast does not win", []Row{row("a", "w", 4, 1, 1, 5), row("b", "w", 4, 2, 2, 0)}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			MarkFront(tc.rows)
			var got []string
			for _, r := range tc.rows {
				if r.Pareto {
					got = append(got, r.Cell)
				}
			}
			if g := strings.Join(got, " "); g != tc.front {
				t.Fatalf("front %q, want %q", g, tc.front)
			}
		})
	}
	stopped := []Row{row("a", "w", 4, 1, 1), row("b", "w", 4, 2, 2)}
	stopped[0].Complete = false
	MarkFront(stopped)
	if stopped[0].Pareto || !stopped[1].Pareto {
		t.Errorf("a stopped run competes: %+v", stopped)
	}
}

// TestCSVReadsBackExactly: every number in sweep.csv parses back to the
// summary's value, and a knob that does not apply is an empty field.
func TestCSVReadsBackExactly(t *testing.T) {
	s := &metrics.Summary{Mechanism: "kvcache-centric", Policy: "kv-aware", Complete: true, Requests: 7, Completed: 6, Errors: 1,
		MeanTTFTMs: 1.0 / 3, P50TTFTMs: 2.0 / 3, P90TTFTMs: 12.345678901234567, P99TTFTMs: 1e6 / 7,
		P99TPOTMs: 0.1 + 0.2, DirectToDShare: 5.0 / 6, GoodRequests: 4}
	c1 := Cell{Mechanism: "kvcache-centric", Topology: Topology{Prefill: 1, Decode: 3}, Workload: Workload{Name: "w"}, Knobs: []Setting{{"tau", "2048"}}}
	c2 := Cell{Mechanism: "pd-colo", Topology: Topology{Colo: 4}, Workload: Workload{Name: "w"}, Knobs: []Setting{{"policy", "sticky"}}}
	rows := []Row{NewRow(c1, s), NewRow(c2, s)}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		if _, dup := col[h]; dup {
			t.Fatalf("column %q twice in %v (a policy knob and the policy column)", h, recs[0])
		}
		col[h] = i
	}
	for name, want := range map[string]float64{"ttft_mean_ms": s.MeanTTFTMs, "ttft_p50_ms": s.P50TTFTMs, "ttft_p90_ms": s.P90TTFTMs,
		"ttft_p99_ms": s.P99TTFTMs, "tpot_p99_ms": s.P99TPOTMs, "direct_share": s.DirectToDShare, "failures": 1, "requests": 7,
		"slo_attainment": 4.0 / 7} { // 4 good of 7 requests, the failure a miss
		got, err := strconv.ParseFloat(recs[1][col[name]], 64)
		if err != nil || got != want {
			t.Errorf("%s = %q, want %v", name, recs[1][col[name]], want)
		}
	}
	if recs[1][col["tau"]] != "2048" || recs[2][col["tau"]] != "" || recs[2][col["topology"]] != "4C" || recs[2][col["gpus"]] != "4" {
		t.Errorf("cell columns: %q / %q", recs[1], recs[2])
	}
}

// The front never holds a dominated cell and holds every competing cell
// that nothing beats: a property over random grids, ties and failures
// included.
func TestMarkFrontProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		rows := make([]Row, 1+rng.IntN(9))
		for i := range rows {
			rows[i] = row(strconv.Itoa(i), []string{"w", "v"}[rng.IntN(2)], 4*(1+rng.IntN(2)), float64(rng.IntN(5)), float64(rng.IntN(5)), rng.IntN(3))
			rows[i].Complete = rng.IntN(8) > 0
		}
		MarkFront(rows)
		in := Competes(rows)
		for i, a := range rows {
			beaten := false
			for j, b := range rows {
				if j != i && in[j] && b.group() == a.group() && dominates(b, a) {
					beaten = true
				}
			}
			if a.Pareto && (beaten || !in[i]) {
				t.Fatalf("iteration %d: %s on the front, beaten %v, competes %v: %+v", iter, a.Cell, beaten, in[i], rows)
			}
			if !a.Pareto && in[i] && !beaten {
				t.Fatalf("iteration %d: %s competes, nothing beats it, off the front: %+v", iter, a.Cell, rows)
			}
		}
	}
}

// A failures line at 0 is drawn above the frame's bottom edge, not on it.
func TestFailuresLineOffFrame(t *testing.T) {
	flat := report.LineChart{X: report.Axis{Min: 1, Max: 3}, Y: report.Axis{Label: "failures", Pad: 0.04},
		Lines: []report.Line{{Name: "a", X: []float64{1, 2, 3}, Y: []float64{0, 0, 0}}}}
	svg := string(flat.SVG())
	frame := regexp.MustCompile(`<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" fill="none" stroke="#888"/>`).FindStringSubmatch(svg)
	path := regexp.MustCompile(`<polyline class="mark"[^>]*points="[0-9.]+,([0-9.]+)`).FindStringSubmatch(svg)
	if frame == nil || path == nil {
		t.Fatalf("no frame or line in %s", svg)
	}
	y0, _ := strconv.ParseFloat(frame[1], 64)
	h, _ := strconv.ParseFloat(frame[2], 64)
	ly, _ := strconv.ParseFloat(path[1], 64)
	if ly >= y0+h-2 {
		t.Errorf("the line at y=%g sits on the frame's bottom edge y=%g", ly, y0+h)
	}
}
