package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/report"
)

// --version names a commit, not only "(devel)": a test binary carries no
// VCS stamp, so it is the source tree's commit, and the report page names
// its writer alike.
func TestVersionNamesCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH: the source tree's commit cannot be read")
	}
	if exec.Command("git", "rev-parse", "HEAD").Run() != nil {
		t.Skip("not in a git work tree (a source archive): no commit to name")
	}
	out, _, err := runCLI("--version")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^pdhybrid \S.* [0-9a-f]{12}(-dirty)? \(source tree\) go`).MatchString(out) {
		t.Errorf("--version %q, want the source tree's commit", out)
	}
	if v := report.BuildVersion(); !strings.Contains(out, v) {
		t.Errorf("the report names %q, --version %q", v, out)
	}
	if got := sourceTreeCommit("example.com/not/this"); got != "" {
		t.Errorf("another module's tree gave %q", got)
	}
}

// The version is looked up (a git run or three for a binary without a VCS
// stamp) only by what prints or records it: a sim without --out never, a
// run folder's summary.json and --version once.
func TestVersionLookedUpOnlyWhenRecorded(t *testing.T) {
	lookups := 0
	saved := findVersion
	findVersion = func() string { lookups++; return "v-test" }
	versionOnce, versionText = sync.Once{}, ""
	t.Cleanup(func() { findVersion, versionOnce, versionText, report.Version = saved, sync.Once{}, "", "" })

	trace := filepath.Join(t.TempDir(), "t.jsonl")
	line := `{"session_id":"a","chat_id":0,"parent_chat_id":-1,"turn":1,"timestamp":0,"input_length":10,"output_length":4,"hash_ids":[7]}`
	if err := os.WriteFile(trace, []byte("{\"pdhybrid_trace\":1,\"block_size\":16}\n"+line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI("sim", "--trace", trace); err != nil {
		t.Fatalf("sim: %v\n%s", err, stderr)
	}
	if lookups != 0 {
		t.Fatalf("a sim without --out looked the version up %d times", lookups)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runCLI("sim", "--trace", trace, "--out", dir); err != nil {
		t.Fatalf("sim --out: %v\n%s", err, stderr)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if lookups != 1 || !strings.Contains(string(sum), `"v-test"`) {
		t.Fatalf("after a run folder: %d lookups, summary.json names the version: %v", lookups, strings.Contains(string(sum), `"v-test"`))
	}
	out, _, err := runCLI("--version")
	if err != nil || out != "pdhybrid v-test\n" || lookups != 1 {
		t.Fatalf("--version %q (%v) after %d lookups, want %q from one", out, err, lookups, "pdhybrid v-test\n")
	}
}
