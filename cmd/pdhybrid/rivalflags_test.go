package main

import (
	"strings"
	"testing"
)

// The rivals' flags: out of range or given to another mechanism, a clear
// error naming the flag.
func TestRivalFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mechanism", "pd-deflect", "--rival-ttft-slo-ms", "0"}, "--rival-ttft-slo-ms"},
		{[]string{"--mechanism", "pd-ppd", "--rival-tpot-slo-ms", "-5"}, "--rival-tpot-slo-ms"},
		{[]string{"--mechanism", "pd-ppd", "--ppd-tpot-weight", "NaN"}, "--ppd-tpot-weight"},
		{[]string{"--mechanism", "pd-deflect", "--ppd-ttft-weight", "2"}, "pd-ppd"},
		{[]string{"--mechanism", "pd-decode-radix", "--rival-ttft-slo-ms", "1000"}, "pd-ppd or pd-deflect"},
	} {
		_, stderr, err := runCLI(append([]string{"sim", "--trace", "nonexistent.jsonl"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, c.want) {
			t.Errorf("%v: err %v, stderr %q; want an error naming %q", c.args, err, stderr, c.want)
		}
	}
}
