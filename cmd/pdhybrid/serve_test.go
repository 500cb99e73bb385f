package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's usage errors name what is wrong before anything listens.
func TestServeUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--mechanism", "pd-colo"}, "needs at least one colocated worker"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1@99999", "--decode", "http://127.0.0.1:2"}, "--prefill"},
		{[]string{"serve", "--mechanism", "pd-colo", "--colo", "http://127.0.0.1:3", "--direct-max-uncached-tokens", "100"}, "--direct-max-uncached-tokens"},
		{[]string{"serve", "--mechanism", "nope"}, "--mechanism"},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args, exitCode(err), first, c.want)
		}
	}
}

// serve --config: a YAML file of flag settings, held to the flags' own
// rules; errors name the file, line and key; the command line wins.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `# a KVC gateway over one P and two D
mechanism: kvcache-centric
prefill:
  - http://127.0.0.1:1@8998
decode: [http://127.0.0.1:2, http://127.0.0.1:3]
block_size: 32
direct-max-uncached-tokens: 4096
port: 99999
`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", write("unknown.yaml", "mechanism: pd-colo\nblock-sise: 64\n")}, "unknown.yaml:2: block-sise: not a flag of pdhybrid serve (did you mean block-size?)"},
		{[]string{"serve", "--config", write("range.yaml", "decode: [http://127.0.0.1:2]\nprefill: [http://127.0.0.1:1]\nblock-size: 0\n")}, "--block-size"},
		{[]string{"serve", "--config", write("type.yaml", "\n\nport: eighty\n")}, "type.yaml:3: port:"},
		{[]string{"serve", "--config", write("nested.yaml", "decode:\n  url: x\n")}, "nested.yaml:1: decode: want a value or a list of values, not a mapping"},
		{[]string{"serve", "--config", write("list.yaml", "- a\n- b\n")}, "list.yaml:1: want a mapping"},
		{[]string{"serve", "--config", write("broken.yaml", "a: [1, 2\n")}, "broken.yaml"},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yaml")}, "--config"},
		// The file's port is out of range; the command line's wins and the
		// file's mechanism and workers are taken: the next error is about
		// the policy given on the command line.
		{[]string{"serve", "--config", good, "--port", "0", "--policy", "nope"}, "--policy"},
		{[]string{"serve", "--config", good}, "--port"},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args[2:], exitCode(err), first, c.want)
		}
	}
}

// A good file configures the gateway: it listens with the file's mechanism
// (not the default) on the file's free port.
func TestServeConfigFileTakesEffect(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gw.yaml")
	os.WriteFile(p, []byte("mechanism: pd-disaggregation\nprefill: [http://127.0.0.1:1@8998]\ndecode: [http://127.0.0.1:2]\nport: 0\n"), 0o644)
	c := pdhybrid(t, "serve", "--config", p)
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening url=http://127.0.0.1:") || !strings.Contains(line, "mechanism=pd-disaggregation") {
		t.Fatalf("serve --config printed %q (%v)", line, err)
	}
}
