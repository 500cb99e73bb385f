package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/browsertest"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// sampleTable is a small sweep: KVC over a numeric and a word knob, naive
// PD once, on two GPU counts.
func sampleTable() Table {
	g := Grid{Mechanisms: []string{"kvcache-centric", "pd-disaggregation"},
		Knobs:      []Knob{{Name: "direct-max-uncached-tokens", Values: []string{"2048", "8192", "16384"}}, {Name: "trim", Values: []string{"idle", "any"}}},
		Workloads:  []Workload{{Name: "seed-swe"}},
		Topologies: []Topology{{Prefill: 1, Decode: 3}, {Prefill: 2, Decode: 6}}}
	var rows []Row
	for ti, tp := range g.Topologies {
		for vi, v := range g.Knobs[0].Values {
			for wi, w := range g.Knobs[1].Values {
				c := Cell{Mechanism: "kvcache-centric", Topology: tp, Workload: g.Workloads[0], Knobs: []Setting{{"direct-max-uncached-tokens", v}, {"trim", w}}}
				f := float64(1 + ti + vi + wi)
				rows = append(rows, NewRow(c, &metrics.Summary{Policy: "kv-aware", Complete: true, Requests: 10, Completed: 10,
					P50TTFTMs: 100 / f, P99TTFTMs: 1000 * f, P99TPOTMs: 5, DirectToDShare: 0.2 * f}))
			}
		}
		c := Cell{Mechanism: "pd-disaggregation", Topology: tp, Workload: g.Workloads[0]}
		rows = append(rows, NewRow(c, &metrics.Summary{Policy: "default", Complete: true, Requests: 10, Completed: 10, P50TTFTMs: 300, P99TTFTMs: 9000}))
	}
	MarkFront(rows)
	floors := []Floor{{Workload: "seed-swe", Requests: 4449, Uncached: 0.013, TTFTMean: 37.2, TTFTP50: 25.3, TTFTP90: 65.7, TTFTP99: 184.5,
		E2EMean: 944.8, E2EP50: 434.5, E2EP90: 2662, E2EP99: 5672}}
	return Table{Grid: g, Rows: rows, Floors: floors}
}

func TestHTMLPage(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, "sweep test", sampleTable()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Two fronts (4 and 8 GPUs) and every metric against each of 2 knobs.
	want := 2 + 2*len(pageMetrics)
	if n := strings.Count(page, `<svg class="chart"`); n != want {
		t.Errorf("%d charts, want %d", n, want)
	}
	if !strings.Contains(page, `data-charts="`+strconv.Itoa(want)+`"`) {
		t.Error("the page does not say how many charts it made")
	}
	if n := strings.Count(page, `<tr class="front">`); n < 2 {
		t.Errorf("%d front rows marked in the table, want one per group at least", n)
	}
	if regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(page) {
		t.Error("the page refers to something outside itself")
	}
	if !strings.Contains(page, "1 = idle, 2 = any") {
		t.Error("a word knob's axis does not say which position is which value")
	}
	if !strings.Contains(page, "Latency floor of each workload") || !strings.Contains(page, "<td>25.3</td>") {
		t.Error("the page lacks the workload's latency floor (its TTFT p50, 25.3 ms)")
	}
}

// dumpDOM loads page in headless Chromium and returns the DOM after the
// page's script ran.
func dumpDOM(t *testing.T, bin, page string) string {
	out, _ := browsertest.Run(t, bin, page, "--window-size=1400,1000", "--dump-dom")
	return out
}

// TestHTMLInBrowser: in a real browser every chart draws data and the page
// fits the window; a page whose charts lost their marks fails the same
// check, so the check can fail.
func TestHTMLInBrowser(t *testing.T) {
	bin := browsertest.Need(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, "sweep test", sampleTable()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.html")
	bad := filepath.Join(dir, "bad.html")
	os.WriteFile(good, b.Bytes(), 0o644)
	os.WriteFile(bad, bytes.ReplaceAll(b.Bytes(), []byte(`class="mark"`), []byte(`class="x"`)), 0o644)
	check := regexp.MustCompile(`data-check="([^"]*)"`)
	detail := regexp.MustCompile(`data-check-detail="([^"]*)"`)
	drawn := regexp.MustCompile(`data-drawn-charts="(\d+)"`)
	dom := dumpDOM(t, bin, good)
	if m := check.FindStringSubmatch(dom); m == nil || m[1] != "ok" {
		t.Fatalf("page check %v: %v", m, detail.FindStringSubmatch(dom))
	}
	if m := drawn.FindStringSubmatch(dom); m == nil || m[1] != strconv.Itoa(2+2*len(pageMetrics)) {
		t.Errorf("drawn charts %v", m)
	}
	if m := check.FindStringSubmatch(dumpDOM(t, bin, bad)); m == nil || m[1] != "fail" {
		t.Errorf("a page without data marks passes its check: %v", m)
	}
}
