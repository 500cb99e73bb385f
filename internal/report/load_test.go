package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report/reporttest"
)

func TestReportLoadSynthetic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kvc-run")
	recs, err := reporttest.WriteRun(dir, reporttest.Spec{Name: "E4 KVC", Mechanism: reporttest.KVC, Sessions: 20, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "E4 KVC" || r.Mechanism != reporttest.KVC || len(r.Requests) != len(recs) {
		t.Errorf("loaded %q %q %d requests, want %d", r.Name, r.Mechanism, len(r.Requests), len(recs))
	}
	if len(r.Workers) == 0 || r.Events["admission"] == 0 {
		t.Errorf("structural logs not loaded: %d workers, events %v", len(r.Workers), r.Events)
	}
	failed := 0
	for _, q := range r.Requests {
		if !q.Completed {
			failed++
			if !strings.Contains(q.Cause, ": ") {
				t.Errorf("failure without cause: %+v", q)
			}
		}
	}
	if failed != r.Summary.Errors {
		t.Errorf("%d failed requests, summary says %d", failed, r.Summary.Errors)
	}
}

// TestReportLoadLargeNoSummary streams a 120K-line metrics.jsonl with no
// summary.json and no config: the summary is recomputed and the name comes
// from the folder.
func TestReportLoadLargeNoSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("large file")
	}
	dir := filepath.Join(t.TempDir(), "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	const n = 120_000
	for i := 0; i < n; i++ {
		r := metrics.Record{RequestID: fmt.Sprint(i), SessionID: fmt.Sprintf("s%d", i/10), Turn: i%10 + 1,
			InputLength: 1000, CachedTokens: 500, UncachedTokens: 500, OutputLength: 10,
			TTFTS: float64(i%100) / 10, LatencyS: float64(i%100)/10 + 1, ArrivalS: float64(i),
			ExecutionMode: "pd-disaggregation-router", DecodeWorker: fmt.Sprintf("d%d", i%4), Status: metrics.StatusCompleted}
		if i%1000 == 0 {
			r.Status, r.Error = metrics.StatusFailed, "no-space"
		}
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "big" || len(r.Requests) != n || r.Summary.Completed != n-n/1000 || r.Summary.Errors != n/1000 {
		t.Errorf("name %q, %d requests, summary completed %d errors %d", r.Name, len(r.Requests), r.Summary.Completed, r.Summary.Errors)
	}
	if r.Summary.CacheHitRatio != 0.5 {
		t.Errorf("recomputed cache hit ratio %v", r.Summary.CacheHitRatio)
	}
	name, s, err := LoadSummary(dir)
	if err != nil || name != "big" || s.Completed != r.Summary.Completed {
		t.Errorf("LoadSummary: %q %d %v", name, s.Completed, err)
	}
}

func TestReportLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil {
		t.Error("a folder without metrics.jsonl loaded")
	}
	body := `{"request_id":"a","status":"completed"}` + "\n\n" + `{"request_id": oops}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "metrics.jsonl:3") {
		t.Errorf("bad line error %v, want it to name metrics.jsonl:3", err)
	}
}

func TestReportExpandBenchFolder(t *testing.T) {
	base := t.TempDir()
	for _, m := range []string{"pd-disaggregation", "kvcache-centric"} {
		if _, err := reporttest.WriteRun(filepath.Join(base, m), reporttest.Spec{Name: m, Mechanism: m, Sessions: 2, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Expand([]string{base})
	if err != nil || len(got) != 2 || filepath.Base(got[0]) != "kvcache-centric" {
		t.Errorf("Expand without comparison.json = %v, %v (want name order)", got, err)
	}
	// bench's comparison.json order wins: its first run is the baseline.
	os.WriteFile(filepath.Join(base, "comparison.json"), []byte(`{"runs":["pd-disaggregation","kvcache-centric"]}`), 0o644)
	got, err = Expand([]string{base})
	if err != nil || len(got) != 2 || filepath.Base(got[0]) != "pd-disaggregation" {
		t.Errorf("Expand = %v, %v (want comparison.json order)", got, err)
	}
	if _, err := Expand([]string{t.TempDir()}); err == nil {
		t.Error("empty folder expanded")
	}
}
