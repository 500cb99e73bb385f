package stats

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TestDistMatchesPercentile checks the counted-value percentiles against
// metrics.Percentile on the expanded sample list.
func TestDistMatchesPercentile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 10, 101, 1000} {
		d := NewIntDist()
		var xs []float64
		for range n {
			v := float64(rng.IntN(50)) // many repeats
			d.Add(v)
			xs = append(xs, v)
		}
		sort.Float64s(xs)
		s := d.Summary()
		for _, c := range []struct {
			got, q float64
		}{{s.P50, 50}, {s.P90, 90}, {s.P99, 99}} {
			if want := metrics.Percentile(xs, c.q); math.Abs(c.got-want) > 1e-9 {
				t.Errorf("n=%d p%v: got %v want %v", n, c.q, c.got, want)
			}
		}
		if s.Max != xs[n-1] || s.Min != xs[0] || s.Count != n {
			t.Errorf("n=%d: summary %+v", n, s)
		}
	}
	if (NewTimeDist().Summary() != Summary{}) {
		t.Error("empty dist not zero")
	}
}

func req(sess string, chat, parent int64, ts float64, in int, ids ...uint64) *trace.Request {
	return &trace.Request{SessionID: sess, ChatID: chat, ParentChatID: parent, Timestamp: ts, InputLength: in, OutputLength: 1, Turn: 1, HashIDs: ids}
}

// TestPrefixHits: a block hits only when its whole chain was seen; equal ids
// behind a different prefix miss.
func TestPrefixHits(t *testing.T) {
	cases := []struct {
		name        string
		reqs        []*trace.Request
		hits, cross int64
		blocks      int64
	}{
		{"growing session", []*trace.Request{req("a", 0, -1, 0, 0, 1, 2), req("a", 1, 0, 1, 0, 1, 2, 3)}, 2, 0, 5},
		{"same ids other prefix", []*trace.Request{req("a", 0, -1, 0, 0, 1, 2, 3), req("b", 1, -1, 1, 0, 9, 2, 3)}, 0, 0, 6},
		{"cross-session prefix", []*trace.Request{req("a", 0, -1, 0, 0, 1, 2, 3), req("b", 1, -1, 1, 0, 1, 2, 7)}, 2, 2, 6},
		{"diverge then rejoin", []*trace.Request{req("a", 0, -1, 0, 0, 1, 2, 3), req("a", 1, 0, 1, 0, 1, 5, 3)}, 1, 0, 6},
	}
	for _, c := range cases {
		col := NewCollector(trace.Header{BlockSize: 4})
		for _, r := range c.reqs {
			col.Add(r)
		}
		rep := col.Report()
		if rep.BlocksHit != c.hits || rep.CrossSessionHitBlocks != c.cross || rep.BlocksRequested != c.blocks {
			t.Errorf("%s: hits %d cross %d blocks %d; want %d %d %d", c.name, rep.BlocksHit, rep.CrossSessionHitBlocks, rep.BlocksRequested, c.hits, c.cross, c.blocks)
		}
	}
}

func TestReportCounts(t *testing.T) {
	think := 2.0
	rs := []*trace.Request{
		req("a", 0, -1, 0, 10, 1),
		req("b", 1, -1, 1, 20, 2),
		req("a", 2, 0, 4, 30, 1, 3),
	}
	rs[2].Turn, rs[2].ThinkTimeS = 2, &think
	rs[1].ParentSessionID = "a"
	col := NewCollector(trace.Header{BlockSize: 16, Source: "t"})
	for _, r := range rs {
		col.Add(r)
	}
	rep := col.Report()
	if rep.Requests != 3 || rep.Sessions != 2 || rep.SubagentSessions != 1 || rep.BlockSize != 16 ||
		rep.InputTokens.Mean != 20 || rep.InterTurnGapS.Count != 1 || rep.InterTurnGapS.Max != 4 ||
		rep.ThinkTimeS.Mean != 2 || rep.TurnsPerSession.Max != 2 || !rep.GlobalTimeOrdered || rep.DurationS != 4 {
		t.Fatalf("report %+v", rep)
	}
}

func TestDerivesSessionsWhenMissing(t *testing.T) {
	col := NewCollector(trace.Header{BlockSize: 16})
	col.Add(&trace.Request{ChatID: 5, ParentChatID: -1, Timestamp: 0})
	col.Add(&trace.Request{ChatID: 6, ParentChatID: 5, Timestamp: 2})
	col.Add(&trace.Request{ChatID: 7, ParentChatID: -1, Timestamp: 3})
	rep := col.Report()
	if rep.Sessions != 2 || rep.InterTurnGapS.Mean != 2 {
		t.Fatalf("report %+v", rep)
	}
}
