package sim

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// F9, the residency belief that never shrinks: the seed's router never
// removed a decoder's blocks from decode_resident_blocks, so after a decoder
// evicted a session the router still believed it there (seed-inventory §3
// F9, Δ5). With the router-side admission gate the router then asks that
// decoder for a direct append only, the decoder refuses session-not-resident
// (a wasted admission RPC, counted as the session's reject there), and the
// turn either goes on to another decoder, where its whole prompt is seeded
// and trims other sessions, or (the seed's code, no retry loop) falls back
// to plain PD. With the tracking belief the router hears the eviction report,
// forgets the pin and seeds the session honestly (reseed-after-eviction).
//
// The scenario is seed-swe with 3 H100 decoders at 0.78 of HBM, so that
// sessions are trimmed. Measured (workload seed 10):
//
//	ε = |D|−1 (the spec)      never-shrink  track
//	refused not-resident          421          1
//	evictions                     948        343
//	D changes (all sessions)      269         17
//	ε = 0 (the seed's code)
//	refused not-resident          172          0
//	plain-PD fallbacks for it     167          0
//	evictions                     392        250
//
// (Workload seeds 11 and 12 gave 183/0 and 389/0 refusals with ε = |D|−1.)
// With the worker gate, the default, the belief only steers the score: the
// decoder answers from what it holds, and both beliefs refuse nothing as
// not resident (283 vs 277 reseeds after eviction).
func TestSeedF9ResidencyBelief(t *testing.T) {
	p, err := model.Builtin("qwen3-30b-a3b", "h100-80g")
	if err != nil {
		t.Fatal(err)
	}
	type counts struct{ refused, fallbacks, evictions, changes int }
	measure := func(belief kvc.Belief, attempts int) counts {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedSWE())
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, Concurrency: 32, DecodeMemFraction: 0.78}
		cfg.KVC.Gate, cfg.KVC.Belief, cfg.KVC.MaxAttempts = string(kvc.GateRouter), string(belief), attempts
		sink := &memSink{}
		if _, err := runSource(t, cfg, g, sink); err != nil {
			t.Fatal(err)
		}
		var c counts
		for _, e := range sink.events {
			switch {
			case e.Kind == "admission" && strings.Contains(e.Detail, "can_admit=false reason=session-not-resident "):
				c.refused++
			case e.Kind == "eviction":
				c.evictions++
			}
		}
		for _, r := range sink.recs {
			if r.ExecutionMode == "pd-router-fallback-session-not-resident" {
				c.fallbacks++
			}
		}
		for _, n := range dChanges(sink.recs) {
			c.changes += n
		}
		return c
	}

	ns, tr := measure(kvc.BeliefNeverShrink, 0), measure(kvc.BeliefTrack, 0)
	t.Logf("ε = |D|−1: never-shrink %+v, track %+v", ns, tr)
	if ns.refused < 200 || tr.refused > 5 {
		t.Errorf("ε = |D|−1: %d (never-shrink) vs %d (track) direct-only admissions refused session-not-resident; want ≥ 200 vs ≤ 5", ns.refused, tr.refused)
	}
	if ns.evictions < 2*tr.evictions {
		t.Errorf("ε = |D|−1: %d (never-shrink) vs %d (track) evictions; want never-shrink's seeds elsewhere to evict ≥ 2× as much", ns.evictions, tr.evictions)
	}
	if ns.changes < 5*tr.changes || ns.changes < 100 {
		t.Errorf("ε = |D|−1: %d (never-shrink) vs %d (track) D changes; want ≥ 100 and ≥ 5× track's", ns.changes, tr.changes)
	}

	ns, tr = measure(kvc.BeliefNeverShrink, 1), measure(kvc.BeliefTrack, 1)
	t.Logf("ε = 0: never-shrink %+v, track %+v", ns, tr)
	if ns.refused < 100 || tr.refused > 5 {
		t.Errorf("ε = 0: %d (never-shrink) vs %d (track) refused session-not-resident; want ≥ 100 vs ≤ 5", ns.refused, tr.refused)
	}
	if ns.fallbacks < 100 || tr.fallbacks > 5 {
		t.Errorf("ε = 0: %d (never-shrink) vs %d (track) turns sent to plain PD after the refusal; want ≥ 100 vs ≤ 5", ns.fallbacks, tr.fallbacks)
	}
	if 10*ns.evictions < 13*tr.evictions {
		t.Errorf("ε = 0: %d (never-shrink) vs %d (track) evictions; want ≥ 1.3×", ns.evictions, tr.evictions)
	}
}
