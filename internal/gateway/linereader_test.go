package gateway

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLineReaderSplitsTheLastRead: a body whose last Read returns its
// bytes together with io.EOF (as a chunked HTTP body may) must still come
// out one line at a time; handing the lines back as one lost a stream's
// final event and [DONE] behind the JSON rewrite (found replaying a trace
// under -race).
func TestLineReaderSplitsTheLastRead(t *testing.T) {
	body := "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\ntail"
	for name, r := range map[string]io.Reader{
		"data-with-eof": iotest.DataErrReader(strings.NewReader(body)),
		"one-byte":      iotest.OneByteReader(strings.NewReader(body)),
		"plain":         strings.NewReader(body),
	} {
		next := newLineReader(r)
		var got []string
		for {
			line, err := next()
			if len(line) > 0 {
				got = append(got, string(line))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		want := []string{"data: {\"a\":1}\n", "\n", "data: {\"a\":2}\n", "\n", "data: [DONE]\n", "\n", "tail"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: lines %q; want %q", name, got, want)
		}
	}
}
