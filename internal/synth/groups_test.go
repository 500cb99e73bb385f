package synth

import (
	"io"
	"slices"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

func drainGroups(t *testing.T, c Groups) []trace.Request {
	t.Helper()
	g, err := NewGroups(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.Request
	for {
		var r trace.Request
		if err := g.Next(&r); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
}

// TestGroupsSpec: the default is BLIS's agentic spec (634 sessions × 8
// rounds), valid under the trace checker, in time order, contexts growing by
// the previous output plus an append, group prefixes shared.
func TestGroupsSpec(t *testing.T) {
	c := DefaultGroups()
	reqs := drainGroups(t, c)
	if len(reqs) != 5072 {
		t.Fatalf("%d requests, want 5,072", len(reqs))
	}
	chk := trace.NewChecker(c.BlockSize)
	prev := map[string]trace.Request{}
	prefixIDs := map[string][]uint64{}
	var appends, outputs float64
	for i := range reqs {
		r := &reqs[i]
		if errs := chk.Check(r, i+1); len(errs) > 0 {
			t.Fatalf("request %d: %v", i, errs[0])
		}
		chk.Accept(r, i+1)
		if i > 0 && r.Timestamp < reqs[i-1].Timestamp {
			t.Fatalf("request %d out of time order", i)
		}
		outputs += float64(r.OutputLength)
		group := r.SessionID[:2]
		pre := r.HashIDs[:c.PrefixTokens/c.BlockSize]
		if ids, ok := prefixIDs[group]; ok && !slices.Equal(ids, pre) {
			t.Fatalf("%s: prefix ids differ within group %s", r.SessionID, group)
		}
		prefixIDs[group] = pre
		p, ok := prev[r.SessionID]
		switch {
		case !ok:
			appends += float64(r.InputLength - c.PrefixTokens)
		default:
			add := r.InputLength - p.InputLength - p.OutputLength
			if add < 1 || *r.ThinkTimeS != c.ThinkS {
				t.Fatalf("%s turn %d: append %d, think %v", r.SessionID, r.Turn, add, *r.ThinkTimeS)
			}
			full := p.InputLength / c.BlockSize
			if !slices.Equal(r.HashIDs[:full], p.HashIDs[:full]) {
				t.Fatalf("%s turn %d does not extend its previous turn's whole blocks", r.SessionID, r.Turn)
			}
			appends += float64(add)
		}
		prev[r.SessionID] = *r
	}
	if len(prefixIDs) != c.Groups {
		t.Fatalf("%d groups seen, want %d", len(prefixIDs), c.Groups)
	}
	n := float64(len(reqs))
	if m := appends / n; m < 6900 || m > 7100 {
		t.Fatalf("mean append %.0f, want ~7000", m)
	}
	if m := outputs / n; m < 390 || m > 410 {
		t.Fatalf("mean output %.0f, want ~400", m)
	}
	// Deterministic for a seed.
	again := drainGroups(t, c)
	for i := range reqs {
		if reqs[i].InputLength != again[i].InputLength || reqs[i].Timestamp != again[i].Timestamp || !slices.Equal(reqs[i].HashIDs, again[i].HashIDs) {
			t.Fatalf("request %d differs between two runs of one seed", i)
		}
	}
}
