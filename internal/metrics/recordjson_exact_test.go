package metrics

import "testing"

// TestAppendJSONLoneEscapes: a string made only of a character JSON
// escapes (or encoding/json writes as \u00XX for HTML) takes the escaping
// path; mixed with plain characters it is already in the random test.
func TestAppendJSONLoneEscapes(t *testing.T) {
	for _, s := range []string{`"`, `\`, "<", ">", "&", `""`, "\x1f"} {
		checkAppendJSON(t, &Record{RequestID: s, SessionID: "s", Status: StatusCompleted, Path: []string{s}})
		checkAppendJSON(t, &Record{RequestID: "r", SessionID: s, Status: StatusFailed, Error: s})
	}
}
