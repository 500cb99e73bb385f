package main

import (
	"os/exec"
	"regexp"
	"strings"
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
