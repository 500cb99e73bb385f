package main

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// pdhybrid conformance against an emulated stock decoder: the stock rules
// pass, the extension is not offered, exit 0; a bad flag is a usage error.
func TestConformanceCommand(t *testing.T) {
	w := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	out, stderr, err := runCLI("conformance", "--url", w.URL(), "--role", "decode")
	if exitCode(err) != exitOK {
		t.Fatalf("exit %d: %s%s", exitCode(err), out, stderr)
	}
	for _, want := range []string{"stock.raw-generate-refused", "extension.session-cache.advertised  not-offered"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Checked as a prefill worker, the decoder fails the role rule: exit 1.
	out, stderr, err = runCLI("conformance", "--url", w.URL(), "--role", "prefill")
	if exitCode(err) != exitError || !strings.Contains(out, "stock.server-info") || !strings.Contains(stderr, "rules failed") {
		t.Fatalf("as prefill: exit %d\n%s%s", exitCode(err), out, stderr)
	}
	for _, c := range [][]string{{"--role", "decode"}, {"--url", w.URL(), "--role", "router"}, {"--url", "ftp://x", "--role", "decode"}} {
		if _, stderr, err := runCLI(append([]string{"conformance"}, c...)...); exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d, %s", c, exitCode(err), stderr)
		}
	}
}
