// Package trace defines pdhybrid's canonical request trace: JSONL, one request
// per line, preceded by one header line that records the block size (tokens
// per hash id) for the whole file. It provides a streaming reader and writer
// whose memory does not grow with the length of the file.
//
// A canonical file looks like
//
//	{"pdhybrid_trace":1,"block_size":64,"source":"weka"}
//	{"session_id":"s1","chat_id":0,"parent_chat_id":-1,"turn":1,"timestamp":0,...}
//
// Files without the header (Alibaba Bailian traces, the seed's 24-token-block
// traces) are read too; their block size must then be given by the caller.
package trace

// FormatVersion is the value of the header's "pdhybrid_trace" field.
const FormatVersion = 1

// Header is the first line of a canonical trace file.
type Header struct {
	// Version is always FormatVersion for files this package writes.
	Version int `json:"pdhybrid_trace"`
	// BlockSize is the number of tokens each hash id stands for.
	BlockSize int `json:"block_size"`
	// Source names where the requests came from (weka, mooncake, synth-agentic, ...).
	Source string `json:"source,omitempty"`
	// Note is free text: converter options, generator seed, and so on.
	Note string `json:"note,omitempty"`
}

// Request is one line of a canonical trace: a single LLM call within a session.
type Request struct {
	// SessionID groups the turns of one conversation (or one sub-agent).
	SessionID string `json:"session_id"`
	// ParentSessionID links a sub-agent session to the session that spawned it;
	// the two share one hash-id namespace. Empty for top-level sessions.
	ParentSessionID string `json:"parent_session_id,omitempty"`
	// ChatID is unique within the file.
	ChatID int64 `json:"chat_id"`
	// ParentChatID is the ChatID of the previous turn of the session, or -1 for
	// the session's root.
	ParentChatID int64 `json:"parent_chat_id"`
	// Turn counts from 1 within a session.
	Turn int `json:"turn"`
	// Timestamp is the request's arrival time in seconds from the trace start.
	Timestamp float64 `json:"timestamp"`
	// InputLength and OutputLength are token counts.
	InputLength  int `json:"input_length"`
	OutputLength int `json:"output_length"`
	// Type is the request kind as the source names it ("text", "n", ...).
	Type string `json:"type"`
	// HashIDs are prefix blocks: equal ids at equal positions mean reusable KV.
	// There are ceil(InputLength/BlockSize) of them.
	HashIDs []uint64 `json:"hash_ids"`
	// ThinkTimeS is the client's delay in seconds between the end of the
	// previous turn and this request, when the source records it.
	ThinkTimeS *float64 `json:"think_time_s,omitempty"`
}

// IsRoot reports whether r opens its session.
func (r *Request) IsRoot() bool { return r.ParentChatID < 0 }

// BlocksFor is the number of hash ids a prompt of n tokens needs with the
// given block size: every block, the partial last one included.
func BlocksFor(n, blockSize int) int {
	if blockSize <= 0 || n <= 0 {
		return 0
	}
	return (n + blockSize - 1) / blockSize
}
