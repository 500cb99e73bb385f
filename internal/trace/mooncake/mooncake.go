// Package mooncake converts the Mooncake FAST'25 conversation trace
// ({"timestamp": ms, "input_length", "output_length", "hash_ids"} per line,
// 512-token blocks, no session ids) into canonical requests, inferring
// sessions from prefix chains.
//
// Inference rule (issue 2): a request's parent is the latest earlier request
// that holds its deepest matched block id, where the match is the longest
// prefix of its hash ids that all appeared before (Mooncake ids encode their
// whole prefix, so matching ids position by position is prefix matching). The
// request continues the parent's session when the match covers all of the
// parent's blocks except possibly the last (the parent's partial tail block
// changes once the conversation grows) and the parent is still its session's
// latest turn; otherwise it opens a new session. A parent that was already
// continued is a fork: the request opens a new session rather than giving a
// session two turn-k successors.
package mooncake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// DefaultBlockSize is Mooncake's tokens per hash id.
const DefaultBlockSize = 512

// Record is one source line.
type Record struct {
	TimestampMs  float64
	InputLength  int
	OutputLength int
	HashIDs      []uint64
}

type wire struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// ParseLine decodes one line. Errors are *trace.Error with Field and Msg set;
// the caller adds File and Line.
func ParseLine(line []byte) (Record, error) {
	var w wire
	line = bytes.TrimSpace(line)
	if err := json.Unmarshal(line, &w); err != nil {
		switch e := err.(type) {
		case *json.UnmarshalTypeError:
			return Record{}, &trace.Error{Field: e.Field, Msg: fmt.Sprintf("got JSON %s, expected %s", e.Value, expect(e.Field))}
		case *json.SyntaxError:
			return Record{}, &trace.Error{Msg: fmt.Sprintf("malformed JSON at byte %d: %v", e.Offset, e)}
		}
		return Record{}, &trace.Error{Msg: err.Error()}
	}
	switch {
	case w.Timestamp == nil:
		return Record{}, &trace.Error{Field: "timestamp", Msg: "missing; expected " + expect("timestamp")}
	case math.IsNaN(*w.Timestamp) || *w.Timestamp < 0:
		return Record{}, &trace.Error{Field: "timestamp", Msg: "got " + strconv.FormatFloat(*w.Timestamp, 'g', -1, 64) + ", expected " + expect("timestamp")}
	case w.InputLength == nil:
		return Record{}, &trace.Error{Field: "input_length", Msg: "missing; expected " + expect("input_length")}
	case *w.InputLength < 0:
		return Record{}, &trace.Error{Field: "input_length", Msg: fmt.Sprintf("got %d, expected %s", *w.InputLength, expect("input_length"))}
	case w.OutputLength == nil:
		return Record{}, &trace.Error{Field: "output_length", Msg: "missing; expected " + expect("output_length")}
	case *w.OutputLength < 0:
		return Record{}, &trace.Error{Field: "output_length", Msg: fmt.Sprintf("got %d, expected %s", *w.OutputLength, expect("output_length"))}
	case w.HashIDs == nil:
		return Record{}, &trace.Error{Field: "hash_ids", Msg: "missing; expected " + expect("hash_ids")}
	}
	return Record{TimestampMs: *w.Timestamp, InputLength: *w.InputLength, OutputLength: *w.OutputLength, HashIDs: w.HashIDs}, nil
}

func expect(field string) string {
	switch field {
	case "timestamp":
		return "non-negative milliseconds from the trace start"
	case "input_length", "output_length":
		return "a non-negative token count"
	case "hash_ids":
		return "an array of non-negative integer block ids"
	}
	if len(field) > 9 && field[:9] == "hash_ids." {
		return "a non-negative integer block id"
	}
	return "a valid value"
}

// Inferrer assigns sessions, turns and chat ids to records fed in timestamp
// order. Memory grows with unique block ids and requests (a few bytes each),
// not with their hash ids.
type Inferrer struct {
	holder map[uint64]int32 // block id → latest request holding it
	reqs   []reqInfo
	tails  []int32 // session → its latest request

	Sessions      int // sessions opened
	Continuations int // requests that continued a session
	Forks         int // matched a full parent that had already been continued
	Partial       int // matched a request only partly: new session
}

type reqInfo struct {
	blocks int32
	sess   int32
	turn   int32
}

// NewInferrer starts with nothing seen.
func NewInferrer() *Inferrer { return &Inferrer{holder: map[uint64]int32{}} }

// Add turns rec into a canonical request (HashIDs alias rec.HashIDs).
func (in *Inferrer) Add(rec Record) trace.Request {
	i := int32(len(in.reqs))
	k := 0
	for k < len(rec.HashIDs) {
		if _, ok := in.holder[rec.HashIDs[k]]; !ok {
			break
		}
		k++
	}
	info := reqInfo{blocks: int32(len(rec.HashIDs)), sess: -1, turn: 1}
	parent := int32(-1)
	if k > 0 {
		p := in.holder[rec.HashIDs[k-1]]
		pi := in.reqs[p]
		switch {
		case k < int(pi.blocks)-1:
			in.Partial++
		case in.tails[pi.sess] != p:
			in.Forks++
		default:
			parent = p
			info.sess, info.turn = pi.sess, pi.turn+1
			in.Continuations++
		}
	}
	if info.sess < 0 {
		info.sess = int32(len(in.tails))
		in.tails = append(in.tails, i)
		in.Sessions++
	}
	in.tails[info.sess] = i
	in.reqs = append(in.reqs, info)
	for _, h := range rec.HashIDs {
		in.holder[h] = i
	}
	return trace.Request{
		SessionID:    "mc" + strconv.Itoa(int(info.sess)),
		ChatID:       int64(i),
		ParentChatID: int64(parent),
		Turn:         int(info.turn),
		Timestamp:    rec.TimestampMs / 1000,
		InputLength:  rec.InputLength,
		OutputLength: rec.OutputLength,
		Type:         "text",
		HashIDs:      rec.HashIDs,
	}
}
