package sim

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// everyMechanism is one configuration of each mechanism and KVC preset,
// at the benchmarks' sizes (1P3D, DP×4; DP×8 mixed-chunk and KVC v3 1P7D
// as the scale benchmark runs them).
func everyMechanism(p *model.Profile) []Config {
	v4 := kvcV3Preset
	v4.TPOTSLOMs, v4.IsolationMaxPWaitS = 12, 20
	return []Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp-sticky", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicySticky, Profile: p},
		{Name: "dp-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
		{Name: "dp8-mixed", Mechanism: PDColo, Colo: 8, MixedChunk: true, Profile: p},
		{Name: "kvc", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p},
		{Name: "kvc-v3", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: kvcV3Preset}},
		{Name: "kvc-v3-1p7d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 7, Profile: p, KVC: KVC{V3: kvcV3Preset}},
		{Name: "kvc-v4", Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, KVC: KVC{V3: v4}},
		{Name: "conditional", Mechanism: PDConditional, Prefill: 1, Decode: 3, Profile: p},
		{Name: "prefix-decider", Mechanism: PDPrefixDecider, Prefill: 1, Decode: 3, Profile: p},
		{Name: "decode-radix", Mechanism: PDDecodeRadix, Prefill: 1, Decode: 3, Profile: p},
		{Name: "ppd", Mechanism: PDPPD, Prefill: 1, Decode: 3, Profile: p, Peer: Peer{Rival: &Rival{TTFTSLOMs: 2000, TPOTSLOMs: 20}}},
		{Name: "deflect", Mechanism: PDDeflect, Prefill: 1, Decode: 3, Profile: p, Peer: Peer{Rival: &Rival{TTFTSLOMs: 2000, TPOTSLOMs: 20}}},
	}
}

// recycleRun is one run's every output: the result and what the sink got
// (nil for a quiet run).
type recycleRun struct {
	res  []byte
	sink *memSink
}

func runRecycled(t *testing.T, cfg Config, mode recycleMode, src Source, quiet bool) recycleRun {
	t.Helper()
	cfg.recycle = mode
	var sink *memSink
	var sk Sink
	if !quiet {
		sink = &memSink{}
		sk = sink
	}
	res, err := Run(context.Background(), cfg, src, sk, nil)
	if err != nil {
		t.Fatalf("%s (recycle mode %d): %v", cfg.Name, mode, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return recycleRun{b, sink}
}

// sameRuns fails unless two runs wrote the same result and sink lines.
func sameRuns(t *testing.T, name string, a, b recycleRun) {
	t.Helper()
	if string(a.res) != string(b.res) {
		t.Fatalf("%s: results differ:\n%s\n%s", name, a.res, b.res)
	}
	if a.sink == nil {
		return
	}
	for i := range max(len(a.sink.recs), len(b.sink.recs)) {
		if i >= len(a.sink.recs) || i >= len(b.sink.recs) || !reflect.DeepEqual(a.sink.recs[i], b.sink.recs[i]) {
			t.Fatalf("%s: request record %d differs (%d and %d records)", name, i, len(a.sink.recs), len(b.sink.recs))
		}
	}
	if !reflect.DeepEqual(a.sink.events, b.sink.events) || !reflect.DeepEqual(a.sink.samples, b.sink.samples) {
		t.Fatalf("%s: events or worker samples differ (%d/%d events, %d/%d samples)", name,
			len(a.sink.events), len(b.sink.events), len(a.sink.samples), len(b.sink.samples))
	}
}

// TestRecyclingChangesNoResult runs every mechanism on BLIS's agentic spec
// (5,072 requests: the groups benchmark's workload, quiet as the benchmark
// runs it) and on 2,000 short requests (the scale benchmark's, with a sink:
// every record, event and worker sample compared), plain and with
// timeouts, transfer timeouts and a concurrency gate (requests end with
// events still queued for them and transfers on the links), twice: with
// records and dispatches recycled (the default) and poisoned (recycle.go:
// a record that would be reused is checked against every worker's
// holdings, never reused, and made to panic on any later use, as its
// dispatch is). The poisoned run must not panic and both must write the
// same: a poisoned run reuses nothing, so it is what the code did before
// recycling, unless it read a poisoned field, which would move a result.
func TestRecyclingChangesNoResult(t *testing.T) {
	p := profile(t)
	type load struct {
		name  string
		src   func() Source
		quiet bool
		edit  func(*Config)
	}
	loads := []load{
		{"groups", func() Source {
			st, err := synth.NewGroups(synth.DefaultGroups())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}, true, func(*Config) {}},
		{"short", func() Source { return shortStream(t, 2000) }, false, func(*Config) {}},
		{"short-timeouts", func() Source { return shortStream(t, 2000) }, false, func(c *Config) {
			c.TimeoutS, c.TransferTimeoutS, c.Concurrency, c.PeerFailure = 0.4, 0.002, 300, PeerWindowed
		}},
	}
	if testing.Short() {
		loads = loads[1:]
	}
	for _, cfg := range everyMechanism(p) {
		for _, l := range loads {
			c := cfg
			l.edit(&c)
			name := cfg.Name + "/" + l.name
			sameRuns(t, name, runRecycled(t, c, recycleOn, l.src(), l.quiet), runRecycled(t, c, recyclePoison, l.src(), l.quiet))
		}
	}
}

// TestRecycledRecordsAreReused checks that the default mode reuses
// records: a run allocates as many as it ever held at once (the most
// requests ingested and not ended, MaxBacklog), not one a request; the
// poison mode and the off mode reuse none.
func TestRecycledRecordsAreReused(t *testing.T) {
	p := profile(t)
	for _, cfg := range []Config{
		{Name: "dp8-mixed", Mechanism: PDColo, Colo: 8, MixedChunk: true, Profile: p},
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 7, Profile: p},
		{Name: "kvc-v3-1p7d", Mechanism: KVCacheCentric, Prefill: 1, Decode: 7, Profile: p, KVC: KVC{V3: kvcV3Preset}},
	} {
		for _, mode := range []recycleMode{recycleOn, recyclePoison, recycleOff} {
			cfg.recycle, cfg.MaxBacklog = mode, -1
			s, err := newSim(cfg, shortStreamAt(t, 3000, 50), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.loop(context.Background()); err != nil {
				t.Fatal(err)
			}
			switch {
			case mode != recycleOn && s.made != 3000:
				t.Errorf("%s, mode %d: %d records made for 3000 requests, want one each", cfg.Name, mode, s.made)
			case mode == recycleOn && (s.made != s.stats.MaxBacklog || s.made > 300 || len(s.spare) != s.made):
				t.Errorf("%s: %d records made for 3000 requests, %d spare at the end; want as many as the most held at once (%d), under 300",
					cfg.Name, s.made, len(s.spare), s.stats.MaxBacklog)
			}
		}
	}
}

// TestPoisonedRecordPanics checks the poison mode's own teeth: a record
// used after its end panics, a worker still holding one is named, and a
// recycled record's engine.Request keeps stale watch entries stale.
func TestPoisonedRecordPanics(t *testing.T) {
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", what)
			}
		}()
		f()
	}
	r := &req{gen: poisonGen}
	mustPanic("alive on a poisoned record", func() { r.alive() })
	live := &req{gen: 3}
	if live.alive() != live {
		t.Error("alive changed a live record")
	}
	e := event{req: live, ver: 2}
	if e.current() {
		t.Error("an event of life 2 counted current for life 3")
	}
	e.ver = 3
	if !e.current() {
		t.Error("an event of the record's own life counted stale")
	}

	// A run whose worker is made to keep a finished request: the poison
	// check names it.
	p := profile(t)
	cfg := Config{Name: "dp", Mechanism: PDColo, Colo: 1, Profile: p, recycle: recyclePoison}
	s, err := newSim(cfg, shortStream(t, 10), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := &req{p: -1, d: 0}
	held.de.Renew(engine.Request{ID: 7, Kind: engine.Full, Input: 64, Output: 2, Blocks: []uint64{1}, Tag: held})
	if err := s.workers[0].Submit(0, &held.de); err != nil {
		t.Fatal(err)
	}
	mustPanic("poison of a record its worker still queues", func() { s.poison(held) })
}

// TestResetEmptiesEveryField fills every field of a record (through
// reflection, so a field added later is filled too), resets it, and wants
// each one as a new record has it, but the kept prefill-side Request, the
// waiting turns' array (emptied), the life (one on) and the decoder side
// (renewed).
func TestResetEmptiesEveryField(t *testing.T) {
	r := &req{}
	v := reflect.ValueOf(r).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).Name == "de" {
			continue
		}
		fill(t, reflect.NewAt(v.Field(i).Type(), unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem())
	}
	r.de.Renew(engine.Request{ID: 9, Input: 5, Tag: r})
	pe, gen := r.pe, r.gen
	wantDe := r.de
	wantDe.Renew(engine.Request{})
	r.waiters = append(r.waiters[:0], r) // as end leaves it: cleared, not yet cut
	clear(r.waiters)
	r.reset()
	want := req{p: -1, d: -1, pe: pe, de: wantDe, waiters: r.waiters, gen: gen + 1}
	if len(r.waiters) != 0 || cap(r.waiters) == 0 {
		t.Errorf("waiters len %d cap %d: want emptied, its array kept", len(r.waiters), cap(r.waiters))
	}
	got, wv := reflect.ValueOf(r).Elem(), reflect.ValueOf(&want).Elem()
	for i := 0; i < got.NumField(); i++ {
		a := reflect.NewAt(got.Field(i).Type(), unsafe.Pointer(got.Field(i).UnsafeAddr())).Elem().Interface()
		b := reflect.NewAt(wv.Field(i).Type(), unsafe.Pointer(wv.Field(i).UnsafeAddr())).Elem().Interface()
		if !reflect.DeepEqual(a, b) {
			t.Errorf("field %s after reset: %v, want %v", got.Type().Field(i).Name, a, b)
		}
	}
}

// fill sets v to a value other than its zero.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float64:
		v.SetFloat(7)
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(t, reflect.NewAt(v.Field(i).Type(), unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem())
		}
	default:
		t.Fatalf("fill: no value for a %s", v.Kind())
	}
}
