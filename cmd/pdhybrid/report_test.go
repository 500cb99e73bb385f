package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/report/reporttest"
)

// reportRuns writes a naive-PD and a KVC synthetic run and returns their
// folders.
func reportRuns(t *testing.T) (string, string) {
	t.Helper()
	base := t.TempDir()
	a, b := filepath.Join(base, "e1"), filepath.Join(base, "e4")
	if _, err := reporttest.WriteRun(a, reporttest.Spec{Name: "E1 naive PD", Mechanism: reporttest.NaivePD, Sessions: 30, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := reporttest.WriteRun(b, reporttest.Spec{Name: "E4 KVC", Mechanism: reporttest.KVC, Sessions: 30, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestReportCompareFormats checks `report --compare A B` in each format.
func TestReportCompareFormats(t *testing.T) {
	a, b := reportRuns(t)
	tests := []struct {
		format string
		check  func(t *testing.T, out string)
	}{
		{"text", func(t *testing.T, out string) {
			for _, want := range []string{"baseline: E1 naive PD", "E4 KVC", "Δ vs E1 naive PD", "TTFT p99", "direct-to-D share", "failures by cause", "requests by execution mode", "kvcache-direct-to-d-session"} {
				if !strings.Contains(out, want) {
					t.Errorf("text output lacks %q:\n%s", want, out)
				}
			}
		}},
		{"csv", func(t *testing.T, out string) {
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(recs[0], ",") != "table,metric,unit,run,value,delta,delta_unit" {
				t.Errorf("csv header %v", recs[0])
			}
			rows := 0
			for _, r := range recs[1:] {
				if r[0] == "headline" && r[1] == "ttft_p50" {
					rows++
					if (r[3] == "E1 naive PD") != (r[5] == "") {
						t.Errorf("baseline has a delta or other run lacks one: %v", r)
					}
				}
			}
			if rows != 2 {
				t.Errorf("%d ttft_p50 rows, want 2", rows)
			}
		}},
		{"json", func(t *testing.T, out string) {
			var doc struct {
				Runs     []string
				Headline []struct {
					Metric string
					Values []float64
				}
				ExecutionModes []struct {
					Name   string
					Counts []int
				} `json:"execution_modes"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Runs) != 2 || doc.Runs[1] != "E4 KVC" || len(doc.Headline) < 20 || len(doc.ExecutionModes) < 2 {
				t.Errorf("json doc %+v", doc)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			// Flags after the run directories, as people type them.
			out, _, err := runCLI("report", a, b, "--compare", "--format", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

func TestReportCommandHTML(t *testing.T) {
	a, b := reportRuns(t)
	dir := filepath.Join(t.TempDir(), "rep")
	out, _, err := runCLI("report", "--out", dir, a, b, "--tail-quantile", "95")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != filepath.Join(dir, "index.html") {
		t.Errorf("stdout %q", out)
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "TTFT ≥ each run's p95") || !strings.Contains(string(html), "E1 naive PD vs E4 KVC") {
		t.Error("page lacks the tail quantile or the default title")
	}
}

// TestReportCommandBenchFolder: a bench output folder stands for its runs.
func TestReportCommandBenchFolder(t *testing.T) {
	a, _ := reportRuns(t)
	out, _, err := runCLI("report", "--compare", filepath.Dir(a))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "E1 naive PD") || !strings.Contains(out, "E4 KVC") {
		t.Errorf("bench folder not expanded:\n%s", out)
	}
}

func TestReportCommandUsage(t *testing.T) {
	a, _ := reportRuns(t)
	var u usageError
	for _, args := range [][]string{
		{},
		{"--compare"},
		{a, "--compare", "--format", "yaml"},
		{a, "--tail-quantile", "100"},
		{a, "--body-quantile", "0"},
	} {
		if _, _, err := runCLI(append([]string{"report"}, args...)...); !errors.As(err, &u) {
			t.Errorf("%v: err %v, want a usage error", args, err)
		}
	}
	if _, _, err := runCLI("report", filepath.Join(t.TempDir(), "missing"), "--compare"); err == nil || errors.As(err, &u) {
		t.Errorf("missing run dir: err %v, want a plain error", err)
	}
	help, _, err := runCLI("report", "--help")
	if err != nil {
		t.Errorf("--help: %v", err)
	}
	for _, f := range []string{"--out", "--compare", "--format", "--tail-quantile", "--body-quantile", "--title", "(default \"report\")", "(default 99)"} {
		if !strings.Contains(help, f) {
			t.Errorf("--help lacks %q", f)
		}
	}
	// Everything after "--" is a run directory, even if it looks like a flag.
	_, stderr, err := runCLI("report", "--compare", a, "--", "-b")
	if exitCode(err) != exitError || !strings.Contains(stderr, "-b") {
		t.Errorf("after --: %v\n%s", err, stderr)
	}
}
