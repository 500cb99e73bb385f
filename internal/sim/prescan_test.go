package sim

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// collect reads a generator into memory, with its own last-turn flags.
func collect(t *testing.T, st Source) (*SliceSource, []bool) {
	t.Helper()
	out := &SliceSource{H: st.Header()}
	var flags []bool
	for {
		var r trace.Request
		err := st.Next(&r)
		if errors.Is(err, io.EOF) {
			return out, flags
		}
		if err != nil {
			t.Fatal(err)
		}
		r.HashIDs = append([]uint64(nil), r.HashIDs...)
		out.Reqs = append(out.Reqs, r)
		flags = append(flags, st.(SessionEnds).LastOfSession())
	}
}

// TestScanSessionEnds: a scan of a stored stream marks the requests the
// generator itself calls last, and a run reading the stream through it
// closes every session and moves no record; a reused chat id or a missing
// session id marks nothing.
func TestScanSessionEnds(t *testing.T) {
	p := profile(t)
	ag := synth.DefaultAgentic()
	ag.Sessions = 40
	agentic, err := synth.NewAgentic(ag)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  Source
	}{{"groups", groupsStream(t, nil)}, {"agentic", agentic}} {
		stored, want := collect(t, c.src)
		lasts, err := ScanSessionEnds(&SliceSource{H: stored.H, Reqs: stored.Reqs})
		if err != nil || lasts == nil {
			t.Fatalf("%s: scan: %v, %v", c.name, lasts, err)
		}
		src := lasts.Source(&SliceSource{H: stored.H, Reqs: stored.Reqs}).(*lastsSource)
		for i := range stored.Reqs {
			var r trace.Request
			if err := src.Next(&r); err != nil {
				t.Fatal(err)
			}
			if got := src.LastOfSession(); got != want[i] {
				t.Fatalf("%s: request %d (session %s turn %d): scan says last %v, the generator %v", c.name, i, r.SessionID, r.Turn, got, want[i])
			}
		}
		cfg := Config{Name: "kvc-v3", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: kvcV3Preset}}
		open, openRecs := forgetRun(t, cfg, openEnded{&SliceSource{H: stored.H, Reqs: stored.Reqs}}, 0)
		closed, closedRecs := forgetRun(t, cfg, lasts.Source(&SliceSource{H: stored.H, Reqs: stored.Reqs}), 0)
		if !reflect.DeepEqual(openRecs.recs, closedRecs.recs) || len(openRecs.recs) != len(stored.Reqs) {
			t.Errorf("%s: closing the scanned sessions moved the records", c.name)
		}
		if closed.stats.closedSessions != open.stats.Sessions || closed.heldSessions() != 0 {
			t.Errorf("%s: %d of %d sessions closed, %d left", c.name, closed.stats.closedSessions, open.stats.Sessions, closed.heldSessions())
		}
	}
	reqs := []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1},
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1},
		{SessionID: "c", ChatID: 1, ParentChatID: -1, Turn: 1},
	}
	if l, err := ScanSessionEnds(&SliceSource{Reqs: reqs}); l != nil || err != nil {
		t.Errorf("a reused chat id: got %v, %v, want nothing marked", l, err)
	}
	reqs[2] = trace.Request{ChatID: 3, ParentChatID: 2, Turn: 2}
	if l, err := ScanSessionEnds(&SliceSource{Reqs: reqs}); l != nil || err != nil {
		t.Errorf("a missing session id: got %v, %v, want nothing marked", l, err)
	}
	if src := (*SessionLasts)(nil).Source(&SliceSource{Reqs: reqs}); sessionEnds(src) != nil {
		t.Error("no scan: the source answers SessionEnds")
	}
}

// TestScanOfAFileReadsIDsOnly: a scan of a trace file (trace.Reader, read
// for its ids alone) marks what a scan of the same requests in memory
// (decoded whole) marks.
func TestScanOfAFileReadsIDsOnly(t *testing.T) {
	stored, _ := collect(t, groupsStream(t, nil))
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, stored.H)
	if err != nil {
		t.Fatal(err)
	}
	for i := range stored.Reqs {
		if err := w.Write(&stored.Reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want, err := ScanSessionEnds(&SliceSource{H: stored.H, Reqs: stored.Reqs})
	if err != nil || want == nil {
		t.Fatal(want, err)
	}
	rd, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "g.jsonl", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ScanSessionEnds(rd)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("file scan: %v, %v; want the in-memory scan's marks", got, err)
	}
	bad, err := trace.NewReader(bytes.NewReader(append(buf.Bytes(), "{\"chat_id\":\n"...)), "g.jsonl", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := ScanSessionEnds(bad); l != nil || err == nil {
		t.Errorf("a malformed last line: got %v, %v, want its error", l, err)
	}
}

// TestChatSetFindsEveryReuse: chat ids far past the dense bits, negative
// ones, and one that went to the map before the bits grew to reach it.
func TestChatSetFindsEveryReuse(t *testing.T) {
	var c chatSet
	ids := []int64{0, 1, 200000, -5, 1 << 40, 2, 3}
	for _, id := range ids {
		if !c.add(id) {
			t.Fatalf("%d: new, called a reuse", id)
		}
	}
	for i := int64(4); i < 10000; i++ { // the bits grow past 200000
		c.add(i * 100)
	}
	for _, id := range ids {
		if c.add(id) {
			t.Errorf("%d reused, called new", id)
		}
	}
}
