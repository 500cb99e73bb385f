package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A run's folder and its end: --out refuses a folder holding a run unless
// --force, an interrupt leaves the run marked incomplete or removes what it
// had only begun, a failed write fails the command, and summary.json says
// what ran.

// TestOutRefusesAndForceReplaces: --out into a folder holding a run
// refuses; --force replaces only pdhybrid's files; a folder that is not a
// run is never cleared.
func TestOutRefusesAndForceReplaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, se, err := runCLI("sim", "--synth-sessions", "2", "--out", dir); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	_, se, err := runCLI("sim", "--synth-sessions", "3", "--out", dir)
	if exitCode(err) != exitUsage || !strings.Contains(se, "already holds a run") || !strings.Contains(se, "--force") {
		t.Fatalf("second run into the folder: %v\n%s", err, se)
	}
	mine := filepath.Join(dir, "notes.txt")
	os.WriteFile(mine, []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "structural", "stale.jsonl"), []byte("x"), 0o644)
	if _, se, err := runCLI("sim", "--synth-sessions", "3", "--out", dir, "--force"); err != nil {
		t.Fatalf("--force: %v\n%s", err, se)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Error("--force removed a file pdhybrid did not write")
	}
	var sum struct{ Requests int }
	json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum)
	if n := bytes.Count(mustRead(t, filepath.Join(dir, "metrics.jsonl")), []byte("\n")); n != sum.Requests {
		t.Errorf("metrics.jsonl has %d lines for %d requests: runs mixed", n, sum.Requests)
	}

	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "thesis.tex"), []byte("x"), 0o644)
	for _, cmd := range []string{"sim", "bench"} {
		if _, se, err := runCLI(cmd, "--synth-sessions", "2", "--out", other, "--force"); exitCode(err) != exitUsage || !strings.Contains(se, "holds no pdhybrid") {
			t.Errorf("%s --force into a foreign folder: %v\n%s", cmd, err, se)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "thesis.tex")); err != nil {
		t.Fatal("a foreign folder was cleared")
	}

	// bench --force removes every run folder of the old bench output, so a
	// report on the folder never mixes in a stale run.
	bdir := filepath.Join(t.TempDir(), "b")
	if _, se, err := runCLI("bench", "--synth-sessions", "2", "--dp-policy", "sticky,kv-aware", "--out", bdir); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	if _, _, err := runCLI("bench", "--synth-sessions", "2", "--out", bdir); exitCode(err) != exitUsage {
		t.Fatalf("bench into a bench folder: %v", err)
	}
	if _, se, err := runCLI("bench", "--synth-sessions", "2", "--out", bdir, "--force"); err != nil {
		t.Fatalf("bench --force: %v\n%s", err, se)
	}
	ents, _ := os.ReadDir(bdir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"comparison.json", "dp-x4", "kvc-v3-1p3d", "naive-pd-1p3d", "report"}; !reflect.DeepEqual(names, want) {
		t.Errorf("bench folder after --force holds %v, want %v", names, want)
	}
}

// TestInterruptMarksRunIncomplete runs pdhybrid as a process on a long
// run, sends SIGINT once it has started, and expects a prompt exit 130 with
// a run folder marked incomplete that report labels.
func TestInterruptMarksRunIncomplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	c := pdhybrid(t, "sim", "--synth-requests", "1000000", "--out", dir)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "the run never started", func() bool {
		_, err := os.Stat(filepath.Join(dir, "metrics.jsonl"))
		return err == nil
	})
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	interruptAndWait(t, c, &stderr)
	t.Logf("stopped %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	var sum struct {
		Complete   *bool  `json:"complete"`
		StopReason string `json:"stop_reason"`
		Requests   int    `json:"requests"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Complete == nil || *sum.Complete || sum.StopReason != "interrupted by SIGINT" {
		t.Fatalf("summary complete=%v stop_reason=%q", sum.Complete, sum.StopReason)
	}
	if !strings.Contains(stderr.String(), "interrupted by SIGINT") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
	if sum.Requests > 0 {
		out, _, err := runCLI("report", "--compare", dir)
		if err != nil || !strings.Contains(out, "INCOMPLETE") {
			t.Errorf("report does not label the run: %v\n%s", err, out)
		}
	}
}

// TestWriteErrorsFail: output that cannot be written (a full disk) is a
// failure, not a silent success.
func TestWriteErrorsFail(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	tr := smallTrace(t)
	for _, args := range [][]string{
		{"trace", "stats", tr},
		{"trace", "validate", tr},
		{"trace", "synth", "small-append"},
		{"sim", "--trace", tr, "--mechanism", "pd-colo"},
		{"--help"},
	} {
		c := pdhybrid(t, args...)
		c.Stdout = full
		var stderr bytes.Buffer
		c.Stderr = &stderr
		c.Run()
		if code := c.ProcessState.ExitCode(); code != exitError || !strings.Contains(stderr.String(), "no space left") {
			t.Errorf("%v > /dev/full: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestSummaryDescribesTheRun: summary.json carries what users compare with
// other tools; failed requests have null latencies; no ITL without gaps.
func TestSummaryDescribesTheRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, se, err := runCLI("sim", "--synth-sessions", "3", "--concurrency", "4", "--time-scale", "2", "--max-input-len", "100000",
		"--goodput", "ttft:300", "tpot:50", "--out", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	var sum map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, sum["date"].(string)); err != nil {
		t.Errorf("date %v: %v", sum["date"], err)
	}
	for k, want := range map[string]any{
		"complete": true, "model_id": "qwen3-30b-a3b", "hardware": "h200-141g", "max_concurrency": 4.0, "time_scale": 2.0,
		"slo": map[string]any{"ttft_s": 0.3, "tpot_s": 0.05},
	} {
		if !reflect.DeepEqual(sum[k], want) {
			t.Errorf("%s = %v, want %v", k, sum[k], want)
		}
	}
	if r, _ := sum["request_rate"].(float64); r <= 0 {
		t.Errorf("request_rate %v", sum["request_rate"])
	}
	if w, _ := sum["workload"].(string); !strings.Contains(w, "built-in agentic workload") {
		t.Errorf("workload %q", w)
	}
	if _, ok := sum["sim_duration_s"]; ok {
		t.Error("summary has sim_duration_s besides duration")
	}
	// ITL comes from the engine's inter-token gaps, not from TPOT.
	same := 0
	for _, q := range []string{"mean", "p50", "p90", "p99"} {
		itl, ok := sum[q+"_itl_ms"].(float64)
		if !ok || itl <= 0 {
			t.Errorf("%s_itl_ms = %v, want a positive gap", q, sum[q+"_itl_ms"])
		}
		if itl == sum[q+"_tpot_ms"] {
			same++
		}
	}
	if same == 4 {
		t.Error("ITL equals TPOT at every statistic: a copy, not inter-token gaps")
	}
	if strings.Count(string(mustRead(t, filepath.Join(dir, "summary.json"))), "duration") != 1 {
		t.Error("summary.json has more than one duration")
	}
	failed := 0
	for _, line := range bytes.Split(mustRead(t, filepath.Join(dir, "metrics.jsonl")), []byte("\n")) {
		if bytes.Contains(line, []byte(`"status":"failed"`)) {
			failed++
			if !bytes.Contains(line, []byte(`"ttft_s":null`)) || !bytes.Contains(line, []byte(`"latency_s":null`)) {
				t.Fatalf("failed request with latencies: %s", line)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failed request to check (--max-input-len 100000 should fail the long prompts)")
	}
}

// TestInterruptRemovesPartialOutput: an interrupted trace writer exits 130
// and leaves no truncated file that looks whole (SIGTERM this time).
func TestInterruptRemovesPartialOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "big.jsonl")
	c := pdhybrid(t, "trace", "synth", "agentic", "--requests", "100000000", "--out", out)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "nothing written", func() bool {
		st, err := os.Stat(out)
		return err == nil && st.Size() > 0
	})
	signalAndWait(t, c, syscall.SIGTERM, &stderr)
	if !strings.Contains(stderr.String(), "interrupted by SIGTERM") {
		t.Fatalf("stderr %q", stderr.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("partial output left behind")
	}
}

// interruptAndWait sends c SIGINT and waits (up to 20 s) for it to exit
// with the interrupted status, 130.
func interruptAndWait(t *testing.T, c *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	signalAndWait(t, c, syscall.SIGINT, stderr)
}

// signalAndWait sends c sig and waits (up to 60 s) for it to exit with the
// interrupted status, 130.
func signalAndWait(t *testing.T, c *exec.Cmd, sig os.Signal, stderr *bytes.Buffer) {
	t.Helper()
	t.Logf("sent %v; waiting for the process to stop with status 130", sig)
	c.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a bound, not a figure: a loaded 2-core machine is slow to stop too
		c.Process.Kill()
		t.Fatalf("no exit within 60 s of %v", sig)
	}
	if code := c.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\n%s", code, stderr.String())
	}
}

// waitFor polls ready until it holds, for at most 60 s (a bound for a
// loaded machine, not a figure); then it kills the process c and fails the
// test with why.
func waitFor(t *testing.T, c *exec.Cmd, why string, ready func() bool) {
	t.Helper()
	t.Logf("waiting until not: %s", why)
	for deadline := time.Now().Add(60 * time.Second); !ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal(why)
		}
	}
}
