package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// seedSummaries are the seed's E1-vs-E4 headline numbers (004 notes, §7),
// so the table reads like the comparison people already know.
func seedSummaries() ([]string, []metrics.Summary) {
	a := metrics.Summary{Requests: 1285, Completed: 1200, Errors: 85,
		FailureCauses:     map[string]int{"failed: no-space": 80, "timeout: request timeout": 5},
		TTFTStats:         metrics.Stats{Mean: 90.484, P50: 88.545, P90: 175.178, P99: 207.426},
		TPOTStats:         metrics.Stats{Mean: 0.02, P50: 0.019, P90: 0.03, P99: 0.05},
		LatencyStats:      metrics.Stats{Mean: 96.339, P50: 93.166, P90: 180.738, P99: 219.462},
		RequestThroughput: 0.227, OutputThroughput: 80.5, RequestGoodput: 0.1,
		CacheHitRatio: 0.21, CacheHitRequests: 900, DurationS: 5280,
		ExecutionModes: map[string]int{"pd-disaggregation-router": 1285}}
	b := metrics.Summary{Requests: 1285, Completed: 1130, Errors: 155,
		FailureCauses:     map[string]int{"failed: no-space": 150, "failed: no-d-capacity": 5},
		TTFTStats:         metrics.Stats{Mean: 58.831, P50: 31.028, P90: 158.920, P99: 224.769},
		TPOTStats:         metrics.Stats{Mean: 0.021, P50: 0.018, P90: 0.031, P99: 0.06},
		LatencyStats:      metrics.Stats{Mean: 63.870, P50: 37.117, P90: 164.742, P99: 233.808},
		RequestThroughput: 0.294, OutputThroughput: 100.1, RequestGoodput: 0.2,
		CacheHitRatio: 0.52, CacheHitRequests: 1000, DirectToDShare: 0.0646, DurationS: 3840,
		ExecutionModes: map[string]int{"kvcache-direct-to-d-session": 73, "pd-router-fallback-no-d-capacity": 162}}
	return []string{"E1 naive PD", "E4 KVC"}, []metrics.Summary{a, b}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestReportTableFormats(t *testing.T) {
	names, sums := seedSummaries()
	for _, f := range []string{"text", "csv", "json"} {
		var b bytes.Buffer
		if err := WriteTable(&b, f, names, sums); err != nil {
			t.Fatal(err)
		}
		golden(t, "table."+f, b.Bytes())
	}
}

func TestReportTableSemantics(t *testing.T) {
	names, sums := seedSummaries()
	var b bytes.Buffer
	if err := WriteTable(&b, "text", names, sums); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"TTFT p50", "-65.0%", "+8.4%", "+31.0pp", "failed: no-space", "kvcache-direct-to-d-session"} {
		if !strings.Contains(text, want) {
			t.Errorf("text table lacks %q", want)
		}
	}
	// Columns line up: every headline line is as wide as the header.
	lines := strings.Split(text, "\n")
	for _, l := range lines[2:25] {
		if len([]rune(l)) != len([]rune(lines[2])) {
			t.Errorf("misaligned line %q", l)
		}
	}

	b.Reset()
	if err := WriteTable(&b, "csv", names, sums); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r[0] == "headline" && r[1] == "ttft_p99" && r[3] == "E4 KVC" {
			found = r[4] == "224.769" && strings.HasPrefix(r[5], "0.0836") && r[6] == "relative"
		}
	}
	if !found {
		t.Error("csv lacks the E4 ttft_p99 row with its relative delta")
	}

	b.Reset()
	if err := WriteTable(&b, "json", names, sums); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Baseline string
		Headline []struct {
			Metric    string
			Values    []float64
			Deltas    []*float64
			DeltaUnit string `json:"delta_unit"`
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Headline {
		if r.Deltas[0] != nil {
			t.Errorf("%s: baseline delta should be null", r.Metric)
		}
		if r.Metric == "cache_hit_ratio" && (r.DeltaUnit != "absolute" || *r.Deltas[1] < 0.309 || *r.Deltas[1] > 0.311) {
			t.Errorf("cache_hit_ratio delta %v %s", *r.Deltas[1], r.DeltaUnit)
		}
	}

	if err := WriteTable(&b, "yaml", names, sums); err == nil {
		t.Error("unknown format accepted")
	}
	if err := WriteTable(&b, "text", names[:1], sums); err == nil {
		t.Error("name/summary count mismatch accepted")
	}
}

// A run where no request completed shows "—" for its latencies (and null
// in JSON, an empty cell in CSV), never 0, and no delta against it.
func TestReportTableEmptyRun(t *testing.T) {
	ok := metrics.Summary{Requests: 2, Completed: 2, TTFTStats: metrics.Stats{Count: 2, P50: 0.5, P99: 0.9}}
	empty := metrics.Summary{Requests: 2, Failures: 2, Errors: 2}
	var b bytes.Buffer
	if err := WriteTable(&b, "text", []string{"a", "b"}, []metrics.Summary{ok, empty}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "TTFT p99") {
			if f := strings.Fields(l); len(f) != 5 || f[3] != "—" || f[4] != "—" {
				t.Errorf("TTFT p99 row %q, want the empty run's value and delta as —", l)
			}
		}
	}
	b.Reset()
	if err := WriteTable(&b, "json", []string{"a", "b"}, []metrics.Summary{ok, empty}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Headline []struct {
			Metric string
			Values []*float64
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Headline {
		if r.Metric == "ttft_p99" && (r.Values[0] == nil || r.Values[1] != nil) {
			t.Errorf("ttft_p99 values %v, want a number then null", r.Values)
		}
	}
}
