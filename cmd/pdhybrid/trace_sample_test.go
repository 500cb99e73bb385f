package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSampleCommand(t *testing.T) {
	dir := wekaDir(t)
	conv := filepath.Join(t.TempDir(), "w.jsonl")
	if _, stderr, err := runCLI("trace", "convert", "--from", "weka", "--out", conv, dir); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	out := filepath.Join(t.TempDir(), "s.jsonl")
	_, stderr, err := runCLI("trace", "sample", "--first", "1", "--max-input-len", "9", "--long", "truncate", "--out", out, conv)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "kept 2 of 4 sessions (1 of 2 families), 3 of 6 requests") ||
		!strings.Contains(stderr, "truncated 2 requests in 1 sessions") {
		t.Fatalf("stderr: %s", stderr)
	}
	rep := statsJSON(t, out)
	if rep.Requests != 3 || rep.InputTokens.Max != 9 {
		t.Fatalf("report %+v", rep)
	}
	if o, _, err := runCLI("trace", "validate", out); err != nil {
		t.Fatalf("sample output invalid: %v\n%s", err, o)
	}
}
