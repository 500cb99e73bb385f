package main

import (
	"strings"
	"testing"
)

// up --hicache-storage-shared-bandwidth is the shared pool's aggregate
// bandwidth at up's store service: it needs --hicache-storage-shared and a
// bandwidth in GB/s ≥ 0, each refusal naming the flag before anything
// starts.
func TestUpSharedBandwidthFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hicache-storage-shared-bandwidth", "10"}, "with --hicache-storage-shared"},
		{[]string{"--hicache-storage-shared", "--hicache-storage-shared-bandwidth", "-1"}, "--hicache-storage-shared-bandwidth"},
	} {
		_, stderr, err := runCLI(append([]string{"up", "--port", "0"}, tc.args...)...)
		if err == nil || !strings.Contains(stderr+err.Error(), tc.want) {
			t.Errorf("up %v: %v %s; want an error naming %q", tc.args, err, stderr, tc.want)
		}
	}
}
