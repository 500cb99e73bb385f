package trace

import (
	"encoding/json"
	"fmt"
)

// wireRequest mirrors Request with pointers so that missing fields can be told
// apart from zero values.
type wireRequest struct {
	SessionID       *string  `json:"session_id"`
	ParentSessionID string   `json:"parent_session_id"`
	ChatID          *int64   `json:"chat_id"`
	ParentChatID    *int64   `json:"parent_chat_id"`
	Turn            *int     `json:"turn"`
	Timestamp       *float64 `json:"timestamp"`
	InputLength     *int     `json:"input_length"`
	OutputLength    *int     `json:"output_length"`
	Type            string   `json:"type"`
	HashIDs         []uint64 `json:"hash_ids"`
	ThinkTimeS      *float64 `json:"think_time_s"`
}

// decodeRequest parses one canonical line. Fields a canonical line must carry
// (chat_id, parent_chat_id, timestamp, input_length, output_length, hash_ids)
// are checked for presence; session_id and turn may be absent in
// Bailian-style files and are then left empty/zero for the caller to derive.
func decodeRequest(line []byte, req *Request) error {
	var w wireRequest
	w.HashIDs = req.HashIDs[:0]
	if err := json.Unmarshal(line, &w); err != nil {
		return jsonError(err)
	}
	missing := func(f string) error {
		return &Error{Field: f, Msg: "missing; expected " + fieldExpect[f]}
	}
	switch {
	case w.ChatID == nil:
		return missing("chat_id")
	case w.ParentChatID == nil:
		return missing("parent_chat_id")
	case w.Timestamp == nil:
		return missing("timestamp")
	case w.InputLength == nil:
		return missing("input_length")
	case w.OutputLength == nil:
		return missing("output_length")
	case w.HashIDs == nil:
		return missing("hash_ids")
	}
	*req = Request{
		ParentSessionID: w.ParentSessionID,
		ChatID:          *w.ChatID,
		ParentChatID:    *w.ParentChatID,
		Timestamp:       *w.Timestamp,
		InputLength:     *w.InputLength,
		OutputLength:    *w.OutputLength,
		Type:            w.Type,
		HashIDs:         w.HashIDs,
		ThinkTimeS:      w.ThinkTimeS,
	}
	if w.SessionID != nil {
		req.SessionID = *w.SessionID
	}
	if w.Turn != nil {
		req.Turn = *w.Turn
	}
	return nil
}

var fieldExpect = map[string]string{
	"chat_id":        "an integer unique in the file",
	"parent_chat_id": "an integer chat id, or -1 for a session root",
	"timestamp":      "seconds from the trace start (number)",
	"input_length":   "a non-negative token count",
	"output_length":  "a non-negative token count",
	"hash_ids":       "an array of non-negative integer block ids",
}

func jsonError(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return &Error{Field: te.Field, Msg: fmt.Sprintf("got JSON %s, expected %s", te.Value, te.Type)}
	}
	if se, ok := err.(*json.SyntaxError); ok {
		return &Error{Msg: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	}
	return &Error{Msg: err.Error()}
}
