package report

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/report/reporttest"
)

func decodeMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// simConfig is the shape of config.json that `pdhybrid sim` writes today
// (profile trimmed to the fields the report reads).
const simConfigPD = `{"name": "naive-pd-1p3d", "mechanism": "pd-disaggregation", "policy": "default",
 "prefill": 1, "decode": 3, "profile": {"name": "qwen3-30b-a3b/h200-141g",
 "model": {"name": "qwen3-30b-a3b", "layers": 48}, "hardware": {"name": "h200-141g"}},
 "link": "rdma-400g", "time_scale": 1, "concurrency": 0, "slo": {"ttft_s": 2, "tpot_s": 0.1}}`

const simConfigDP = `{"name": "dp-x4", "mechanism": "pd-colo", "policy": "sticky", "colo": 4,
 "profile": {"name": "qwen3-30b-a3b/h200-141g", "model": {"name": "qwen3-30b-a3b"},
 "hardware": {"name": "h200-141g"}}, "time_scale": 10, "concurrency": 64, "slo": {"ttft_s": 2}}`

func TestReportFactsExtract(t *testing.T) {
	cases := []struct {
		name     string
		sum, cfg string
		ws       []WorkerSeries
		want     Facts
	}{{
		name: "today's sim config, summary without the new fields",
		sum:  `{"mechanism": "pd-disaggregation", "requests": 10, "slo": {"ttft_s": 2, "tpot_s": 0.1}}`,
		cfg:  simConfigPD,
		want: Facts{Model: "qwen3-30b-a3b", Hardware: "h200-141g", GPUs: "1P3D", TimeScale: "1 (trace time)",
			MaxConcurrency: "unlimited", SLO: "TTFT ≤ 2 s, TPOT ≤ 100 ms"},
	}, {
		name: "colocated, compressed, concurrency limit",
		cfg:  simConfigDP,
		want: Facts{Model: "qwen3-30b-a3b", Hardware: "h200-141g", GPUs: "DP×4",
			TimeScale:      "10 (arrivals and think times 10× faster than the trace)",
			MaxConcurrency: "64 requests in flight", SLO: "TTFT ≤ 2 s"},
	}, {
		name: "summary fields win over the config; incomplete run",
		sum: `{"model_id": "Qwen/Qwen3-30B-A3B", "date": "20250101-120000", "request_rate": "inf",
		  "max_concurrency": null, "time_scale": 2, "workload": "claude-code-synth (seed 2)",
		  "slo": {"ttft_ms": 300, "tpot_ms": 50}, "complete": false, "stop_reason": "interrupted (SIGINT)",
		  "pdhybrid_version": "v0.3.0"}`,
		cfg: simConfigDP,
		want: Facts{Model: "Qwen/Qwen3-30B-A3B", Hardware: "h200-141g", GPUs: "DP×4", Workload: "claude-code-synth (seed 2)",
			TimeScale: "2 (arrivals and think times 2× faster than the trace)", RequestRate: "inf",
			MaxConcurrency: "unlimited", SLO: "TTFT ≤ 300 ms, TPOT ≤ 50 ms", Date: "20250101-120000",
			Version: "v0.3.0", Incomplete: true, StopReason: "interrupted (SIGINT)"},
	}, {
		name: "workload object, numeric rate, unknown SLO key, complete run",
		sum: `{"workload": {"name": "trace.jsonl", "requests": 500}, "request_rate": 2.5,
		  "slo": {"ttft_s": 0, "goodput_window_s": 60}, "complete": true}`,
		want: Facts{Workload: "trace.jsonl (requests: 500)", RequestRate: "2.5 req/s", SLO: "goodput_window_s: 60"},
	}, {
		name: "nothing recorded; GPUs from the occupancy log",
		ws:   []WorkerSeries{{Role: "prefill"}, {Role: "prefill"}, {Role: "decode"}, {Role: "decode"}, {Role: "decode"}, {Role: "decode"}},
		want: Facts{GPUs: "2P4D"},
	}, {
		name: "empty SLO object",
		sum:  `{"slo": {}}`,
		want: Facts{SLO: "none (every completed request counts)"},
	}}
	for _, c := range cases {
		var sum, cfg map[string]any
		if c.sum != "" {
			sum = decodeMap(t, c.sum)
		}
		if c.cfg != "" {
			cfg = decodeMap(t, c.cfg)
		}
		if got := ExtractFacts(sum, cfg, c.ws); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestReportFactRows(t *testing.T) {
	rows := FactRows([]Facts{
		{Model: "m", GPUs: "1P3D", SLO: "TTFT ≤ 2 s"},
		{Model: "m", GPUs: "DP×4", SLO: "TTFT ≤ 2 s"},
		{Model: "m", GPUs: "DP×4"},
	})
	by := map[string]FactRow{}
	for _, r := range rows {
		by[r.Key] = r
	}
	if len(rows) != len(factFields) {
		t.Fatalf("%d rows, want %d", len(rows), len(factFields))
	}
	if r := by["model"]; !r.Same || r.Value != "m" {
		t.Errorf("model: %+v", r)
	}
	if r := by["gpus"]; r.Same || !reflect.DeepEqual(r.PerRun, []string{"1P3D", "DP×4", "DP×4"}) {
		t.Errorf("gpus: %+v", r)
	}
	if r := by["slo"]; r.Same || r.PerRun[2] != "" {
		t.Errorf("a run without an SLO differs from runs with one: %+v", r)
	}
	if r := by["date"]; !r.Same || r.Value != "" {
		t.Errorf("date unknown everywhere: %+v", r)
	}
}

// TestReportLoadFacts reads facts through Load from written run folders,
// including a summary.json field the summary type does not know, with a
// shape the loader must not choke on.
func TestReportLoadFacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, err := reporttest.WriteRun(dir, reporttest.Spec{Name: "r", Mechanism: reporttest.NaivePD, Sessions: 3, Seed: 1,
		Summary: map[string]any{"model_id": "qwen3-30b-a3b", "complete": false, "stop_reason": "interrupted",
			"time_scale": 10, "future_field": map[string]any{"nested": []int{1}}},
		Config: map[string]any{"prefill": 1, "decode": 3}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Facts
	if f.Model != "qwen3-30b-a3b" || f.GPUs != "1P3D" || !f.Incomplete || f.StopReason != "interrupted" || !strings.HasPrefix(f.TimeScale, "10 (") {
		t.Errorf("facts %+v", f)
	}
	if f.SLO != "TTFT ≤ 30 s" {
		t.Errorf("SLO %q, want the summary's", f.SLO)
	}
}

func TestReportBuildVersion(t *testing.T) {
	old := Version
	defer func() { Version = old }()
	Version = "v9.9.9"
	if v := BuildVersion(); v != "v9.9.9" {
		t.Errorf("BuildVersion() = %q with Version set", v)
	}
	Version = ""
	if v := BuildVersion(); v == "" {
		t.Error("BuildVersion() is empty")
	}
}

// A KVC run's facts say its preset, so a v3 run never reads as a v2 one.
func TestReportFactsPreset(t *testing.T) {
	cfg := decodeMap(t, `{"mechanism": "kvcache-centric", "kvc": {"v3": {"preset": "v3"}}}`)
	if f := ExtractFacts(nil, cfg, nil); f.KVCPreset != "v3" {
		t.Errorf("preset %q, want v3", f.KVCPreset)
	}
	if f := ExtractFacts(nil, decodeMap(t, `{"mechanism": "kvcache-centric", "kvc": {}}`), nil); f.KVCPreset != "v2" {
		t.Errorf("preset %q, want v2 for a run without one", f.KVCPreset)
	}
	if f := ExtractFacts(nil, decodeMap(t, `{"mechanism": "pd-colo"}`), nil); f.KVCPreset != "" {
		t.Errorf("preset %q for DP, want none", f.KVCPreset)
	}
}
