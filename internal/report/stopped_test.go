package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// TestStoppedRunsLabelled: a run that stopped early is named incomplete,
// with its reason, in every table format; a summary.json from before the
// field existed reads as complete.
func TestStoppedRunsLabelled(t *testing.T) {
	names, sums := seedSummaries()
	sums[1].StopReason = "interrupted by SIGINT"
	for format, want := range map[string]string{
		"text": "INCOMPLETE: E4 KVC stopped early (interrupted by SIGINT)",
		"csv":  "run,stop_reason,text,E4 KVC,interrupted by SIGINT",
		"json": `"stop_reasons": [`,
	} {
		var b bytes.Buffer
		if err := WriteTable(&b, format, names, sums); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s lacks %q:\n%s", format, want, b.String())
		}
		if strings.Contains(b.String(), "INCOMPLETE: E1") || strings.Contains(b.String(), "stop_reason,text,E1") {
			t.Errorf("%s labels the complete run", format)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"requests": 3, "completed": 3}`), 0o644)
	_, old, err := LoadSummary(dir)
	if err != nil || !old.Complete || old.Stopped() {
		t.Fatalf("old summary: %+v %v", old, err)
	}
}

// TestLoadReadsNullLatencies: metrics.jsonl lines of unfinished requests
// carry null latencies now and numbers before; both load.
func TestLoadReadsNullLatencies(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	for _, r := range []metrics.Record{
		{RequestID: "1", SessionID: "s", Turn: 1, Status: metrics.StatusCompleted, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.1, OutputLength: 16},
		{RequestID: "2", SessionID: "s", Turn: 2, Status: metrics.StatusTimeout, LatencyS: 30, Error: "timeout: x"},
	} {
		line, _ := json.Marshal(r)
		b.Write(append(line, '\n'))
	}
	b.WriteString(`{"request_id":"3","session_id":"t","turn":1,"status":"failed","error":"no-space: x","ttft_s":0,"latency_s":4,"tpot_s":0}` + "\n")
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), b.Bytes(), 0o644)
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Requests) != 3 || r.Summary.Completed != 1 || r.Summary.Errors != 2 || r.Summary.TTFTStats.Count != 1 {
		t.Fatalf("loaded %d requests, summary %+v", len(r.Requests), r.Summary)
	}
	_, s, err := LoadSummary(dir)
	if err != nil || s.Errors != 2 || s.DurationS != 30 {
		t.Fatalf("summary from records: %+v %v", s, err)
	}
}
