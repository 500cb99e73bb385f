package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Whatever the file holds, applying it gives a value or an error, never a
// panic.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{"mechanism: pd-colo\n", "decode: [a, b]\n", "- x\n", "a: {b: c}\n", "port: &a 1\nx: *a\n", "? [a]\n: b\n", "---\n---\nport: 1\n", ""} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, now: time.Now}
		applyConfigFile(serveCmd(e), p)
	})
}
