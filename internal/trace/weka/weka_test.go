package weka

import (
	"errors"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

// A session with a sub-agent: request 0 ends at 0+2 = 2 s, the sub-agent
// runs 2..12 s (t = 12 is its end, duration 10 s), its requests at 2 and 5 s;
// the parent resumes at 20 s after think_time 18 (20 − (0 + 2)).
const sessA = `{"id":"A","block_size":4,"tool_tokens":6,"system_tokens":3,"requests":[
 {"t":0,"type":"n","in":10,"out":3,"hash_ids":[1,2],"api_time":2,"think_time":0},
 {"t":12,"type":"subagent","agent_id":"ag","duration_ms":10000,"tool_tokens":4,"system_tokens":0,"requests":[
   {"t":0,"type":"n","in":8,"out":1,"hash_ids":[7,8],"api_time":1,"think_time":0},
   {"t":3,"type":"n","in":9,"out":1,"hash_ids":[7,8],"api_time":1,"think_time":2}]},
 {"t":20,"type":"n","in":13,"out":4,"hash_ids":[1,2,3],"api_time":1,"think_time":18},
 {"t":25,"type":"n","out":4,"hash_ids":[1,2,3]}
]}`

const sessB = `{"id":"B","block_size":4,"tool_tokens":4,"system_tokens":0,"requests":[
 {"t":0,"type":"n","in":4,"out":1,"hash_ids":[1],"think_time":0},
 {"t":1,"type":"n","in":8,"out":1,"hash_ids":[1,2],"think_time":1}]}`

func convertFixture(t *testing.T, opt Options) *Result {
	t.Helper()
	res, err := Convert([]Source{{"a.json", []byte(sessA)}, {"b.json", []byte(sessB)}, {"bad.json", []byte(`{"id":`)}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestConvertFixture(t *testing.T) {
	res := convertFixture(t, Options{Arrival: "stagger", Stagger: 3})
	type row struct {
		sess, parentSess string
		chat, parent     int64
		turn             int
		ts               float64
		think            float64 // -1: absent
		ids              []uint64
	}
	ns := func(n, l uint64) uint64 { return n<<32 | l }
	want := []row{
		{"A", "", 0, -1, 1, 0, -1, []uint64{ns(1, 1), ns(1, 2), partialBit | 0}},
		{"A/ag", "A", 1, -1, 1, 2, -1, []uint64{ns(1, 7), ns(1, 8)}},
		{"B", "", 2, -1, 1, 3, -1, []uint64{ns(2, 1)}},
		{"B", "", 3, 2, 2, 4, 1, []uint64{ns(2, 1), ns(2, 2)}},
		{"A/ag", "A", 4, 1, 2, 5, 2, []uint64{ns(1, 7), ns(1, 8), partialBit | 4}},
		{"A", "", 5, 0, 2, 20, 18, []uint64{ns(1, 1), ns(1, 2), ns(1, 3), partialBit | 5}},
	}
	if len(res.Requests) != len(want) {
		t.Fatalf("got %d requests: %+v", len(res.Requests), res.Requests)
	}
	for i, w := range want {
		r := res.Requests[i]
		think := -1.0
		if r.ThinkTimeS != nil {
			think = *r.ThinkTimeS
		}
		if r.SessionID != w.sess || r.ParentSessionID != w.parentSess || r.ChatID != w.chat || r.ParentChatID != w.parent ||
			r.Turn != w.turn || r.Timestamp != w.ts || think != w.think || !equal(r.HashIDs, w.ids) {
			t.Errorf("request %d:\n got %+v think %v\nwant %+v", i, r, think, w)
		}
	}
	if res.Sessions != 2 || res.Subagents != 1 || len(res.Skips) != 2 {
		t.Fatalf("sessions %d subagents %d skips %+v", res.Sessions, res.Subagents, res.Skips)
	}
	if !strings.Contains(res.Skips[0].Reason, "missing in") || !strings.Contains(res.Skips[0].Where, "requests[3]") ||
		!strings.Contains(res.Skips[1].Reason, "whole file") {
		t.Errorf("skips %+v", res.Skips)
	}
	chk := trace.NewChecker(4)
	for i := range res.Requests {
		if errs := chk.Check(&res.Requests[i], i+1); len(errs) > 0 {
			t.Fatalf("converted output invalid: %v", errs[0])
		}
		chk.Accept(&res.Requests[i], i+1)
	}
}

func TestSharedPrefix(t *testing.T) {
	res := convertFixture(t, Options{Stagger: 100, SharedPrefix: true})
	// A: floor((6+3)/4) = 2 shared blocks; its sub-agent floor(4/4) = 1; B 1.
	for _, r := range res.Requests {
		var want []uint64
		switch r.SessionID {
		case "A":
			want = []uint64{1, 2}
		case "A/ag", "B":
			want = []uint64{1}
		}
		if !equal(r.HashIDs[:len(want)], want) {
			t.Errorf("%s turn %d: ids %v, want prefix %v", r.SessionID, r.Turn, r.HashIDs, want)
		}
	}
}

func TestPoissonArrivalDeterministic(t *testing.T) {
	a := convertFixture(t, Options{Arrival: "poisson", Rate: 0.5, Seed: 9})
	b := convertFixture(t, Options{Arrival: "poisson", Rate: 0.5, Seed: 9})
	c := convertFixture(t, Options{Arrival: "poisson", Rate: 0.5, Seed: 10})
	ts := func(r *Result, s string) float64 {
		for _, q := range r.Requests {
			if q.SessionID == s {
				return q.Timestamp
			}
		}
		return -1
	}
	if ts(a, "B") != ts(b, "B") || ts(a, "B") == ts(c, "B") || ts(a, "A") != 0 {
		t.Fatalf("B starts %v %v %v", ts(a, "B"), ts(b, "B"), ts(c, "B"))
	}
	if _, err := Convert(nil, Options{Arrival: "poisson"}); err == nil {
		t.Fatal("poisson without rate accepted")
	}
}

func TestParseErrorsLocated(t *testing.T) {
	cases := []struct{ doc, path, msg string }{
		{"{\n\"id\": \"x\",\n\"requests\": [ {\"in\": \"many\"} ]\n}", "requests.in", "expected an integer"},
		{"{\n\"requests\": [\n}", "", "malformed JSON"},
		{`{"id":"x"}`, "requests", "missing"},
		{`{"block_size":-1,"requests":[]}`, "block_size", "positive"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc), "s.json")
		var pe *trace.Error
		if !errors.As(err, &pe) || pe.File != "s.json" || pe.Field != c.path || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%q: got %v", c.doc, err)
		}
	}
	_, err := Parse([]byte("{\n\"requests\": [\n}"), "s.json")
	if pe := err.(*trace.Error); pe.Line != 3 {
		t.Errorf("syntax error on line %d, want 3", pe.Line)
	}
}

// FuzzParse: any document parses or gives a located error; whatever parses
// converts without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sessA))
	f.Add([]byte(sessB))
	f.Add([]byte(`{"requests":[{"type":"subagent","t":1,"requests":[{"type":"subagent"}]}]}`))
	f.Add([]byte(`{"block_size":0,"requests":[{"t":1,"in":5,"out":1,"hash_ids":[-1]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		file, err := Parse(doc, "fz.json")
		if err != nil {
			var pe *trace.Error
			if !errors.As(err, &pe) || pe.File != "fz.json" {
				t.Fatalf("unlocated error %v", err)
			}
			return
		}
		_ = file
		if _, err := Convert([]Source{{"fz.json", doc}}, Options{BlockSize: 4}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSharedWeka converts the real kv-cache-tester set when present.
func TestSharedWeka(t *testing.T) {
	dir := tracetest.SharedTraces(t, "weka")
	srcs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(srcs, Options{Stagger: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 5049 || res.Sessions != 145 || res.Subagents != 7 || len(res.Skips) != 0 {
		t.Fatalf("requests %d sessions %d subagents %d skips %d", len(res.Requests), res.Sessions, res.Subagents, len(res.Skips))
	}
	chk := trace.NewChecker(64)
	for i := range res.Requests {
		if errs := chk.Check(&res.Requests[i], i+1); len(errs) > 0 {
			t.Fatalf("%v", errs[0])
		}
		chk.Accept(&res.Requests[i], i+1)
	}
	if ok, _, _ := chk.Order(); !ok {
		t.Fatal("not in global timestamp order")
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
