// Package synth generates synthetic canonical traces: the seed's small-append
// microbenchmark, an agentic coding workload calibrated on real Claude Code
// sessions, BLIS's multi-tenant agentic spec, and workloads shaped like the
// seed's two traces (seed-swe, seed-inferact). Generators stream: requests
// come out one at a time in global timestamp order, and memory is
// proportional to the number of sessions active at once, not to the length
// of the trace, so a simulator can consume millions of requests straight
// from the generator.
package synth

import (
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Stream is a source of canonical requests in non-decreasing timestamp order.
type Stream interface {
	// Header describes the trace (block size, source, generator settings).
	Header() trace.Header
	// Next overwrites every field of *req with the next request, reusing
	// req.HashIDs' backing array when it is large enough, and returns io.EOF
	// after the last one. ThinkTimeS, when set, points to a fresh value, so
	// callers may keep it.
	Next(req *trace.Request) error
}

// requestType is the Type of every generated request: plain text LLM calls.
const requestType = "text"

// thinkPtr returns a fresh pointer so that a caller reusing one Request across
// Next calls cannot see an earlier request's think time change under it.
func thinkPtr(v float64) *float64 { return &v }

// fillRequest sets the fields common to both generators.
func fillRequest(req *trace.Request, sessionID, parentSession string, chatID, parentChat int64, turn int,
	at float64, out int, chain *blockChain) {
	req.SessionID = sessionID
	req.ParentSessionID = parentSession
	req.ChatID = chatID
	req.ParentChatID = parentChat
	req.Turn = turn
	req.Timestamp = roundMS(at)
	req.InputLength = chain.tokens
	req.OutputLength = out
	req.Type = requestType
	req.HashIDs = chain.fill(req.HashIDs)
	req.ThinkTimeS = nil
}
