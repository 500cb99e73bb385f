package convert

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func collect(t *testing.T, s *Stream) ([]trace.Request, error) {
	var out []trace.Request
	err := s.Run(func(r *trace.Request) error {
		c := *r
		c.HashIDs = append([]uint64(nil), r.HashIDs...)
		out = append(out, c)
		return nil
	})
	return out, err
}

// Bailian-style lines: no session ids, no turns, 16-token blocks; line 3 has
// a wrong hash count and line 5 is its child, line 6 is not JSON.
const bailian = `{"chat_id":1,"parent_chat_id":-1,"timestamp":0,"input_length":20,"output_length":5,"type":"text","hash_ids":[1,2]}
{"chat_id":2,"parent_chat_id":1,"timestamp":1.5,"input_length":40,"output_length":5,"type":"text","hash_ids":[1,2,3]}
{"chat_id":3,"parent_chat_id":-1,"timestamp":2,"input_length":40,"output_length":5,"type":"text","hash_ids":[9]}
{"chat_id":4,"parent_chat_id":2,"timestamp":3,"input_length":5,"output_length":5,"type":"text","hash_ids":[1]}
{"chat_id":5,"parent_chat_id":3,"timestamp":4,"input_length":5,"output_length":5,"type":"text","hash_ids":[9]}
not json
`

func TestPassThroughBailian(t *testing.T) {
	p := write(t, "b.jsonl", bailian)
	s, err := Open(p, Options{From: "bailian"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Header.BlockSize != 16 || s.Header.Source != "bailian" {
		t.Fatalf("header %+v", s.Header)
	}
	out, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, r.SessionID+"/"+string(rune('0'+r.Turn)))
	}
	if !reflect.DeepEqual(got, []string{"s1/1", "s1/2", "s1/3"}) {
		t.Fatalf("sessions/turns %v", got)
	}
	if len(s.Skips) != 3 ||
		!strings.HasSuffix(s.Skips[0].Where, ":3") || !strings.Contains(s.Skips[0].Reason, `field "hash_ids"`) ||
		!strings.HasSuffix(s.Skips[1].Where, ":5") || !strings.Contains(s.Skips[1].Reason, "was dropped") ||
		!strings.HasSuffix(s.Skips[2].Where, ":6") || !strings.Contains(s.Skips[2].Reason, "malformed JSON") {
		t.Fatalf("skips %+v", s.Skips)
	}

	s, _ = Open(p, Options{From: "bailian", Strict: true})
	if _, err := collect(t, s); !errors.Is(err, ErrStrict) || !strings.Contains(err.Error(), ":3") {
		t.Fatalf("strict: %v", err)
	}
	// --block-size overrides: with 24-token blocks line 1 needs 1 id, not 2.
	s, _ = Open(p, Options{From: "seed"})
	collect(t, s)
	if s.Header.BlockSize != 24 || !strings.HasSuffix(s.Skips[0].Where, ":1") {
		t.Fatalf("seed block size: %+v %+v", s.Header, s.Skips[0])
	}
	s, _ = Open(p, Options{From: "seed", BlockSize: 16})
	collect(t, s)
	if s.Header.BlockSize != 16 || len(s.Skips) != 3 {
		t.Fatalf("override: %+v %d skips", s.Header, len(s.Skips))
	}
}

func TestPassThroughOrder(t *testing.T) {
	p := write(t, "u.jsonl", `{"chat_id":1,"parent_chat_id":-1,"timestamp":5,"input_length":0,"output_length":1,"hash_ids":[]}
{"chat_id":2,"parent_chat_id":-1,"timestamp":1,"input_length":0,"output_length":1,"hash_ids":[]}
`)
	s, _ := Open(p, Options{From: "bailian"})
	if _, err := collect(t, s); err == nil || !strings.Contains(err.Error(), "--sort") {
		t.Fatalf("unsorted input accepted: %v", err)
	}
	s, _ = Open(p, Options{From: "bailian", Sort: true})
	out, err := collect(t, s)
	if err != nil || out[0].ChatID != 2 || out[1].ChatID != 1 {
		t.Fatalf("sorted: %v %+v", err, out)
	}
}

func TestMooncakeSkipsAndSorts(t *testing.T) {
	p := write(t, "m.jsonl", `{"timestamp": 2000, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}
{"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [0, 1, 2]}
{"timestamp": 3000, "input_length": 1200, "output_length": 3, "hash_ids": [0, 1, 5]}
{"timestamp": 3000, "input_length": 1200, "output_length": 3}
`)
	s, err := Open(p, Options{From: "mooncake"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Timestamp != 2 || out[1].Timestamp != 3 || out[1].ParentChatID != 0 || out[1].Turn != 2 {
		t.Fatalf("out %+v", out)
	}
	if len(s.Skips) != 2 || !strings.HasSuffix(s.Skips[0].Where, ":2") || !strings.HasSuffix(s.Skips[1].Where, ":4") {
		t.Fatalf("skips %+v", s.Skips)
	}
}

func TestDetect(t *testing.T) {
	cases := map[string]string{
		`{"pdhybrid_trace":1,"block_size":16}`:                                     "canonical",
		`{"chat_id":1,"parent_chat_id":-1}`:                                        "canonical",
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}`: "mooncake",
		"{\n  \"id\": \"trace_0002\",":                                             "weka",
	}
	for body, want := range cases {
		got, err := Detect(write(t, "x", "\n"+body+"\n"))
		if err != nil || got != want {
			t.Errorf("%q: got %q %v, want %q", body, got, err, want)
		}
	}
	if got, _ := Detect(t.TempDir()); got != "weka" {
		t.Errorf("directory: %q", got)
	}
	if _, err := Detect(write(t, "e", "\n\n")); err == nil {
		t.Error("empty file detected")
	}
}
