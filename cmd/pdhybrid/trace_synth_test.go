package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// readSynth parses a canonical trace and returns its header and requests.
func readSynth(t *testing.T, s string) (trace.Header, []trace.Request) {
	t.Helper()
	rd, err := trace.NewReader(strings.NewReader(s), "synth", 0)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []trace.Request
	for {
		var r trace.Request
		if err := rd.Next(&r); err != nil {
			break
		}
		reqs = append(reqs, r)
	}
	return rd.Header(), reqs
}

func TestSynthCLIAgenticDefault(t *testing.T) {
	a, summary, err := runCLI("trace", "synth", "agentic")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runCLI("trace", "synth", "agentic")
	if a != b {
		t.Fatal("two runs with default flags differ")
	}
	h, reqs := readSynth(t, a)
	if h.BlockSize != 64 || h.Source != "synth-agentic" || len(reqs) != 1282 {
		t.Fatalf("header %+v, %d requests", h, len(reqs))
	}
	if !strings.HasPrefix(summary, "synth agentic: 1282 requests, 40 sessions") || strings.Count(summary, "\n") != 1 {
		t.Fatalf("summary %q", summary)
	}
}

func TestSynthCLIRequestsAndOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	out, _, err := runCLI("trace", "synth", "agentic", "--requests", "3000", "--seed", "7", "--out", path)
	if err != nil || out != "" {
		t.Fatalf("err %v, stdout %q", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// --requests without --sessions means unbounded sessions: exactly N requests.
	if _, reqs := readSynth(t, string(data)); len(reqs) != 3000 {
		t.Fatalf("%d requests, want 3000", len(reqs))
	}
}

func TestSynthCLISmallAppend(t *testing.T) {
	out, _, err := runCLI("trace", "synth", "small-append", "--sessions", "3", "--turns", "4", "--initial", "1000",
		"--append", "10", "--output", "5", "--block-size", "16")
	if err != nil {
		t.Fatal(err)
	}
	h, reqs := readSynth(t, out)
	if h.BlockSize != 16 || len(reqs) != 12 {
		t.Fatalf("header %+v, %d requests", h, len(reqs))
	}
	last := reqs[len(reqs)-1]
	if last.Turn != 4 || last.InputLength != 1000+3*15 || len(last.HashIDs) != trace.BlocksFor(1045, 16) {
		t.Fatalf("last request %+v", last)
	}
}

func TestSynthCLIErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"agentic", "--cap-policy", "drop"},
		{"agentic", "--rate", "0"},
		{"agentic", "stray"},
		{"small-append", "--turns", "0"},
		{"agentic", "--no-such-flag"},
	} {
		_, _, err := runCLI(append([]string{"trace", "synth"}, args...)...)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
		if exitCode(err) != 2 {
			t.Errorf("%q: exit code %d, want 2", args, exitCode(err))
		}
	}
}

// TestSynthCLIHelp: --help explains every flag with its default.
func TestSynthCLIHelp(t *testing.T) {
	for gen, want := range map[string][]string{
		"agentic":      {"-sessions", "(default 40)", "-max-input", "(default 262144)", "-rate", "sessions/s", "-seed", "-requests", "-shared-prefix", "(default 15138)"},
		"small-append": {"-initial", "(default 32768)", "-append", "(default 512)", "-gap", "seconds", "(default 5)"},
	} {
		stderr, _, err := runCLI("trace", "synth", gen, "--help") // the page goes to stdout
		if err != nil {
			t.Fatalf("%s --help: %v", gen, err)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s --help lacks %q", gen, w)
			}
		}
	}
}
