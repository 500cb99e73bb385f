package sim

import (
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
		if closed.stats.closedSessions != open.stats.Sessions || len(closed.sessions) != 0 {
			t.Errorf("%s: %d of %d sessions closed, %d left", c.name, closed.stats.closedSessions, open.stats.Sessions, len(closed.sessions))
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
