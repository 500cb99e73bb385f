package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// forgetRun simulates src with --session-idle-forget set to forget seconds
// and returns the sim, its records and its result.
func forgetRun(t *testing.T, cfg Config, src Source, forget float64) (*Sim, *memSink) {
	t.Helper()
	cfg.MaxBacklog = -1
	cfg.SessionIdleForgetS = forget
	sink := &memSink{}
	s, err := newSim(cfg, src, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, sink
}

// tracked is the largest count of per-session records the run holds: the
// replay's, the trace checker's sessions and chat ids, the control plane's,
// and each worker's.
func tracked(s *Sim) (replay, checker, chats, plane, workers int) {
	checker, chats = s.checked.chk.Tracked()
	for _, w := range s.workers {
		workers = max(workers, w.Tracked())
	}
	return s.heldSessions(), checker, chats, s.disp.Sessions(), workers
}

// TestSessionIdleForgetBoundsRecords: 8,000 one-turn sessions at 400/s
// leave 8,000 records in the replay, the checker and the control plane
// (and up to their share on each KVC decoder) when nothing is forgotten;
// forgetting sessions idle over 1 s keeps each to the sessions live or
// idle within that second, and changes no request's record (none of
// these sessions comes back).
func TestSessionIdleForgetBoundsRecords(t *testing.T) {
	const n, bound = 8_000, 1_500
	p := profile(t)
	for _, cfg := range scaleConfigs(p) {
		if cfg.Name != "dp8-mixed" && cfg.Name != "kvc-1p7d" && cfg.Name != "kvc-v3-1p7d" {
			continue
		}
		off, offRecs := forgetRun(t, cfg, openEnded{shortStream(t, n)}, 0)
		on, onRecs := forgetRun(t, cfg, openEnded{shortStream(t, n)}, 1)
		r0, c0, h0, p0, w0 := tracked(off)
		r1, c1, h1, p1, w1 := tracked(on)
		t.Logf("%s: replay %d → %d, checker %d/%d → %d/%d, control plane %d → %d, worker %d → %d; %d forgotten",
			cfg.Name, r0, r1, c0, h0, c1, h1, p0, p1, w0, w1, on.stats.ForgottenSessions)
		if r0 < n || c0 < n || h0 < n {
			t.Fatalf("%s: without forgetting the replay holds %d sessions, the checker %d and %d chats, want all %d", cfg.Name, r0, c0, h0, n)
		}
		if r1 > bound || c1 > bound || h1 > bound || p1 > bound || w1 > bound {
			t.Errorf("%s: forgetting after 1 s still holds replay %d, checker %d/%d, control plane %d, worker %d sessions, want ≤ %d",
				cfg.Name, r1, c1, h1, p1, w1, bound)
		}
		if on.stats.ForgottenSessions < n-bound {
			t.Errorf("%s: %d sessions forgotten, want nearly all %d", cfg.Name, on.stats.ForgottenSessions, n)
		}
		if !reflect.DeepEqual(offRecs.recs, onRecs.recs) {
			t.Errorf("%s: forgetting sessions that never return changed the records", cfg.Name)
		}
	}
}

// TestSessionIdleForgetOffOrLongChangesNothing: on multi-turn sessions
// (the BLIS agentic spec, scaled down), a bound longer than the run
// forgets nothing and every record is as with none.
func TestSessionIdleForgetOffOrLongChangesNothing(t *testing.T) {
	p := profile(t)
	groups := func() Source {
		g := synth.DefaultGroups()
		g.Sessions = 80
		st, err := synth.NewGroups(g)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, cfg := range []Config{
		{Name: "dp", Mechanism: PDColo, Colo: 4, Profile: p},
		{Name: "kvc-v3", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: kvcV3Preset}},
	} {
		_, off := forgetRun(t, cfg, groups(), 0)
		long, on := forgetRun(t, cfg, groups(), 1e8)
		if long.stats.ForgottenSessions != 0 || len(off.recs) == 0 || !reflect.DeepEqual(off.recs, on.recs) {
			t.Errorf("%s: a bound longer than the run forgot %d sessions or moved the records", cfg.Name, long.stats.ForgottenSessions)
		}
	}
}

// TestSessionIdleForgetLaterTurnStops: a turn whose session was forgotten
// stops the run with the located parent error naming the flag.
func TestSessionIdleForgetLaterTurnStops(t *testing.T) {
	p := profile(t)
	reqs := []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 64, OutputLength: 4, HashIDs: blocks(1, 1)},
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 100, InputLength: 64, OutputLength: 4, HashIDs: blocks(2, 1)},
		{SessionID: "a", ChatID: 3, ParentChatID: 1, Turn: 2, Timestamp: 200, InputLength: 128, OutputLength: 4, HashIDs: blocks(1, 2)},
	}
	cfg := Config{Mechanism: PDColo, Colo: 1, Profile: p, SessionIdleForgetS: 10}
	_, err := Run(context.Background(), cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: reqs}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "parent_chat_id") || !strings.Contains(err.Error(), "--session-idle-forget") {
		t.Fatalf("got %v, want the parent error naming --session-idle-forget", err)
	}
	cfg.SessionIdleForgetS = 150
	if _, err := Run(context.Background(), cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: reqs}, nil, nil); err != nil {
		t.Fatalf("a bound over the think time: %v", err)
	}
}
