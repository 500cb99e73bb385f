package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command that reads a trace range-checks its numbers with the
// checks of trace validate and names the file and line of a bad value;
// a file that is not JSON at all says so, not that a flag is missing.
func TestTraceNumbersChecked(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const hdr = `{"pdhybrid_trace":1,"block_size":64}` + "\n"
	neg := write("neg.jsonl", hdr+`{"session_id":"s0","chat_id":0,"parent_chat_id":-1,"turn":1,"timestamp":0,"input_length":-10,"output_length":4,"hash_ids":[]}`+"\n")
	huge := write("huge.jsonl", hdr+`{"session_id":"s0","chat_id":0,"parent_chat_id":-1,"turn":1,"timestamp":1e308,"input_length":64,"output_length":4,"hash_ids":[1]}`+"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "stats", neg}, "neg.jsonl:2: field \"input_length\""},
		{[]string{"trace", "validate", huge}, "huge.jsonl:2: field \"timestamp\""},
		{[]string{"trace", "stats", huge}, "huge.jsonl:2: field \"timestamp\""},
		{[]string{"sim", "--trace", neg}, "neg.jsonl:2: field \"input_length\""},
		{[]string{"sim", "--trace", huge}, "huge.jsonl:2: field \"timestamp\""},
		{[]string{"replay", "--url", "http://127.0.0.1:1", "--trace", huge}, "huge.jsonl:2: field \"timestamp\""},
		{[]string{"floor", "--trace", neg}, "neg.jsonl:2: field \"input_length\""},
		{[]string{"trace", "sample", "--first", "1", huge, "--out", filepath.Join(dir, "s.jsonl")}, "huge.jsonl:2: field \"timestamp\""},
	} {
		out, stderr, err := runCLI(c.args...)
		if exitCode(err) != exitError || !strings.Contains(out+stderr, c.want) { // validate lists problems on stdout
			t.Errorf("%s: exit %d, want 1 naming %s\n%s", strings.Join(c.args, " "), exitCode(err), c.want, stderr)
		}
	}
	for _, args := range [][]string{{"sim", "--trace", "-"}, {"trace", "stats", "-"}} {
		_, stderr, err := runCLIIn("\x7fELF\x02\x01\x01\x00garbage\n", args...)
		if exitCode(err) != exitError || !strings.Contains(stderr, "standard input:1: binary data") || strings.Contains(stderr, "block-size") {
			t.Errorf("%s on binary stdin: exit %d, want 1 saying it is binary data\n%s", strings.Join(args, " "), exitCode(err), stderr)
		}
	}
}
