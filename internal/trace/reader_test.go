package trace_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// A headerless file whose first line is no JSON object is named as such.
func TestReaderNotJSON(t *testing.T) {
	for in, want := range map[string]string{
		"\x7fELF\x00\x01\n":                              "f:1: binary data",
		"\n\nsession,turn\n":                             "f:3: text (\"session,turn\"...), not a JSON object",
		`{"chat_id":1}` + "\n":                           "",
		`{"pdhybrid_trace":1,"block_size":4}` + "\nxx\n": "",
	} {
		rd, err := trace.NewReader(strings.NewReader(in), "f", 0)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := rd.NotJSON(); err != nil {
			got = err.Error()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: NotJSON %q, want %q", in, got, want)
		}
	}
}

// TestLinesLongerThanTheBuffer: lines of several times the reader's buffer
// (a prompt of 40,000 blocks), between short ones and as the last line
// with no newline, read whole by Next and NextIDs, and an error on the line
// after a long one names that line.
func TestLinesLongerThanTheBuffer(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"pdhybrid_trace":1,"block_size":1}` + "\n")
	long := func(chat int, n int) trace.Request {
		r := trace.Request{SessionID: "s" + strconv.Itoa(chat), ChatID: int64(chat), ParentChatID: -1, Turn: 1, InputLength: n, OutputLength: 1}
		for i := range n {
			r.HashIDs = append(r.HashIDs, uint64(1000000+i))
		}
		return r
	}
	reqs := []trace.Request{long(0, 3), long(1, 40000), long(2, 5), long(3, 25000)}
	for i, r := range reqs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		if i < len(reqs)-1 {
			b.WriteString("\n")
		}
	}
	if len(b.String()) < 4*64<<10 {
		t.Fatalf("the test's lines are %d bytes in all, not several times the buffer", len(b.String()))
	}
	for _, ids := range []bool{false, true} {
		rd, err := trace.NewReader(strings.NewReader(b.String()), "long", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range reqs {
			if ids {
				sess, chat, err := rd.NextIDs()
				if err != nil || string(sess) != want.SessionID || chat != want.ChatID {
					t.Fatalf("NextIDs %d: %q %d %v", i, sess, chat, err)
				}
				continue
			}
			var got trace.Request
			if err := rd.Next(&got); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Next %d: %v (%d hash ids, want %d)", i, err, len(got.HashIDs), len(want.HashIDs))
			}
		}
		if rd.Line() != len(reqs)+1 {
			t.Errorf("ids=%v: at line %d after the last, want %d", ids, rd.Line(), len(reqs)+1)
		}
	}
	bad := strings.Replace(b.String(), `{"session_id":"s2"`, `{"session_id":2`, 1)
	rd, _ := trace.NewReader(strings.NewReader(bad), "long", 0)
	var r trace.Request
	for range 2 {
		if err := rd.Next(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := rd.Next(&r); err == nil || !strings.Contains(err.Error(), "long:4:") {
		t.Fatalf("the line after a long one: %v, want an error at long:4", err)
	}
}
