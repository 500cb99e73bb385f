package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

func runCLI(args ...string) (string, string, error) { return runCLIIn("", args...) }

// runCLIIn runs a command line in-process with stdin as standard input;
// stderr ends with the error message as pdhybrid prints it.
func runCLIIn(stdin string, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, now: time.Now}
	path, err := execute(context.Background(), e, args)
	reportError(&errb, path, err)
	return out.String(), errb.String(), err
}

// TestBenchDefault is the README's main job: no flags, both mechanisms, a
// side-by-side table on stdout.
func TestBenchDefault(t *testing.T) {
	out, stderr, err := runCLI("bench")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	for _, want := range []string{"naive-pd-1p3d", "dp-x4", "kvc-v3-1p3d", "TTFT p99", "pd-disaggregation-router", "dp-colo-router", "kvcache-direct-to-d-session", "latency floor", "verdict (", "kvc-v3-1p3d vs best other ("} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "built-in agentic workload") {
		t.Fatalf("bench does not say what it ran:\n%s", stderr)
	}
}

// TestBenchPeers: --peers adds a run per peer baseline on the naive-PD
// cluster, each with its own execution modes, and takes a subset.
func TestBenchPeers(t *testing.T) {
	out, stderr, err := runCLI("bench", "--synth-sessions", "3", "--peers", "all")
	if err != nil {
		t.Fatalf("bench --peers all: %v\n%s", err, stderr)
	}
	for _, want := range []string{"pd-conditional-1p3d", "pd-prefix-decider-1p3d", "pd-decode-radix-1p3d", "pd-ppd-1p3d", "pd-deflect-1p3d",
		"pd-conditional-local-prefill-on-d", "pd-decode-radix-delta-router", "pd-ppd-turn1-router", "8 runs"} {
		if !strings.Contains(out+stderr, want) {
			t.Fatalf("bench --peers all lacks %q:\n%s\n%s", want, out, stderr)
		}
	}
	out, stderr, err = runCLI("bench", "--synth-sessions", "3", "--kvc-policy", "none", "--peers", "pd-decode-radix",
		"--decider-non-cached-tokens", "16")
	if exitCode(err) != exitUsage || !strings.Contains(stderr, "--decider-non-cached-tokens") {
		t.Fatalf("a decider flag without the decider: exit %d\n%s", exitCode(err), stderr)
	}
	out, stderr, err = runCLI("bench", "--synth-sessions", "3", "--kvc-policy", "none", "--peers", "pd-decode-radix")
	if err != nil || !strings.Contains(out, "pd-decode-radix-1p3d") || strings.Contains(out, "pd-conditional-1p3d") || !strings.Contains(stderr, "3 runs") {
		t.Fatalf("bench --peers pd-decode-radix: %v\n%s\n%s", err, out, stderr)
	}
}

// TestBenchOutFolders: -out writes a run folder per mechanism that report
// can read, and comparison.json.
func TestBenchOutFolders(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, err := runCLI("bench", "-synth-sessions", "6", "-out", dir, "-format", "json"); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	for _, run := range []string{"naive-pd-1p3d", "dp-x4", "kvc-v3-1p3d"} {
		for _, f := range []string{"metrics.jsonl", "summary.json", "config.json", "structural/workers.jsonl", "structural/session-d-binding.jsonl"} {
			if st, err := os.Stat(filepath.Join(dir, run, f)); err != nil || st.Size() == 0 {
				t.Fatalf("%s/%s missing or empty (%v)", run, f, err)
			}
		}
		var sum metrics.Summary
		b, _ := os.ReadFile(filepath.Join(dir, run, "summary.json"))
		if err := json.Unmarshal(b, &sum); err != nil || sum.Requests == 0 {
			t.Fatalf("%s summary: %v %+v", run, err, sum)
		}
		lines := bytes.Count(mustRead(t, filepath.Join(dir, run, "metrics.jsonl")), []byte("\n"))
		if lines != sum.Requests {
			t.Fatalf("%s: %d metrics lines for %d requests", run, lines, sum.Requests)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "report", "index.html")); err != nil || st.Size() < 10000 {
		t.Fatalf("bench -out wrote no HTML report (%v)", err)
	}
	var cmp struct {
		Runs      []string `json:"runs"`
		Summaries []struct {
			P50TTFTMs float64 `json:"p50_ttft_ms"`
		} `json:"summaries"`
		Floor struct {
			TTFT struct{ P50 float64 } `json:"ttft_s"`
		} `json:"latency_floor"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "comparison.json")), &cmp); err != nil || len(cmp.Runs) != 3 {
		t.Fatalf("comparison.json: %v %+v", err, cmp)
	}
	// The workload's latency floor is there, and no run is below it.
	for i, s := range cmp.Summaries {
		if f := cmp.Floor.TTFT.P50; f <= 0 || s.P50TTFTMs/1e3 < f {
			t.Fatalf("%s: TTFT p50 %v ms against the floor's %v s", cmp.Runs[i], s.P50TTFTMs, f)
		}
	}
	if out, stderr, err := runCLI("report", "--compare", dir); err != nil || !strings.Contains(out, "dp-x4") {
		t.Fatalf("report on bench output: %v\n%s%s", err, out, stderr)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSimOnTraceFile replays a generated trace file and checks the run
// folder accounts for every request.
func TestSimOnTraceFile(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl")
	if _, stderr, err := runCLI("trace", "synth", "small-append", "--out", tr); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	out := filepath.Join(dir, "run")
	stdout, stderr, err := runCLI("sim", "-trace", tr, "-mechanism", "pd-colo", "-colo", "2", "-policy", "sticky", "-out", out)
	if err != nil {
		t.Fatalf("sim: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "pd-colo/sticky") {
		t.Fatalf("sim table:\n%s", stdout)
	}
	var cfg map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "config.json")), &cfg); err != nil || cfg["mechanism"] != "pd-colo" || cfg["colo"] != 2.0 {
		t.Fatalf("config.json: %v %v", err, cfg)
	}
	if n := bytes.Count(mustRead(t, filepath.Join(out, "metrics.jsonl")), []byte("\n")); n != 160 {
		t.Fatalf("%d metrics lines, want the small-append default's 160", n)
	}
}

func TestSimUsageErrors(t *testing.T) {
	headerless := filepath.Join(t.TempDir(), "h.jsonl")
	os.WriteFile(headerless, []byte(`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":10,"output_length":2,"hash_ids":[1]}`+"\n"), 0o644)
	for _, args := range [][]string{
		{"sim", "-mechanism", "nope"},
		{"sim", "-policy", "nope"},
		{"sim", "extra-arg"},
		{"sim", "-trace", headerless},
		{"bench", "-gpus", "1"},
	} {
		_, _, err := runCLI(args...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
	if _, _, err := runCLI("sim", "-trace", "/nonexistent/trace.jsonl"); err == nil {
		t.Error("missing trace file accepted")
	}
}

// TestSimHelpExplainsEveryFlag: --help lists each flag with its default.
func TestSimHelpExplainsEveryFlag(t *testing.T) {
	for _, cmd := range []string{"sim", "bench"} {
		stderr, _, err := runCLI(cmd, "--help") // the page goes to stdout
		if err != nil {
			t.Fatalf("%s --help: %v", cmd, err)
		}
		for _, f := range []string{"--trace", "--time-scale", "--concurrency", "--timeout", "--max-input-len", "--chunk-tokens", "--goodput", "--profile", "--link", "--out", "--force"} {
			if !strings.Contains(stderr, f) {
				t.Errorf("%s --help does not explain %s", cmd, f)
			}
		}
		if !strings.Contains(stderr, "default") || !strings.Contains(stderr, "seconds") {
			t.Errorf("%s --help gives no defaults or units:\n%s", cmd, stderr)
		}
	}
}

// TestProfileDumpAndLoad: a dumped profile loads back and drives a run.
func TestProfileDumpAndLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.json")
	if _, stderr, err := runCLI("sim", "-hardware", "h100-80g", "-dump-profile", p); err != nil {
		t.Fatalf("dump: %v\n%s", err, stderr)
	}
	if !bytes.Contains(mustRead(t, p), []byte(`"h100-80g"`)) {
		t.Fatal("dumped profile is not the H100 one")
	}
	if _, stderr, err := runCLI("sim", "-profile", p, "-synth-sessions", "2"); err != nil {
		t.Fatalf("sim with dumped profile: %v\n%s", err, stderr)
	}
	os.WriteFile(p, []byte(`{"name":"x","timing":{"prefil_per_token_s":1}}`), 0o644)
	if _, _, err := runCLI("sim", "-profile", p); err == nil {
		t.Fatal("misspelt profile field accepted")
	}
}

// TestBenchPolicyLists: a comma list of policies gives one run each.
func TestBenchPolicyLists(t *testing.T) {
	out, stderr, err := runCLI("bench", "-synth-sessions", "4", "-dp-policy", "sticky,kv-aware", "-format", "csv")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	for _, want := range []string{"naive-pd-1p3d", "dp-x4-sticky", "dp-x4-kv-aware"} {
		if !strings.Contains(out, want) {
			t.Fatalf("csv lacks run %s:\n%s", want, out)
		}
	}
	if _, _, err := runCLI("bench", "-dp-policy", "sticky,nope"); err == nil {
		t.Fatal("unknown policy in a list accepted")
	}
}

// A run in which no request completed is no success: sim and replay exit
// 1 and say why, and the table shows "—" for every latency, not 0.
func TestNoneCompletedExitsOne(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(tr, []byte(`{"pdhybrid_trace":1,"block_size":64}
{"session_id":"s0","chat_id":0,"parent_chat_id":-1,"turn":1,"timestamp":0,"input_length":128,"output_length":4,"hash_ids":[1,2]}
`), 0o644)
	for _, args := range [][]string{
		{"sim", "--trace", tr, "--max-input-len", "64"},
		{"replay", "--url", "http://127.0.0.1:1", "--trace", tr},
	} {
		out, stderr, err := runCLI(args...)
		if err == nil || exitCode(err) != exitError || !strings.Contains(stderr, "no request completed") {
			t.Errorf("%s: %v (exit %d), want exit 1 saying no request completed\n%s", args[0], err, exitCode(err), stderr)
		}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(l, "  TTFT p99") && f[len(f)-1] != "—" {
				t.Errorf("%s: %q, want —", args[0], l)
			}
		}
	}
}
