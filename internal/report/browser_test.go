package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/browsertest"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report/reporttest"
)

// factsSummary and factsConfig give synthetic runs the facts a real run
// records, so the page's header has something to show.
func factsSummary(extra map[string]any) map[string]any {
	m := map[string]any{"model_id": "qwen3-30b-a3b", "workload": "synthetic agentic sessions",
		"time_scale": 1.0, "slo": map[string]any{"ttft_ms": 30000.0}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var factsConfig = map[string]any{"prefill": 4, "decode": 4,
	"profile": map[string]any{"name": "qwen3-30b-a3b/h200-141g", "hardware": map[string]any{"name": "h200-141g"}}}

// writeRuns writes synthetic runs under t.TempDir() and loads them.
func writeRuns(t *testing.T, specs []reporttest.Spec) []*Run {
	t.Helper()
	base := t.TempDir()
	var runs []*Run
	for i, s := range specs {
		dir := filepath.Join(base, "run"+strconv.Itoa(i))
		if _, err := reporttest.WriteRun(dir, s); err != nil {
			t.Fatal(err)
		}
		r, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

// twoRuns writes a naive-PD and a KVC synthetic run, the KVC one
// interrupted and replayed twice as fast, and loads them.
func twoRuns(t *testing.T, sessions int) []*Run {
	t.Helper()
	return writeRuns(t, []reporttest.Spec{
		{Name: "E1 naive PD", Mechanism: reporttest.NaivePD, Sessions: sessions, Seed: 1,
			Summary: factsSummary(nil), Config: factsConfig},
		{Name: "E4 KVC", Mechanism: reporttest.KVC, Sessions: sessions, Seed: 4,
			Summary: factsSummary(map[string]any{"time_scale": 2.0, "complete": false, "stop_reason": "interrupted (SIGINT)"}),
			Config:  factsConfig},
	})
}

// pageVerdict is what the page's own check wrote into the dumped DOM.
type pageVerdict struct {
	check, detail, scrolled string
	charts, drawn           int
}

var (
	reCheck    = regexp.MustCompile(`data-check="([^"]*)"`)
	reDetail   = regexp.MustCompile(`data-check-detail="([^"]*)"`)
	reScrolled = regexp.MustCompile(`data-scrolled-tables="([^"]*)"`)
	reCharts   = regexp.MustCompile(`data-charts="(\d+)"`)
	reDrawnN   = regexp.MustCompile(`data-drawn-charts="(\d+)"`)
)

func verdict(t *testing.T, dom string) pageVerdict {
	t.Helper()
	get := func(re *regexp.Regexp) string {
		m := re.FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("dumped DOM lacks %s", re)
		}
		return html.UnescapeString(m[1])
	}
	v := pageVerdict{check: get(reCheck), detail: get(reDetail), scrolled: get(reScrolled)}
	v.charts, _ = strconv.Atoi(get(reCharts))
	v.drawn, _ = strconv.Atoi(get(reDrawnN))
	return v
}

// openPage writes runs as a page (passing its HTML through edit when set),
// opens it headless at the given window width and returns the DOM as laid
// out, the browser's log and the page's path.
func openPage(t *testing.T, bin string, runs []*Run, opt Options, width int, edit func(string) string) (dom, logs, page string) {
	t.Helper()
	out := t.TempDir()
	if keep := os.Getenv("PDHYBRID_REPORT_KEEP"); keep != "" {
		out = filepath.Join(keep, t.Name())
	}
	if err := WriteHTMLOptions(out, runs, opt); err != nil {
		t.Fatal(err)
	}
	page = filepath.Join(out, "index.html")
	if edit != nil {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(page, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dom, logs = browsertest.Run(t, bin, page, "--dump-dom", "--window-size="+strconv.Itoa(width)+",1000")
	return dom, logs, page
}

// TestReportBrowser renders a two-run report and opens it in headless
// Chromium. The page's own check must pass: every chart drew data, each
// density curve encloses the share its caption states, the page is no
// wider than the window and the facts come first. The header must name
// what is compared, the interrupted run must be labelled, the captions'
// shares must be the data's, no console message or script error may
// appear, and a screenshot must be produced.
func TestReportBrowser(t *testing.T) {
	bin := browsertest.Need(t)
	runs := twoRuns(t, 150)
	dom, logs, page := openPage(t, bin, runs, Options{}, 1280, nil)
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, string(raw))

	v := verdict(t, dom)
	if v.check != "ok" {
		t.Fatalf("page check failed: %s", v.detail)
	}
	if strings.Contains(dom, `data-js-error="`) {
		t.Fatalf("script error: %s", regexp.MustCompile(`data-js-error="[^"]*"`).FindString(dom))
	}
	drawn := regexp.MustCompile(`data-drawn="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(drawn) != v.charts || v.drawn != v.charts || v.charts < 13 {
		t.Fatalf("%d charts checked (%d marked), page has %d (want ≥ 13: nothing folds for these runs)", v.drawn, len(drawn), v.charts)
	}
	for i, d := range drawn {
		if d[1] == "0" {
			t.Errorf("chart %d has no drawn data marks", i)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") ||
			strings.Contains(line, "Content Security Policy") || strings.Contains(line, "Refused to") {
			t.Errorf("browser console: %s", line)
		}
	}
	if strings.Contains(dom, "self-check") {
		t.Error("the page still shows a self-check footer")
	}

	checkHeader(t, dom)
	checkClaims(t, dom, runs)

	shot := filepath.Join(filepath.Dir(page), "screenshot.png")
	browsertest.Run(t, bin, page, "--screenshot="+shot, "--window-size=1400,6000", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(png) < 20_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot is %d bytes, not a plausible PNG", len(png))
	}
}

// checkHeader finds the facts twoRuns recorded at the top of the page:
// shared facts once, differing ones per run, the interrupted run labelled.
func checkHeader(t *testing.T, dom string) {
	t.Helper()
	facts := dom[strings.Index(dom, `id="facts"`):]
	facts = facts[:strings.Index(facts, "</table>")]
	row := func(key string) string {
		m := regexp.MustCompile(`<tr data-fact="` + key + `">(.*?)</tr>`).FindStringSubmatch(facts)
		if m == nil {
			t.Errorf("header has no %q fact", key)
			return ""
		}
		return m[1]
	}
	for key, want := range map[string]string{
		"model":    `<td data-same="true">qwen3-30b-a3b</td>`,
		"hardware": `<td data-same="true">h200-141g</td>`,
		"gpus":     `<td data-same="true">4P4D</td>`,
		"workload": `<td data-same="true">synthetic agentic sessions</td>`,
		"slo":      `<td data-same="true">TTFT ≤ 30 s</td>`,
		"date":     `<td data-same="true">—</td>`,
	} {
		if r := row(key); !strings.Contains(r, want) {
			t.Errorf("fact %s: %q, want %q", key, r, want)
		}
	}
	ts := row("time_scale")
	for _, want := range []string{`data-same="false"`, `E1 naive PD: <b>1 (trace time)</b>`,
		`E4 KVC: <b>2 (arrivals and think times 2× faster than the trace)</b>`} {
		if !strings.Contains(ts, want) {
			t.Errorf("time scale differs per run: %q lacks %q", ts, want)
		}
	}
	if !strings.Contains(row("version"), "—") || !strings.Contains(dom, "Report written by pdhybrid "+BuildVersion()) {
		t.Error("the page does not say which pdhybrid wrote it")
	}
	if !regexp.MustCompile(`data-incomplete="E4 KVC"><b>E4 KVC</b> is incomplete: interrupted \(SIGINT\)`).MatchString(dom) ||
		!strings.Contains(dom, `<td class="l incomplete">incomplete: interrupted (SIGINT)</td>`) {
		t.Error("the interrupted run is not labelled incomplete")
	}
	if strings.Index(dom, `id="facts"`) > strings.Index(dom, `id="headline"`) {
		t.Error("the facts are not at the top")
	}
}

// checkClaims compares each density caption's share with the share
// computed here from the runs (so the caption is right about the data, not
// only consistent with the drawing) and with the area the page measured
// on the drawn curve.
func checkClaims(t *testing.T, dom string, runs []*Run) {
	t.Helper()
	vs := newViews(runs)
	var pooled []float64
	for _, v := range vs {
		pooled = append(pooled, v.ttft...)
	}
	sort.Float64s(pooled)
	window := niceMax(metrics.Percentile(pooled, 95))
	re := regexp.MustCompile(`<span class="area-claim" data-line="([^"]*)" data-drawn-area="([^"]*)">([^<]*)</span>`)
	for _, id := range []string{"ttft-density-linear", "ttft-density-log"} {
		fig := dom[strings.Index(dom, `<figure id="`+id+`"`):]
		fig = fig[:strings.Index(fig, "</figure>")]
		ms := re.FindAllStringSubmatch(fig, -1)
		if len(ms) != len(vs) {
			t.Fatalf("%s: %d measured claims, want one per run (%d)", id, len(ms), len(vs))
		}
		for i, m := range ms {
			in := len(vs[i].ttft)
			if id == "ttft-density-linear" {
				in = WindowCount(vs[i].ttft, window)
			}
			if m[1] != vs[i].name || m[3] != shareText(in, len(vs[i].ttft)) {
				t.Errorf("%s: caption says %s: %s, the data %s: %s", id, m[1], m[3], vs[i].name, shareText(in, len(vs[i].ttft)))
			}
			area, _ := strconv.ParseFloat(m[2], 64)
			want := float64(in) / float64(len(vs[i].ttft))
			if math.Abs(area-want) > 0.002 {
				t.Errorf("%s: %s's drawn curve encloses %.4f, its share is %.4f", id, m[1], area, want)
			}
		}
	}
}

// TestReportBrowserSixRuns: six runs stay legible and fit a 1280 px
// window: the page check passes (no overflow), the headline needs no
// scrolling, and no plot holds more lines than runs (KV occupancy, two
// lines a run, is drawn as one panel per run).
func TestReportBrowserSixRuns(t *testing.T) {
	bin := browsertest.Need(t)
	var specs []reporttest.Spec
	for i := range 6 {
		mech := reporttest.NaivePD
		if i%2 == 1 {
			mech = reporttest.KVC
		}
		specs = append(specs, reporttest.Spec{Name: fmt.Sprintf("run-%d-%s", i+1, mech), Mechanism: mech,
			Sessions: 40, Seed: uint64(10 + i), Summary: factsSummary(nil), Config: factsConfig})
	}
	runs := writeRuns(t, specs)
	dom, _, _ := openPage(t, bin, runs, Options{}, 1280, nil)
	v := verdict(t, dom)
	if v.check != "ok" {
		t.Fatalf("page check failed: %s", v.detail)
	}
	if v.scrolled != "" {
		t.Errorf("tables scroll at 1280 px: %s", v.scrolled)
	}
	plots := regexp.MustCompile(`(?s)<g class="plot".*?</g>`).FindAllString(dom, -1)
	if len(plots) < 7 {
		t.Fatalf("%d line plots, want ≥ 7", len(plots))
	}
	reLine := regexp.MustCompile(`data-line="([^"]*)"`)
	for i, p := range plots {
		names := map[string]bool{}
		for _, m := range reLine.FindAllStringSubmatch(p, -1) {
			names[m[1]] = true
		}
		if len(names) > len(runs) {
			t.Errorf("plot %d draws %d lines for %d runs", i, len(names), len(runs))
		}
	}
	if n := strings.Count(dom, `class="direct-label"`); n < 6*6 {
		t.Errorf("%d direct labels, want one per run on each of the 6 run-line charts", n)
	}
	if n := strings.Count(dom, `<g class="panel"`); n != len(runs) {
		t.Errorf("KV occupancy has %d panels, want %d", n, len(runs))
	}
}

// checkSelfContained fails on anything that would make the page fetch:
// external scripts, styles, images, fonts or links, and on template
// escaping accidents.
func checkSelfContained(t *testing.T, html string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "src=", "<link", "@import", "url(", "ZgotmplZ", "NaN", "Inf"} {
		if strings.Contains(html, bad) {
			i := strings.Index(html, bad)
			t.Errorf("page contains %q near %q", bad, html[max(0, i-80):min(len(html), i+80)])
		}
	}
}

// TestReportBrowserCheckFails holds the negative controls: pages that are
// wrong in one way each, which the page's check must catch, or the tests
// above would prove nothing.
func TestReportBrowserCheckFails(t *testing.T) {
	bin := browsertest.Need(t)
	runs := twoRuns(t, 40)
	for _, c := range []struct {
		name string
		opt  Options
		edit func(string) string
		runs func() []*Run
		want []string
		page string // the page itself must say this
	}{{
		// The old bug: a plain KDE loses the kernel mass below 0, so the
		// drawn curve encloses less than the caption's share.
		name: "unreflected KDE", opt: Options{plainKDE: true},
		want: []string{"ttft-density-linear: ", " encloses ", "% but the caption says "},
	}, {
		name: "caption share wrong",
		edit: func(s string) string {
			return regexp.MustCompile(`(<span class="area-claim" data-line="E1 naive PD">)[^<]*`).ReplaceAllString(s, "${1}50.0%")
		},
		want: []string{"E1 naive PD encloses ", "the caption says 50.0%"},
	}, {
		name: "page wider than the window",
		edit: func(s string) string {
			return strings.Replace(s, `<h2>Runs</h2>`, `<div style="width: 3000px">wide</div><h2>Runs</h2>`, 1)
		},
		want: []string{"page is 30", " px wide in a "},
	}, {
		name: "facts below the headline",
		edit: func(s string) string {
			i, j := strings.Index(s, `<table id="facts"`), strings.Index(s, `<h2>Runs</h2>`)
			facts := s[i:j]
			s = s[:i] + s[j:]
			k := strings.Index(s, `<h3>Failures by cause</h3>`)
			return s[:k] + facts + s[k:]
		},
		want: []string{"the run facts are not above the headline"},
	}, {
		name: "chart without data",
		runs: func() []*Run {
			rs := twoRuns(t, 20)
			for _, r := range rs {
				r.Workers = nil
			}
			return rs
		},
		want: []string{"kv-occupancy: no data drawn"},
		page: "no data in these runs",
	}} {
		t.Run(c.name, func(t *testing.T) {
			rs := runs
			if c.runs != nil {
				rs = c.runs()
			}
			dom, logs, page := openPage(t, bin, rs, c.opt, 1280, c.edit)
			if c.page != "" {
				if b, _ := os.ReadFile(page); strings.Count(string(b), c.page) != 1 {
					t.Errorf("the page does not say %q once", c.page)
				}
			}
			v := verdict(t, dom)
			if v.check != "fail" {
				t.Fatalf("page check passed a page with %s", c.name)
			}
			t.Logf("page check: %s", v.detail)
			for _, w := range c.want {
				if !strings.Contains(v.detail, w) {
					t.Errorf("check detail %q lacks %q", v.detail, w)
				}
			}
			if !strings.Contains(logs, "pdhybrid report check") {
				t.Error("the failed check logged no console error")
			}
		})
	}
}
