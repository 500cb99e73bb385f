package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
)

// serve's limit, admin and polling flags are range-checked before anything
// listens, each error naming the flag and what is valid.
func TestServeOpsFlagErrors(t *testing.T) {
	base := []string{"serve", "--mechanism", "pd-colo", "--colo", "http://127.0.0.1:3"}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--max-body-bytes", "10"}, "--max-body-bytes 10: want a number of bytes in [1024,"},
		{[]string{"--max-header-bytes", "1e9"}, "--max-header-bytes"},
		{[]string{"--max-client-concurrency", "-1"}, "--max-client-concurrency -1: want 0 (no limit) or"},
		{[]string{"--load-poll-interval", "0.001"}, "--load-poll-interval 0.001: want 0 (never poll) or"},
		{[]string{"--load-poll-interval", "NaN"}, "--load-poll-interval"},
	} {
		_, stderr, err := runCLI(append(append([]string(nil), base...), c.flags...)...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 with %q", c.flags, exitCode(err), first, c.want)
		}
	}
}

// The admin token comes from --admin-token, else the environment; a poll
// interval of 0 turns polling off.
func TestServeOpsApply(t *testing.T) {
	t.Setenv(adminTokenEnv, "from-env")
	e := &env{}
	for _, c := range []struct {
		o         opsFlags
		wantToken string
		wantPoll  time.Duration
	}{
		{opsFlags{pollS: 0.5}, "from-env", 500 * time.Millisecond},
		{opsFlags{adminToken: "from-flag", pollS: 0}, "from-flag", -1},
	} {
		var cfg gateway.Config
		c.o.apply(&cfg, e)
		if cfg.AdminToken != c.wantToken || cfg.LoadPoll != c.wantPoll {
			t.Errorf("%+v: token %q poll %v, want %q and %v", c.o, cfg.AdminToken, cfg.LoadPoll, c.wantToken, c.wantPoll)
		}
	}
}
