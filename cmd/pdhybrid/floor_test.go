package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The floor of a built-in workload comes out as JSON, with the p50 below
// what the same workload's simulation reports for DP (the floor is a
// floor), and a trace on standard input is refused: the floor reads it
// twice.
func TestFloorCommand(t *testing.T) {
	out, stderr, err := runCLI("floor", "--workload", "seed-swe", "--json")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	var got struct {
		Requests int                        `json:"requests"`
		TTFT     struct{ P50, P99 float64 } `json:"ttft_s"`
		E2E      struct{ P50 float64 }      `json:"e2e_s"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Requests == 0 || got.TTFT.P50 <= 0 || got.TTFT.P99 < got.TTFT.P50 || got.E2E.P50 <= got.TTFT.P50 {
		t.Fatalf("floor %+v", got)
	}
	dir := t.TempDir() + "/dp"
	if _, stderr, err := runCLI("sim", "--workload", "seed-swe", "--mechanism", "pd-colo", "--policy", "sticky", "--out", dir); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	b, err := os.ReadFile(dir + "/summary.json")
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		P50 float64 `json:"p50_ttft_ms"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if dp := sum.P50 / 1e3; dp < got.TTFT.P50 {
		t.Fatalf("DP's TTFT p50 %v s is below the floor's %v s", dp, got.TTFT.P50)
	}
	_, stderr, err = runCLI("floor", "--trace", "-")
	if err == nil || !strings.Contains(stderr, "--trace -") {
		t.Fatalf("floor --trace -: %v %s", err, stderr)
	}
}
