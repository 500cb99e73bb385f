package sim

import (
	"reflect"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// openEnded hides a source's SessionEnds: the run keeps every session's
// records, as it does for a trace file.
type openEnded struct{ src Source }

func (o openEnded) Header() trace.Header        { return o.src.Header() }
func (o openEnded) Next(r *trace.Request) error { return o.src.Next(r) }

func groupsStream(t *testing.T, edit func(*synth.Groups)) Source {
	t.Helper()
	g := synth.DefaultGroups()
	g.Sessions = 150
	if edit != nil {
		edit(&g)
	}
	st, err := synth.NewGroups(g)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestClosedSessionsChangeNothing: closing each session after its last
// turn (the generator says which) moves no request's record, no event and
// no worker sample, on multi-turn sessions sharing long prefixes (the BLIS
// agentic spec, scaled down; overloaded, so turns of a session overlap and
// decoders evict and re-seed) and on one-turn short requests, for every
// mechanism; and it drops what the sessions left behind.
func TestClosedSessionsChangeNothing(t *testing.T) {
	p := profile(t)
	cfgs := append(scaleConfigs(p),
		Config{Name: "dp-sticky", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky, Profile: p},
		Config{Name: "kvc-v3-1p3d-backup", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p,
			KVC: KVC{V3: kvcV3Preset, DToP: DToPOnEvict}},
		// No belief index: a pin is all that says where a session is.
		Config{Name: "kvc-1p3d-sticky-cap", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, Policy: kvc.PolicySticky,
			KVC: KVC{SessionCap: 40}},
		Config{Name: "kvc-v3-1p3d-sticky", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, Policy: kvc.PolicySticky,
			KVC: KVC{V3: kvcV3Preset}})
	srcs := []struct {
		name string
		make func() Source
	}{
		{"groups", func() Source { return groupsStream(t, nil) }},
		{"short", func() Source { return shortStream(t, 3000) }},
	}
	for _, cfg := range cfgs {
		for _, src := range srcs {
			open, openRecs := forgetRun(t, cfg, openEnded{src.make()}, 0)
			closed, closedRecs := forgetRun(t, cfg, src.make(), 0)
			if len(openRecs.recs) == 0 {
				t.Fatalf("%s/%s: no records", cfg.Name, src.name)
			}
			if !reflect.DeepEqual(openRecs.recs, closedRecs.recs) || !reflect.DeepEqual(openRecs.events, closedRecs.events) ||
				!reflect.DeepEqual(openRecs.samples, closedRecs.samples) {
				t.Errorf("%s/%s: closing sessions after their last turn moved the records, events or samples", cfg.Name, src.name)
			}
			r0, c0, h0, p0, w0 := tracked(open)
			r1, c1, h1, p1, w1 := tracked(closed)
			t.Logf("%s/%s: replay %d → %d, checker %d/%d → %d/%d, control plane %d → %d, worker %d → %d; %d closed",
				cfg.Name, src.name, r0, r1, c0, h0, c1, h1, p0, p1, w0, w1, closed.stats.closedSessions)
			if r1 != 0 || c1 != 0 || h1 != 0 {
				t.Errorf("%s/%s: after the run the replay holds %d sessions and the checker %d and %d chats, want none", cfg.Name, src.name, r1, c1, h1)
			}
			closeAsksEveryWorker = true
			all, _ := forgetRun(t, cfg, src.make(), 0)
			closeAsksEveryWorker = false
			for i, w := range closed.workers {
				if got, want := w.Tracked(), all.workers[i].Tracked(); got != want {
					t.Errorf("%s/%s: %s holds %d sessions after closing asked the workers the sessions went to, %d after it asked every worker",
						cfg.Name, src.name, w.Name(), got, want)
				}
			}
			if closed.stats.closedSessions != open.stats.Sessions {
				t.Errorf("%s/%s: %d sessions closed, want all %d", cfg.Name, src.name, closed.stats.closedSessions, open.stats.Sessions)
			}
		}
	}
}
