package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// The verdict names the best run per statistic with every other's ratio,
// and compares each KVC run with the other run best most often — the
// issue's case: KVC loses TPOT to DP while winning TTFT.
func TestVerdict(t *testing.T) {
	st := func(p50, p90, p99 float64) metrics.Stats {
		return metrics.Stats{Count: 10, Mean: p50, P50: p50, P90: p90, P99: p99, Max: p99}
	}
	pd := metrics.Summary{Mechanism: "pd-disaggregation", Requests: 10, Completed: 10, TTFTStats: st(5, 30, 41), LatencyStats: st(9, 40, 50), TPOTStats: st(0.015, 0.018, 0.019), RequestGoodput: 0.5}
	dp := metrics.Summary{Mechanism: "pd-colo", Requests: 10, Completed: 10, TTFTStats: st(0.081, 9, 17.9), LatencyStats: st(4, 20, 30), TPOTStats: st(0.015, 0.018, 0.0199), RequestGoodput: 1}
	kvc := metrics.Summary{Mechanism: "kvcache-centric", Requests: 10, Completed: 8, Errors: 2, TTFTStats: st(0.05, 8, 15.2), LatencyStats: st(4, 20, 30), TPOTStats: st(0.02, 0.03, 0.0433), RequestGoodput: 1}
	names := []string{"naive-pd-1p3d", "dp-x4", "kvc-v3-1p3d"}
	v := BuildVerdict(names, []metrics.Summary{pd, dp, kvc})
	byKey := map[string]VerdictStat{}
	for _, s := range v.Stats {
		byKey[s.Key] = s
	}
	if s := byKey["ttft_p99"]; s.Best != "kvc-v3-1p3d" || s.Others[0] != (VerdictOther{"naive-pd-1p3d", "2.7×"}) || s.Others[1] != (VerdictOther{"dp-x4", "1.2×"}) {
		t.Errorf("ttft_p99 %+v", s)
	}
	if s := byKey["tpot_p99"]; s.Best != "naive-pd-1p3d" {
		t.Errorf("tpot_p99 %+v", s)
	}
	if s := byKey["failures"]; s.Best != "naive-pd-1p3d" || s.Others[1].Ratio != "2 vs 0" {
		t.Errorf("failures %+v", s)
	}
	if s := byKey["e2el_p99"]; s.Others[len(s.Others)-1].Ratio != "same" {
		t.Errorf("e2el_p99 %+v", s)
	}
	if len(v.KVC) != 1 || v.KVC[0].Other != "dp-x4" {
		t.Fatalf("kvc %+v, want one comparison with dp-x4", v.KVC)
	}
	k := strings.Join(v.KVC[0].Parts, ", ")
	for _, want := range []string{"TTFT p99 0.85× (better)", "TPOT p99 2.2× (worse)", "goodput same", "failures 2 vs 0 (worse)"} {
		if !strings.Contains(k, want) {
			t.Errorf("kvc parts %q lack %q", k, want)
		}
	}
	if !strings.HasPrefix(v.KVC[0].Word, "mixed: better on TTFT p50") {
		t.Errorf("word %q", v.KVC[0].Word)
	}
	var b bytes.Buffer
	WriteVerdict(&b, v)
	if !strings.Contains(b.String(), "kvc-v3-1p3d vs best other (dp-x4): ") || !strings.Contains(b.String(), "TTFT p99: best kvc-v3-1p3d (15.20 s); naive-pd-1p3d 2.7×, dp-x4 1.2×") {
		t.Errorf("text:\n%s", b.String())
	}
	// No run completed anything: no best, no ratio.
	empty := metrics.Summary{Requests: 1, Errors: 1}
	v = BuildVerdict([]string{"a", "b"}, []metrics.Summary{empty, empty})
	if v.Stats[0].Best != "" || v.Stats[0].Others[0].Ratio != "—" {
		t.Errorf("empty runs: %+v", v.Stats[0])
	}
}

// The HTML report opens with the verdict block, above the facts.
func TestReportVerdictHeadsPage(t *testing.T) {
	runs := []*Run{oneModeRun("pd", "pd-disaggregation", "pd-disaggregation-router", 50),
		oneModeRun("kvc", "kvcache-centric", "kvcache-direct-to-d-session", 50)}
	for i, r := range runs {
		r.Summary = metrics.Summary{Mechanism: r.Mechanism, Requests: 50, Completed: 50,
			TTFTStats: metrics.Stats{Count: 50, P50: float64(i + 1), P90: 2, P99: 3}}
	}
	var b bytes.Buffer
	if err := Render(&b, runs, Options{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	v, f := strings.Index(page, `id="verdict"`), strings.Index(page, `id="facts"`)
	if v < 0 || f < v {
		t.Fatalf("verdict at %d, facts at %d: want the verdict first", v, f)
	}
	if !strings.Contains(page, "TTFT p50: best pd (1.000 s); kvc 2×") || !strings.Contains(page, "kvc vs best other (pd): TTFT p50 2× (worse)") {
		t.Errorf("verdict block:\n%s", page[v:f])
	}
}

// Runs that share a name (one per bench output) are told apart by their
// folders, not by #2.
func TestReportDistinctNames(t *testing.T) {
	got := DistinctNames([]string{"kvc-1p3d", "dp-x4", "kvc-1p3d", "x", "x"},
		[]string{"out/a/kvc-1p3d", "out/a/dp-x4", "out/b/kvc-1p3d", "same/x", "same/x"})
	want := []string{"a/kvc-1p3d", "dp-x4", "b/kvc-1p3d", "x", "x #2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("DistinctNames %q, want %q", got, want)
	}
}

// A statistic every run ties on says so instead of naming a "best".
func TestVerdictAllSame(t *testing.T) {
	a := metrics.Summary{Requests: 5, Completed: 2, Errors: 3}
	stats, _ := BuildVerdict([]string{"x", "y"}, []metrics.Summary{a, a}).Lines()
	if got := stats[len(stats)-1]; got != "failures: the same in every run (3)" {
		t.Errorf("failures line %q", got)
	}
}
