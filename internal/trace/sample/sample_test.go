package sample

import (
	"bytes"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

func encode(t *testing.T, reqs []trace.Request, bs int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := trace.NewWriter(&buf, trace.Header{BlockSize: bs})
	for i := range reqs {
		w.Write(&reqs[i])
	}
	w.Flush()
	return buf.Bytes()
}

func run(t *testing.T, data []byte, opt Options) (Report, []trace.Request) {
	t.Helper()
	rd, _ := trace.NewReader(bytes.NewReader(data), "in", 0)
	p, err := NewPlan(rd, opt)
	if err != nil {
		t.Fatal(err)
	}
	rd, _ = trace.NewReader(bytes.NewReader(data), "in", 0)
	var out bytes.Buffer
	w, _ := trace.NewWriter(&out, rd.Header())
	rep, err := p.Apply(rd, w)
	if err != nil {
		t.Fatal(err)
	}
	_, reqs, err := trace.ReadAll(&out, "out", 0)
	if err != nil {
		t.Fatal(err)
	}
	chk := trace.NewChecker(rd.Header().BlockSize)
	for i := range reqs {
		if errs := chk.Check(&reqs[i], i+1); len(errs) > 0 {
			t.Fatalf("sample output invalid: %v", errs[0])
		}
		chk.Accept(&reqs[i], i+1)
	}
	return rep, reqs
}

func sessions(reqs []trace.Request) map[string]int {
	m := map[string]int{}
	for _, r := range reqs {
		m[r.SessionID]++
	}
	return m
}

func TestSample(t *testing.T) {
	reqs := tracetest.Sessions(4, 10, 5, 16)
	// Give session 3 a short life and session 4 a long prompt.
	var cut []trace.Request
	for _, r := range reqs {
		if r.SessionID == "sd3" && r.Turn > 2 {
			continue
		}
		if r.SessionID == "se4" && r.Turn == 3 {
			r.InputLength = 100000
			r.HashIDs = make([]uint64, trace.BlocksFor(r.InputLength, 16))
		}
		cut = append(cut, r)
	}
	data := encode(t, cut, 16)

	rep, out := run(t, data, Options{FirstN: 3, Rate: 1})
	if s := sessions(out); len(s) != 3 || s["sa0"] != 5 || s["sd3"] != 0 || rep.DroppedFirstN != 7 {
		t.Errorf("first 3: %v %+v", s, rep)
	}
	rep, out = run(t, data, Options{Rate: 1, MinTurns: 3})
	if s := sessions(out); len(s) != 9 || s["sd3"] != 0 || rep.DroppedMinTurns != 1 {
		t.Errorf("min turns: %v %+v", s, rep)
	}
	rep, out = run(t, data, Options{Rate: 1, Duration: 4.5})
	if s := sessions(out); len(s) != 5 || rep.DroppedDuration != 5 {
		t.Errorf("duration: %v %+v", s, rep)
	}
	rep, out = run(t, data, Options{Rate: 1, MaxInputLen: 50000, Long: "drop"})
	if s := sessions(out); len(s) != 9 || s["se4"] != 0 || rep.DroppedLong != 1 || rep.DroppedLongReqs != 5 {
		t.Errorf("drop long: %v %+v", s, rep)
	}
	rep, out = run(t, data, Options{Rate: 1, MaxInputLen: 50000, Long: "truncate"})
	if s := sessions(out); len(s) != 10 || rep.TruncatedRequests != 1 || rep.TruncatedSessions != 1 {
		t.Errorf("truncate: %v %+v", s, rep)
	}
	for _, r := range out {
		if r.InputLength > 50000 || len(r.HashIDs) != trace.BlocksFor(r.InputLength, 16) {
			t.Errorf("not truncated: %d tokens, %d ids", r.InputLength, len(r.HashIDs))
		}
	}
	a, outA := run(t, data, Options{Rate: 0.5, Seed: 7})
	_, outB := run(t, data, Options{Rate: 0.5, Seed: 7})
	_, outC := run(t, data, Options{Rate: 0.5, Seed: 8})
	if len(outA) != len(outB) || a.DroppedRate == 0 || a.DroppedRate == 10 || equalSessions(sessions(outA), sessions(outC)) {
		t.Errorf("rate sampling not deterministic or not seed-dependent: %v %v %v", sessions(outA), sessions(outB), sessions(outC))
	}
}

func equalSessions(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func TestSubagentsTravelWithParent(t *testing.T) {
	reqs := []trace.Request{
		{SessionID: "p", ChatID: 0, ParentChatID: -1, Turn: 1, Timestamp: 0, HashIDs: []uint64{}},
		{SessionID: "p/a", ParentSessionID: "p", ChatID: 1, ParentChatID: -1, Turn: 1, Timestamp: 1, HashIDs: []uint64{}},
		{SessionID: "q", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 2, HashIDs: []uint64{}},
	}
	rep, out := run(t, encode(t, reqs, 16), Options{Rate: 1, FirstN: 1})
	if s := sessions(out); len(s) != 2 || s["p/a"] != 1 || rep.SessionsOut != 2 || rep.FamiliesIn != 2 {
		t.Fatalf("%v %+v", s, rep)
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []Options{{Rate: 2}, {Rate: 1, MaxInputLen: 5, Long: "x"}, {Rate: 1, FirstN: -1}} {
		rd, _ := trace.NewReader(bytes.NewReader(nil), "x", 16)
		if _, err := NewPlan(rd, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
