package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendJSONLoneEscapes: a string made only of a character JSON
// escapes (quote, backslash, a control byte, or the HTML <, >, & that
// json.Encoder escapes) takes the escaping path, in records and in events
// whose other strings are empty (mixed with plain characters they are in
// the random tests already).
func TestAppendJSONLoneEscapes(t *testing.T) {
	for _, s := range []string{`"`, `\`, "<", ">", "&", `""`, "\x1f"} {
		checkAppendJSON(t, &Record{RequestID: s, Status: Status(s), Path: []string{s}})
		checkAppendJSON(t, &Record{SessionID: s, Status: StatusFailed, Error: s})
		for _, e := range []*Event{{Kind: s}, {Detail: s}, {State: s}} {
			var buf bytes.Buffer
			werr := json.NewEncoder(&buf).Encode(e)
			got, gerr := e.AppendJSON(nil)
			if werr != nil || gerr != nil || !bytes.Equal(got, buf.Bytes()) {
				t.Errorf("event %+v: AppendJSON %q (%v), encoding/json %q (%v)", *e, got, gerr, buf.Bytes(), werr)
			}
		}
	}
}
