package sim

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// overloaded is a BLIS-spec run small enough for a test (120 sessions,
// whose turns still queue behind each other) and one configuration of
// each mechanism family: naive PD, DP kv-aware, the peers' decode radix
// and pd-conditional, KVC v2 and v3.
func overloaded(t *testing.T) (synth.Groups, []Config) {
	p := profile(t)
	g := synth.DefaultGroups()
	g.Sessions = 120
	return g, append([]Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp-kv-aware", Mechanism: PDColo, Colo: 4, Policy: "kv-aware", Profile: p},
		{Name: "decode-radix", Mechanism: PDDecodeRadix, Prefill: 1, Decode: 3, Profile: p},
		{Name: "conditional", Mechanism: PDConditional, Prefill: 1, Decode: 3, Profile: p},
	}, kvcBench(p)...)
}

// Frozen chains let the caches keep requests' blocks without copying them
// (chain.go). A cache keying on an array someone rewrites would match KV it
// never had; so every record of an overloaded run (turns of a session
// queued behind each other, the case that freezes chains) must be the same
// with and without freezing, for each mechanism whose caches key on them.
func TestFrozenChainsChangeNoResult(t *testing.T) {
	g, cfgs := overloaded(t)
	for _, cfg := range cfgs {
		runOnce := func(freeze bool) (*memSink, int) {
			freezeChains = freeze
			defer func() { freezeChains = true }()
			src, err := synth.NewGroups(g)
			if err != nil {
				t.Fatal(err)
			}
			sink := &memSink{}
			if _, err := Run(context.Background(), cfg, src, sink, nil); err != nil {
				t.Fatal(err)
			}
			cached := 0
			for _, r := range sink.recs {
				cached += r.CachedTokens
			}
			return sink, cached
		}
		frozen, cached := runOnce(true)
		copied, _ := runOnce(false)
		if cfg.Mechanism != PDDisaggregation && cached == 0 {
			t.Fatalf("%s: no cached tokens at all; the test would not see a corrupted cache", cfg.Name)
		}
		if len(frozen.recs) != len(copied.recs) {
			t.Fatalf("%s: %d records with frozen chains, %d without", cfg.Name, len(frozen.recs), len(copied.recs))
		}
		for i := range frozen.recs {
			if !reflect.DeepEqual(frozen.recs[i], copied.recs[i]) {
				t.Fatalf("%s: record %d differs with frozen chains:\n%+v\nwithout:\n%+v", cfg.Name, i, frozen.recs[i], copied.recs[i])
			}
		}
	}
}

// A run with no sink (quiet: no paths, no events formatted, no worker
// samples taken) must come to the same result as one that records
// everything, for every mechanism family: benchmarks and in-process
// callers (the sweep's floors, tests) run quiet.
func TestQuietRunSameResult(t *testing.T) {
	g, cfgs := overloaded(t)
	for _, cfg := range cfgs {
		results := make([]*Result, 2)
		for i, sink := range []Sink{nil, &memSink{}} {
			src, err := synth.NewGroups(g)
			if err != nil {
				t.Fatal(err)
			}
			if results[i], err = Run(context.Background(), cfg, src, sink, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Only the count of events handled differs: a quiet run takes no
		// worker samples.
		results[0].Replay.Events, results[1].Replay.Events = 0, 0
		a, err := json.MarshalIndent(results[0], "", " ")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(results[1], "", " ")
		if string(a) != string(b) {
			al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
			for i := range min(len(al), len(bl)) {
				if al[i] != bl[i] {
					t.Fatalf("%s: the quiet run's result differs at line %d: %s, with a sink %s", cfg.Name, i, al[i], bl[i])
				}
			}
			t.Fatalf("%s: the quiet run's result differs", cfg.Name)
		}
	}
}
