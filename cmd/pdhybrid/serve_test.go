package main

import (
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
