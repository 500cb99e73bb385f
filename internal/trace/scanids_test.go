package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// someRequests are n requests of two-turn sessions as a writer would
// have them (tracetest, which makes such, imports this package).
func someRequests(n int) []Request {
	var out []Request
	for i := range n {
		think := 1.5
		r := Request{SessionID: "s" + strconv.Itoa(i/2), ChatID: int64(i), ParentChatID: -1, Turn: 1 + i%2,
			Timestamp: float64(i) / 3, InputLength: 20 + i, OutputLength: 5, Type: "text", HashIDs: []uint64{uint64(i), uint64(i + 1)}}
		if i%2 == 1 {
			r.ParentChatID, r.ThinkTimeS = int64(i-1), &think
		}
		out = append(out, r)
	}
	return out
}

// scanAgrees fails t when decodeRequest reads line and scanIDs does not
// read the same session id and chat id from it.
func scanAgrees(t *testing.T, line []byte) {
	t.Helper()
	var r Request
	derr := decodeRequest(line, &r)
	sess, chat, serr := scanIDs(line)
	if derr != nil {
		return // the run's own read stops at this line: what the scan said does not matter
	}
	if serr != nil {
		t.Fatalf("%q: decodeRequest reads it, scanIDs says %v", line, serr)
	}
	if string(sess) != r.SessionID || chat != r.ChatID {
		t.Fatalf("%q: scanIDs read session %q chat %d, decodeRequest %q %d", line, sess, chat, r.SessionID, r.ChatID)
	}
}

func TestScanIDsMatchesDecode(t *testing.T) {
	for _, r := range someRequests(12) {
		b, _ := json.Marshal(r)
		scanAgrees(t, b)
	}
	for _, tc := range []struct {
		line    string
		session string
		chat    int64
		bad     bool
	}{
		{line: `{"session_id":"a","chat_id":3,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[7]}`, session: "a", chat: 3},
		{line: `{"chat_id":4,"hash_ids":[1, 2 ,3],"session_id":"b\u0041"}`, session: "bA", chat: 4},
		{line: `{"chat_id":5,"session_id":null}`, chat: 5},
		{line: `{"session_id":"x","chat_id":5,"session_id":"y","chat_id":6}`, session: "y", chat: 6},
		{line: `{"session_id":"x","chat_id":5,"session_id":null}`, session: "x", chat: 5},
		{line: `{"chat_id":7,"hash_ids":["]",1],"session_id":"c"}`, session: "c", chat: 7}, // a string in the array: the bracket search is not trusted
		{line: `{"chat_id":8,"hash_ids":[[1],2],"session_id":"d"}`, session: "d", chat: 8},
		{line: `{"chat_id":9,"extra":{"a":[1,{"b":"]"}]},"session_id":"e"}`, session: "e", chat: 9},
		{line: ` { "chat_id" : 10 , "session_id" : "f" } `, session: "f", chat: 10},
		// the writer's form, read up to the chat id only when nothing later can be either key
		{line: `{"session_id":"w","chat_id":11,"parent_chat_id":-1,"hash_ids":[1,2]}`, session: "w", chat: 11},
		{line: `{"session_id":"w","chat_id":-12}`, session: "w", chat: -12},
		{line: `{"session_id":"w","chat_id":12,"x":1,"session_id":"v"}`, session: "v", chat: 12},
		{line: `{"session_id":"w","chat_id":12,"chat_id":13}`, session: "w", chat: 13},
		{line: `{"session_id":"w","chat_id":12,"session_\u0069d":"u"}`, session: "u", chat: 12},
		{line: `{"session_id":"w","chat_id":12,"chat\u005fid":14}`, session: "w", chat: 14},
		{line: `{"session_id":"w","chat_id":12,"type":"\"session_id"}`, session: "w", chat: 12},
		{line: `{"session_id":"w","chat_id":12,"extra":{"chat_id":15}}`, session: "w", chat: 12},
		{line: `{"session_id":"w","chat_id":12,"session_id":null}`, session: "w", chat: 12},
		{line: `{"session_id":"w\u0041","chat_id":16}`, session: "wA", chat: 16},
		{line: `{"session_id":"w","chat_id":123456789012345678901}`, bad: true},
		{line: `{"session_id":"w","chat_id":1234567890123456789}`, session: "w", chat: 1234567890123456789},
		{line: `{"session_id":"w","chat_id":007}`, bad: true},
		{line: `{"session_id":"w","chat_id":7.5,"x":1}`, bad: true},
		{line: `{"session_id":"w","chat_id":7e2}`, bad: true},
		{line: `{"session_id":"a"}`, bad: true},
		{line: `{}`, bad: true},
		{line: `{"chat_id":1.5}`, bad: true},
		{line: `{"chat_id":1,"hash_ids":[1,2}`, bad: true},
		{line: `{"chat_id":1} x`, bad: true},
		{line: `[1]`, bad: true},
	} {
		sess, chat, err := scanIDs([]byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: scanIDs read it (session %q chat %d), want an error", tc.line, sess, chat)
			}
			continue
		}
		if err != nil || string(sess) != tc.session || chat != tc.chat {
			t.Errorf("%s: got %q %d %v, want %q %d", tc.line, sess, chat, err, tc.session, tc.chat)
		}
		scanAgrees(t, []byte(tc.line))
	}
}

// TestNextIDsReadsWhatNextReads: the same lines (blank ones skipped, the
// header's first data line kept), numbered the same in errors.
func TestNextIDsReadsWhatNextReads(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\"pdhybrid_trace\":1,\"block_size\":16}\n")
	reqs := someRequests(8)
	for i, r := range reqs {
		l, _ := json.Marshal(r)
		b.Write(l)
		b.WriteString("\n")
		if i == 2 {
			b.WriteString("  \n\n")
		}
	}
	b.WriteString("{\"chat_id\":\n")
	for _, ids := range []bool{false, true} {
		rd, err := NewReader(strings.NewReader(b.String()), "t.jsonl", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			var sess string
			var chat int64
			if ids {
				s, c, e := rd.NextIDs()
				sess, chat, err = string(s), c, e
			} else {
				var r Request
				err = rd.Next(&r)
				sess, chat = r.SessionID, r.ChatID
			}
			if err != nil {
				var te *Error
				if i != len(reqs) || !errors.As(err, &te) || te.File != "t.jsonl" || te.Line != len(reqs)+4 {
					t.Fatalf("ids=%v: request %d: %v", ids, i, err)
				}
				break
			}
			if i >= len(reqs) || sess != reqs[i].SessionID || chat != reqs[i].ChatID {
				t.Fatalf("ids=%v: request %d read as %q %d", ids, i, sess, chat)
			}
		}
		if _, _, err := rd.NextIDs(); err != io.EOF {
			t.Fatalf("ids=%v: after the last line: %v, want EOF", ids, err)
		}
	}
}

func FuzzScanIDsMatchesDecode(f *testing.F) {
	for _, r := range someRequests(4) {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	for _, s := range []string{`{}`, `{"chat_id":`, `{"hash_ids":[1,2,`, `{"x":[[[[{}]]]]}`, `{"session_id":"\ud83d\ude00","chat_id":1}`,
		`{"chat_id":1,"hash_ids":["]"]}`, `{"chat_id":1,"hash_ids":[1,]}`,
		`{"session_id":"a","chat_id":1,"x":2,"session_id":"b"}`, `{"session_id":"a","chat_id":-0,"chat\u005fid":3}`,
		`{"session_id":"a","chat_id":12345678901234567,"hash_ids":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n\r") {
			return
		}
		scanAgrees(t, line)
	})
}
