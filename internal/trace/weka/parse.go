// Package weka converts WEKA kv-cache-tester session JSONs (real Claude Code
// sessions, one JSON object per session) into canonical trace requests.
//
// Facts about the source that the conversion rests on, measured on the 145
// public sessions (see docs/traces.md for the evidence):
//
//   - hash_ids holds floor(in/block_size) ids: full blocks only.
//   - think_time on request i is the client's delay between the end of
//     request i−1 (t + api_time) and the start of request i: it matches
//     t[i] − (t[i−1] + api_time[i−1]) within 1.5 s for 99.98% of requests,
//     against 20% for the "delay after request i" reading.
//   - a sub-agent entry's t is when the sub-agent finished, relative to the
//     enclosing session's start; it started duration_ms earlier (parallel
//     sub-agents spawned together all give the same t − duration_ms, equal to
//     the end of the parent request that spawned them), and the t of its own
//     requests counts from that start.
package weka

import (
	"encoding/json"
	"fmt"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// File is one session JSON.
type File struct {
	ID           string  `json:"id"`
	BlockSize    int     `json:"block_size"`
	HashIDScope  string  `json:"hash_id_scope"`
	ToolTokens   int     `json:"tool_tokens"`
	SystemTokens int     `json:"system_tokens"`
	Requests     []Entry `json:"requests"`
}

// Entry is a request, or a sub-agent ({"type":"subagent","requests":[...]}).
type Entry struct {
	Type      string   `json:"type"`
	T         *float64 `json:"t"`
	In        *int     `json:"in"`
	Out       *int     `json:"out"`
	HashIDs   []int64  `json:"hash_ids"`
	ThinkTime *float64 `json:"think_time"`
	APITime   *float64 `json:"api_time"`

	// Sub-agent fields.
	AgentID      string   `json:"agent_id"`
	DurationMs   *float64 `json:"duration_ms"`
	ToolTokens   int      `json:"tool_tokens"`
	SystemTokens int      `json:"system_tokens"`
	Requests     []Entry  `json:"requests"`
}

// IsSubagent reports whether e is a nested sub-agent session.
func (e *Entry) IsSubagent() bool { return e.Type == "subagent" }

// Parse decodes one session JSON. It fails only when the document as a whole
// cannot be read (malformed JSON, a field of the wrong JSON type, no
// requests array); problems with single entries are left to Check so that
// the converter can skip and count them.
func Parse(data []byte, file string) (*File, error) {
	var f File
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, jsonErr(data, file, err)
	}
	if _, ok := probe["requests"]; !ok {
		return nil, &trace.Error{File: file, Field: "requests", Msg: "missing; expected the session's array of requests"}
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonErr(data, file, err)
	}
	if f.BlockSize < 0 {
		return nil, &trace.Error{File: file, Field: "block_size", Msg: fmt.Sprintf("got %d, expected a positive token count", f.BlockSize)}
	}
	return &f, nil
}

func jsonErr(data []byte, file string, err error) error {
	switch e := err.(type) {
	case *json.SyntaxError:
		return &trace.Error{File: file, Line: lineOf(data, e.Offset), Msg: "malformed JSON: " + e.Error()}
	case *json.UnmarshalTypeError:
		return &trace.Error{File: file, Line: lineOf(data, e.Offset), Field: e.Field, Msg: fmt.Sprintf("got JSON %s, expected %s", e.Value, goTypeWord(e.Type.String()))}
	}
	return &trace.Error{File: file, Msg: err.Error()}
}

func goTypeWord(t string) string {
	switch t {
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "[]int64":
		return "an array of integers"
	}
	return t
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	n := 1
	for _, c := range data[:off] {
		if c == '\n' {
			n++
		}
	}
	return n
}

// Check returns why a request entry cannot be converted, or "" when it can.
// blockSize is the session's block size.
func (e *Entry) Check(blockSize int) string {
	switch {
	case blockSize <= 0:
		return "no block size"
	case e.T == nil:
		return "missing t (seconds since the session start)"
	case *e.T < 0:
		return fmt.Sprintf("t is %v, expected non-negative seconds", *e.T)
	case e.In == nil:
		return "missing in (input tokens)"
	case *e.In < 0:
		return fmt.Sprintf("in is %d, expected a non-negative token count", *e.In)
	case e.Out == nil:
		return "missing out (output tokens)"
	case *e.Out < 0:
		return fmt.Sprintf("out is %d, expected a non-negative token count", *e.Out)
	case e.HashIDs == nil:
		return "missing hash_ids"
	case e.ThinkTime != nil && *e.ThinkTime < 0:
		return fmt.Sprintf("think_time is %v, expected non-negative seconds", *e.ThinkTime)
	}
	full, all := *e.In/blockSize, (*e.In+blockSize-1)/blockSize
	if n := len(e.HashIDs); n != full && n != all {
		return fmt.Sprintf("hash_ids has %d ids, expected floor(in %d / block_size %d) = %d", n, *e.In, blockSize, full)
	}
	for i, h := range e.HashIDs {
		if h < 0 || h >= 1<<32 {
			return fmt.Sprintf("hash_ids[%d] is %d, expected a local id in [0, 2^32)", i, h)
		}
	}
	return ""
}
