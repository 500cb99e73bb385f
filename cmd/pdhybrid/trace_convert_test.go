package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace/stats"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

const wekaFixture = `{"id":"w1","block_size":4,"tool_tokens":4,"system_tokens":4,"requests":[
 {"t":0,"type":"n","in":10,"out":3,"hash_ids":[1,2],"api_time":2,"think_time":0},
 {"t":5,"type":"subagent","agent_id":"x","duration_ms":2000,"requests":[
   {"t":0,"type":"n","in":8,"out":1,"hash_ids":[7,8],"api_time":1,"think_time":0}]},
 {"t":9,"type":"n","in":13,"out":4,"hash_ids":[1,2,3],"api_time":1,"think_time":7}]}`

func wekaDir(t *testing.T) string {
	dir := t.TempDir()
	for i, body := range []string{wekaFixture, strings.ReplaceAll(wekaFixture, `"w1"`, `"w2"`)} {
		if err := os.WriteFile(filepath.Join(dir, "trace_"+string(rune('a'+i))+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "LICENSE"), []byte("not json"), 0o644)
	return dir
}

func statsJSON(t *testing.T, args ...string) stats.Report {
	t.Helper()
	out, stderr, err := runCLI(append([]string{"trace", "stats", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("stats %v: %v\n%s", args, err, stderr)
	}
	var rep stats.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stats --json output: %v\n%s", err, out)
	}
	return rep
}

// TestConvertStatsRoundTrip: convert → write → read → stats gives the same
// report as stats on the converted stream, and re-converting the canonical
// file (pass-through) reproduces it byte for byte.
func TestConvertStatsRoundTrip(t *testing.T) {
	dir := wekaDir(t)
	out := filepath.Join(t.TempDir(), "w.jsonl")
	_, stderr, err := runCLI("trace", "convert", "--from", "weka", "--shared-prefix", "--out", out, dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "2 sessions, 2 sub-agent sessions, 6 requests") || !strings.Contains(stderr, "skipped 0 records") {
		t.Fatalf("stderr: %s", stderr)
	}
	direct := statsJSON(t, "--shared-prefix", dir)
	fromFile := statsJSON(t, out)
	if direct != fromFile {
		t.Fatalf("stats differ:\n%+v\n%+v", direct, fromFile)
	}
	if fromFile.Requests != 6 || fromFile.Sessions != 4 || fromFile.BlockSize != 4 || fromFile.CrossSessionHitBlocks == 0 {
		t.Fatalf("report %+v", fromFile)
	}
	again := filepath.Join(t.TempDir(), "again.jsonl")
	if _, stderr, err := runCLI("trace", "convert", "--from", "canonical", "--out", again, out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatalf("pass-through changed the file:\n%s\n%s", a, b)
	}
	if o, _, err := runCLI("trace", "validate", out); err != nil || !strings.Contains(o, "valid") {
		t.Fatalf("validate: %v\n%s", err, o)
	}
}

func TestConvertStrictWritesNothing(t *testing.T) {
	dir := wekaDir(t)
	os.WriteFile(filepath.Join(dir, "trace_z.json"), []byte(`{"block_size":4,"requests":[{"t":1}]}`), 0o644)
	out := filepath.Join(t.TempDir(), "w.jsonl")
	_, stderr, err := runCLI("trace", "convert", "--from", "weka", "--strict", "--out", out, dir)
	if err == nil || !strings.Contains(stderr, "trace_z.json: requests[0]: missing in") {
		t.Fatalf("err %v stderr %s", err, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("--strict left an output file")
	}
	// Without --strict the skip is counted and reported.
	_, stderr, err = runCLI("trace", "convert", "--from", "weka", "--out", out, dir)
	if err != nil || !strings.Contains(stderr, "skipped 1 records") {
		t.Fatalf("err %v stderr %s", err, stderr)
	}
}

func TestTraceUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"convert", "x"},
		{"convert", "--from", "nope", "x"},
		{"convert", "--from", "weka"},
		{"convert", "--from", "weka", "--arrival", "uniform", "x"},
		{"stats"},
		{"sample", "--long", "keep", "x"},
		{"validate"},
	} {
		_, _, err := runCLI(append([]string{"trace"}, args...)...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestTraceHelpListsFlags(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"convert":  {"-from", "-out", "-arrival", "-rate", "-stagger", "-seed", "-shared-prefix", "-strict", "-block-size"},
		"stats":    {"-json", "-from", "-block-size"},
		"sample":   {"-first", "-rate", "-seed", "-min-turns", "-duration", "-max-input-len", "-long", "-out"},
		"validate": {"-block-size", "-max-listed"},
	} {
		stderr, _, err := runCLI("trace", cmd, "--help") // the page goes to stdout
		if err != nil {
			t.Errorf("%s --help: %v", cmd, err)
		}
		for _, f := range flags {
			if !strings.Contains(stderr, f) {
				t.Errorf("%s --help lacks %s", cmd, f)
			}
		}
	}
}

// TestSharedTraceStats checks the done criteria on the real traces.
func TestSharedTraceStats(t *testing.T) {
	mc := tracetest.SharedTraces(t, "mooncake/conversation_trace.jsonl")
	rep := statsJSON(t, mc)
	if rep.Requests != 12031 || rep.InputTokens.Mean < 12034 || rep.InputTokens.Mean > 12036 {
		t.Fatalf("mooncake: %d requests, mean input %v", rep.Requests, rep.InputTokens.Mean)
	}
	weka := tracetest.SharedTraces(t, "weka")
	out := filepath.Join(t.TempDir(), "weka.jsonl")
	if _, stderr, err := runCLI("trace", "convert", "--from", "weka", "--out", out, weka); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if rep := statsJSON(t, out); rep.Requests != 5049 || rep.Sessions != 152 {
		t.Fatalf("weka: %d requests %d sessions", rep.Requests, rep.Sessions)
	}
}
