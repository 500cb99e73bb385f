package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

func readOne(t *testing.T, line string) (trace.Request, error) {
	t.Helper()
	_, reqs, err := trace.ReadAll(strings.NewReader("{\"pdhybrid_trace\":1,\"block_size\":16}\n"+line+"\n"), "f.jsonl", 0)
	if len(reqs) > 0 {
		return reqs[0], err
	}
	return trace.Request{}, err
}

func TestDecodeValid(t *testing.T) {
	tt := 2.5
	cases := []struct {
		name string
		line string
		want trace.Request
	}{
		{"full", `{"session_id":"s1","parent_session_id":"p","chat_id":7,"parent_chat_id":3,"turn":2,"timestamp":1.25,"input_length":20,"output_length":5,"type":"text","think_time_s":2.5,"hash_ids":[1,18446744073709551615]}`,
			trace.Request{SessionID: "s1", ParentSessionID: "p", ChatID: 7, ParentChatID: 3, Turn: 2, Timestamp: 1.25, InputLength: 20, OutputLength: 5, Type: "text", ThinkTimeS: &tt, HashIDs: []uint64{1, 18446744073709551615}}},
		{"bailian order, no session, spaces, extra fields", ` { "chat_id" : 1 , "parent_chat_id" : -1, "timestamp": 3, "input_length": 0, "output_length": 0, "type": "", "turn": 1, "hash_ids": [ ], "x": {"a":[1,{"b":null}],"c":true}, "y": "q\"z" } `,
			trace.Request{ChatID: 1, ParentChatID: -1, Turn: 1, Timestamp: 3, HashIDs: []uint64{}}},
		{"exponent time, null think, escaped id", `{"session_id":"a\u00e9\/b","chat_id":1,"parent_chat_id":-1,"timestamp":1e3,"input_length":1,"output_length":1,"think_time_s":null,"hash_ids":[0]}`,
			trace.Request{SessionID: "aé/b", ChatID: 1, ParentChatID: -1, Timestamp: 1000, InputLength: 1, OutputLength: 1, HashIDs: []uint64{0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readOne(t, c.line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestDecodeErrorsAreLocated(t *testing.T) {
	cases := []struct {
		line, field, msg string
	}{
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1}`, "hash_ids", "missing"},
		{`{"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[]}`, "chat_id", "missing"},
		{`{"chat_id":"1","parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[]}`, "chat_id", "got a string, expected an integer"},
		{`{"chat_id":1.5,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[]}`, "chat_id", "got number 1.5"},
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":"x","input_length":1,"output_length":1,"hash_ids":[]}`, "timestamp", "got a string"},
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1,-2]}`, "hash_ids", "element 1"},
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[18446744073709551616]}`, "hash_ids", "out of the 64-bit"},
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1 2]}`, "", "malformed JSON"},
		{`{"chat_id":1,`, "", "malformed JSON"},
		{`[1,2]`, "", "expected '{'"},
		{`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[]} x`, "", "unexpected data"},
	}
	for _, c := range cases {
		_, err := readOne(t, c.line)
		var te *trace.Error
		if !errors.As(err, &te) {
			t.Fatalf("%s: got %v, want *trace.Error", c.line, err)
		}
		if te.File != "f.jsonl" || te.Line != 2 || te.Field != c.field || !strings.Contains(te.Msg, c.msg) {
			t.Errorf("%s:\n got %q (field %q)\nwant line 2 field %q msg containing %q", c.line, te, te.Field, c.field, c.msg)
		}
	}
}

// TestDecodeMatchesEncodingJSON checks the hand-rolled decoder against
// encoding/json on generated lines.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, r := range tracetest.Sessions(3, 5, 6, 16) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readOne(t, string(b))
		if err != nil {
			t.Fatal(err)
		}
		var want trace.Request
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	reqs := tracetest.Sessions(1, 20, 8, 64)
	h := trace.Header{BlockSize: 64, Source: "test \"q\"\n", Note: "n"}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	h.Version = trace.FormatVersion
	gotH, got, err := trace.ReadAll(bytes.NewReader(buf.Bytes()), "rt", 0)
	if err != nil {
		t.Fatal(err)
	}
	if gotH != h || !reflect.DeepEqual(got, reqs) {
		t.Fatalf("round trip changed the trace: header %+v vs %+v", gotH, h)
	}
	// Writing again gives the same bytes.
	var again bytes.Buffer
	w2, _ := trace.NewWriter(&again, gotH)
	for i := range got {
		w2.Write(&got[i])
	}
	w2.Flush()
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatal("writer output is not byte-stable")
	}
}

func TestReaderContinuesAfterBadLine(t *testing.T) {
	in := "{\"pdhybrid_trace\":1,\"block_size\":4}\n" +
		`{"chat_id":0,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1]}` + "\n" +
		"garbage\n\n" +
		`{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[2]}` + "\r\n"
	rd, err := trace.NewReader(strings.NewReader(in), "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	var req trace.Request
	var lines []int
	var bad []int
	for {
		err := rd.Next(&req)
		if err == io.EOF {
			break
		}
		if err != nil {
			bad = append(bad, err.(*trace.Error).Line)
			continue
		}
		lines = append(lines, rd.Line())
	}
	if !reflect.DeepEqual(lines, []int{2, 5}) || !reflect.DeepEqual(bad, []int{3}) {
		t.Fatalf("good lines %v bad %v", lines, bad)
	}
}

// FuzzDecodeLine: any input gives a request or a located *trace.Error, never
// a panic; what decodes re-encodes and decodes to the same request.
func FuzzDecodeLine(f *testing.F) {
	for _, r := range tracetest.Sessions(2, 2, 3, 16) {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	for _, s := range []string{`{}`, `{"chat_id":`, `{"hash_ids":[1,2,`, `{"x":[[[[{}]]]]}`, `{"session_id":"\ud83d\ude00"}`, `nul`, `{"timestamp":-0.0e-5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n\r") {
			return
		}
		in := append([]byte("{\"pdhybrid_trace\":1,\"block_size\":16}\n"), line...)
		_, reqs, err := trace.ReadAll(bytes.NewReader(in), "fz", 0)
		if err != nil {
			var te *trace.Error
			if !errors.As(err, &te) || te.Line != 2 || te.File != "fz" {
				t.Fatalf("error not located: %v", err)
			}
			return
		}
		if len(reqs) != 1 {
			if len(bytes.TrimSpace(line)) == 0 {
				return
			}
			t.Fatalf("got %d requests", len(reqs))
		}
		var buf bytes.Buffer
		w, _ := trace.NewWriter(&buf, trace.Header{BlockSize: 16})
		w.Write(&reqs[0])
		w.Flush()
		_, again, err := trace.ReadAll(&buf, "re", 0)
		if err != nil || len(again) != 1 {
			t.Fatalf("re-read: %v", err)
		}
		a, b := again[0], reqs[0]
		if len(a.HashIDs) == 0 && len(b.HashIDs) == 0 {
			a.HashIDs, b.HashIDs = nil, nil
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("re-encode changed request:\n%+v\n%+v", a, b)
		}
	})
}
