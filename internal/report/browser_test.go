package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/report/reporttest"
)

// twoRuns writes a naive-PD and a KVC synthetic run under t.TempDir() and
// loads them.
func twoRuns(t *testing.T, sessions int) []*Run {
	t.Helper()
	base := t.TempDir()
	var runs []*Run
	for i, s := range []reporttest.Spec{
		{Name: "E1 naive PD", Mechanism: reporttest.NaivePD, Sessions: sessions, Seed: 1},
		{Name: "E4 KVC", Mechanism: reporttest.KVC, Sessions: sessions, Seed: 4},
	} {
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

// findBrowser returns a headless-capable Chromium, or "" when none exists.
func findBrowser() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// chromium runs the browser headless on page with a fresh profile and
// nothing in the background that could reach the network.
func chromium(t *testing.T, bin, page string, extra ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0",
	}, extra...)
	args = append(args, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", bin, err, tail(errb.String(), 4000))
	}
	return out.String(), errb.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestReportBrowser renders a two-run report and opens it in headless
// Chromium: the page's own self-check must report every chart drawn with
// data, no console message or script error may appear, and a screenshot
// must be produced.
func TestReportBrowser(t *testing.T) {
	bin := findBrowser()
	if bin == "" {
		t.Skip("no Chromium found (chromium, chromium-browser, google-chrome on PATH or /usr/bin/chromium); " +
			"install it with `apt-get install -y chromium` to run the browser test")
	}
	runs := twoRuns(t, 150)
	out := t.TempDir()
	if keep := os.Getenv("PDHYBRID_REPORT_KEEP"); keep != "" {
		out = keep // keep the page and screenshot to look at
	}
	if err := WriteHTML(out, runs); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, "index.html")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, string(html))

	dom, logs := chromium(t, bin, page, "--dump-dom")
	if !strings.Contains(dom, `data-check="ok"`) {
		m := regexp.MustCompile(`self-check:[^<]*`).FindString(dom)
		t.Fatalf("page self-check failed: %q", m)
	}
	if strings.Contains(dom, `data-js-error="`) {
		t.Fatalf("script error: %s", regexp.MustCompile(`data-js-error="[^"]*"`).FindString(dom))
	}
	want := regexp.MustCompile(`data-charts="(\d+)"`).FindStringSubmatch(dom)
	if want == nil {
		t.Fatal("dumped DOM lacks data-charts")
	}
	drawn := regexp.MustCompile(`data-drawn="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if strconv.Itoa(len(drawn)) != want[1] || len(drawn) < 13 {
		t.Fatalf("%d charts self-checked, page has %s (want ≥ 13)", len(drawn), want[1])
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

	shot := filepath.Join(out, "screenshot.png")
	chromium(t, bin, page, "--screenshot="+shot, "--window-size=1400,6000", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(png) < 20_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot is %d bytes, not a plausible PNG", len(png))
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

// TestReportBrowserDetectsEmptyChart is the negative control: without
// structural/workers.jsonl the occupancy chart has no data, and the page's
// self-check must say so, or the positive test above would prove nothing.
func TestReportBrowserDetectsEmptyChart(t *testing.T) {
	bin := findBrowser()
	if bin == "" {
		t.Skip("no Chromium found; install it with `apt-get install -y chromium` to run the browser test")
	}
	runs := twoRuns(t, 20)
	for _, r := range runs {
		r.Workers = nil
	}
	out := t.TempDir()
	if err := WriteHTML(out, runs); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, "index.html")
	html, _ := os.ReadFile(page)
	if strings.Count(string(html), "no data in these runs") != 1 {
		t.Error("the empty chart does not say \"no data\"")
	}
	dom, logs := chromium(t, bin, page, "--dump-dom")
	if !strings.Contains(dom, `data-check="fail"`) || !strings.Contains(dom, "1 without data: kv-occupancy") {
		t.Errorf("self-check missed the empty chart: %q", regexp.MustCompile(`self-check:[^<]*`).FindString(dom))
	}
	if !strings.Contains(logs, "CONSOLE") {
		t.Error("the empty chart did not log a console error")
	}
}
