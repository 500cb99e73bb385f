package synth

import (
	"errors"
	"io"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// lastFlagged is a stream that says which request is its session's last.
type lastFlagged interface {
	Stream
	LastOfSession() bool
}

// TestLastOfSession: each generator flags a request as its session's last
// only when no later request belongs to that session, and flags every
// session whose turns all came (all of them here: no cap cuts a session).
func TestLastOfSession(t *testing.T) {
	ag := DefaultAgentic()
	ag.Sessions = 60
	agentic, err := NewAgentic(ag)
	if err != nil {
		t.Fatal(err)
	}
	gr := DefaultGroups()
	gr.Sessions = 60
	groups, err := NewGroups(gr)
	if err != nil {
		t.Fatal(err)
	}
	sw := DefaultSeedSWE()
	sw.Sessions = 60
	for _, c := range []struct {
		name string
		st   lastFlagged
	}{{"agentic", agentic}, {"groups", groups}, {"seed-swe", mustSeedWorkload(t, sw)}} {
		var reqs []trace.Request
		var last []bool
		for {
			var r trace.Request
			err := c.st.Next(&r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			reqs, last = append(reqs, r), append(last, c.st.LastOfSession())
		}
		final := map[string]int{} // session → index of its last request
		for i, r := range reqs {
			final[r.SessionID] = i
		}
		flagged := 0
		for i, r := range reqs {
			if last[i] != (final[r.SessionID] == i) {
				t.Fatalf("%s: request %d (session %s turn %d) flagged last %v, but its session's last request is %d",
					c.name, i, r.SessionID, r.Turn, last[i], final[r.SessionID])
			}
			if last[i] {
				flagged++
			}
		}
		if flagged != len(final) || len(final) < 60 {
			t.Errorf("%s: %d of %d sessions flagged", c.name, flagged, len(final))
		}
		t.Logf("%s: %d requests, %d sessions, each flagged once", c.name, len(reqs), len(final))
	}
}
