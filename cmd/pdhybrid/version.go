package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/report"
)

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3"; otherwise it comes from the build info.
var version = ""

// versionString is what --version prints after the program name, and what
// every run's summary.json and report record: the release, else the module
// version, else the commit the binary was built from (the build info's
// vcs.revision, "-dirty" with uncommitted changes), and the Go version.
// `go run` and builds with -buildvcs=false carry no commit; then it is the
// commit of the source tree in the working directory, when that is this
// module's, marked "(source tree)", so a run never says only "(devel)".
func versionString() string {
	versionOnce.Do(func() {
		versionText = findVersion()
		report.Version = versionText // the report page names its writer alike
	})
	return versionText
}

// The report page asks for the version only when it renders one.
func init() { report.VersionFrom = versionString }

var (
	versionOnce sync.Once
	versionText string
	findVersion = buildVersion // tests count the lookups
)

func buildVersion() string {
	if version != "" {
		return version
	}
	v := "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v = bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case v != "(devel)":
	case rev != "":
		v += " " + rev + dirty
	default:
		if r := sourceTreeCommit(bi.Main.Path); r != "" {
			v += " " + r + " (source tree)"
		}
	}
	return v + " " + bi.GoVersion
}

// sourceTreeCommit is the short commit (with -dirty) of the git work tree
// holding the working directory, when its go.mod is module's; "" when
// there is none, git is missing, or it takes over a second.
func sourceTreeCommit(module string) string {
	if module == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	git := func(args ...string) (string, bool) {
		out, err := exec.CommandContext(ctx, "git", args...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	top, ok := git("rev-parse", "--show-toplevel")
	if !ok {
		return ""
	}
	mod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil || !slices.ContainsFunc(strings.Split(string(mod), "\n"), func(l string) bool {
		return strings.TrimSpace(l) == "module "+module
	}) {
		return ""
	}
	rev, ok := git("rev-parse", "--short=12", "HEAD")
	if !ok || rev == "" {
		return ""
	}
	if st, ok := git("status", "--porcelain", "--untracked-files=no"); ok && st != "" {
		rev += "-dirty"
	}
	return rev
}
