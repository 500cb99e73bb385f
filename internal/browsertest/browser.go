// Package browsertest runs a real headless Chromium on a local page for the
// tests of the HTML the project writes (the report and the sweep page):
// found once the same way, started the same way, with a fresh profile and
// nothing in the background that could reach the network.
package browsertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Find returns a headless-capable Chromium, or "" when none exists.
func Find() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// Need returns Find's browser or skips the test, saying how to get one.
func Need(t testing.TB) string {
	t.Helper()
	bin := Find()
	if bin == "" {
		t.Skip("no Chromium found (chromium, chromium-browser, google-chrome on PATH or /usr/bin/chromium); " +
			"install it with `apt-get install -y chromium` to run the browser test")
	}
	return bin
}

// Run opens page (a file path) in the headless browser bin with extra
// flags (--dump-dom, --screenshot=..., --window-size=...) and returns its
// stdout and stderr; it fails the test if the browser fails or runs past
// 150 s.
func Run(t testing.TB, bin, page string, extra ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0",
	}, extra...)
	args = append(args, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", bin, err, tail(errb.String(), 4000))
	}
	return out.String(), errb.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
