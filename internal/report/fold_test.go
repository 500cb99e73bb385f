package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

func TestReportFoldRule(t *testing.T) {
	nan := math.NaN()
	g := func(vs ...float64) BarGroup { return BarGroup{Values: vs} }
	cases := []struct {
		name           string
		groups         []BarGroup
		trivial, oneEa bool
	}{
		{"each run 100% one mode (bench: naive PD vs DP)", []BarGroup{g(nan, 1), g(1, nan)}, true, true},
		{"zeros are no bar (D changes: all sessions at 0)", []BarGroup{g(1, 0, 0), g(1, 0, 0)}, true, true},
		{"a run without data does not count", []BarGroup{g(1, nan), g(nan, nan)}, true, true},
		{"one run splits", []BarGroup{g(1, nan), g(0.6, 0.4)}, false, false},
		{"one mode each but not 100% (mean TTFT bars)", []BarGroup{g(3.2, nan), g(nan, 0.4)}, false, true},
		{"no data at all", []BarGroup{g(nan), g(0)}, false, false},
		{"no runs", nil, false, false},
		{"almost 100%", []BarGroup{g(0.999, nan)}, false, true},
	}
	for _, c := range cases {
		if got := TrivialShares(c.groups); got != c.trivial {
			t.Errorf("%s: TrivialShares = %v, want %v", c.name, got, c.trivial)
		}
		if got := OneCategoryEach(c.groups); got != c.oneEa {
			t.Errorf("%s: OneCategoryEach = %v, want %v", c.name, got, c.oneEa)
		}
	}
	nan2 := []BarGroup{g(1, nan), g(nan, 1), g(nan, 1), g(nan, 1)}
	if got, want := soleCategories([]string{"pd", "dp1", "dp2", "dp3"}, nan2, []string{"pd-router", "colo-router"}),
		"pd-router (pd); colo-router (3 runs)"; got != want {
		t.Errorf("fold note %q, want %q", got, want)
	}
}

func TestReportShareText(t *testing.T) {
	for _, c := range []struct {
		in, total int
		want      string
	}{{1282, 1282, "100%"}, {0, 10, "0%"}, {1209, 1282, "94.3%"}, {9999, 10000, "99.9%"}, {1, 10000, "0.1%"}, {0, 0, "—"}} {
		if got := shareText(c.in, c.total); got != c.want {
			t.Errorf("shareText(%d, %d) = %q, want %q", c.in, c.total, got, c.want)
		}
	}
}

// oneModeRun is a run whose every request took one execution mode, as
// naive PD and DP runs do.
func oneModeRun(name, mech, mode string, n int) *Run {
	r := &Run{Name: name, Mechanism: mech, Summary: metrics.Summary{Requests: n, Completed: n}}
	for i := range n {
		r.Requests = append(r.Requests, Request{SessionID: "s" + string(rune('a'+i%7)), Turn: i/7 + 1,
			TTFTS: 0.1 + float64(i%13), LatencyS: 2 + float64(i%17), InputLength: 1000, UncachedTokens: 100, CachedTokens: 900,
			ExecutionMode: mode, PrefillWorker: "p0", DecodeWorker: "d0", Completed: true})
	}
	return r
}

// TestReportFoldsTrivialCharts: naive PD against DP (one mode each, one
// decode worker) folds the mode charts, the D-changes chart and the
// per-mode tables; a KVC run with several modes folds none of them.
func TestReportFoldsTrivialCharts(t *testing.T) {
	runs := []*Run{oneModeRun("pd", "pd-disaggregation", "pd-disaggregation-router", 200),
		oneModeRun("dp", "pd-colo", "dp-colo-router", 200)}
	var b bytes.Buffer
	if err := Render(&b, runs, Options{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, id := range []string{"mode-mix", "mode-ttft", "tail-attribution", "d-changes", "modes", "tails"} {
		if !strings.Contains(page, `<details class="folded" id="`+id+`-folded">`) {
			t.Errorf("%s is not folded away for one-mode runs", id)
		}
	}
	if !strings.Contains(page, "every run sent all its requests down one execution mode (pd-disaggregation-router (pd); dp-colo-router (dp)).") {
		t.Error("the mode-mix fold note does not say why")
	}
	if strings.Contains(page, `<details class="folded" id="ttft-density`) {
		t.Error("a density chart was folded")
	}

	kvc := twoRuns(t, 20)
	b.Reset()
	if err := Render(&b, kvc, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `<details class="folded"`); n != 0 {
		t.Errorf("%d sections folded for runs with several modes, want 0", n)
	}
}

// TestReportDirectLabelsApart: labels of lines ending at one point are
// stacked without overlapping and stay inside the frame.
func TestReportDirectLabelsApart(t *testing.T) {
	var as []labelAnchor
	for range 6 {
		as = append(as, labelAnchor{x: 300, y: 100, text: "naive-pd-1p3d-kv-aware"})
	}
	ps := placeLabels(as, 64, 40, 604, 288)
	for i, p := range ps {
		if p.box[0] < 64 || p.box[2] > 604 || p.box[1] < 40 || p.box[3] > 288 {
			t.Errorf("label %d at %v leaves the frame", i, p.box)
		}
		for j := range i {
			q := ps[j]
			if p.box[0] < q.box[2] && q.box[0] < p.box[2] && p.box[1] < q.box[3] && q.box[1] < p.box[3] {
				t.Errorf("labels %d and %d overlap: %v %v", i, j, p.box, q.box)
			}
		}
	}
}
