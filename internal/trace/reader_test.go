package trace_test

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// A headerless file whose first line is no JSON object is named as such.
func TestReaderNotJSON(t *testing.T) {
	for in, want := range map[string]string{
		"\x7fELF\x00\x01\n":                              "f:1: binary data",
		"\n\nsession,turn\n":                             "f:3: text (\"session,turn\"...), not a JSON object",
		`{"chat_id":1}` + "\n":                           "",
		`{"pdhybrid_trace":1,"block_size":4}` + "\nxx\n": "",
	} {
		rd, err := trace.NewReader(strings.NewReader(in), "f", 0)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := rd.NotJSON(); err != nil {
			got = err.Error()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: NotJSON %q, want %q", in, got, want)
		}
	}
}
