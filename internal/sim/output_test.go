package sim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// TestSummaryFileKeepsWorkersAndReplay: summary.json carries the
// summary's fields and also "workers" and "replay", though the embedded
// Summary has a MarshalJSON of its own that would otherwise be promoted.
func TestSummaryFileKeepsWorkersAndReplay(t *testing.T) {
	f := summaryFile{metrics.Summary{Mechanism: "pd-colo"}, map[string]WorkerStats{"decode-0": {}}, ReplayStats{}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for _, k := range []string{"mechanism", "workers", "replay", "p99_ttft_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary.json has no %q: %s", k, b)
		}
	}
	if string(m["p99_ttft_ms"]) != "null" {
		t.Errorf("p99_ttft_ms over no request = %s, want null", m["p99_ttft_ms"])
	}
	dir := t.TempDir()
	if err := WriteRunFiles(dir, Config{}, &Result{Workers: f.Workers}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil || m["workers"] == nil {
		t.Fatalf("summary.json written without workers (%v): %s", err, raw)
	}
}
