package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileEnv writes a non-empty profile where the variable says, and
// reports an unwritable path on stderr instead of failing the run.
func TestCPUProfileEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv(cpuProfileEnv, path)
	var stderr bytes.Buffer
	startCPUProfile(&stderr)()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v, stderr %q", path, err, stderr.String())
	}
	t.Setenv(cpuProfileEnv, filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	stderr.Reset()
	startCPUProfile(&stderr)()
	if !strings.Contains(stderr.String(), cpuProfileEnv) {
		t.Fatalf("unwritable path not reported: %q", stderr.String())
	}
	t.Setenv(cpuProfileEnv, "")
	stderr.Reset()
	startCPUProfile(&stderr)()
	if stderr.Len() != 0 {
		t.Fatalf("unset variable wrote %q", stderr.String())
	}
}
