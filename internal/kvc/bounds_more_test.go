package kvc

import (
	"reflect"
	"testing"
)

// Branches of the dispatcher that mutation testing found no kvc test of:
// v4's mean output and its prefill-wait escape, v3 without its prefill
// pool, a prefill worker's second backup report, the snapshot.

func v4World(iso DecodeIsolation) *Dispatcher {
	v3 := V3Config{DBudgetTokens: 1 << 24, Margin: -(1 << 24), Isolation: iso}
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 64, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// With OutputTokens 0 the decode length v4 protects is the mean output of
// the requests seen: 1 before any, then (101 + 51) / 2 = 76, integer.
func TestV4OutIsTheMeanOutput(t *testing.T) {
	x := v4World(DecodeIsolation{TPOTSLOS: 0.012, Cost: StallCost{PerTokenS: 1e-4, DecodeStepS: 0.002}})
	if got := x.v4Out(); got != 1 {
		t.Fatalf("before any request: %d, want 1", got)
	}
	for i, out := range []int{101, 51} {
		x.Begin(0, Request{Session: string(rune('a' + i)), Turn: 1, Blocks: []uint64{uint64(10 * (i + 1))}, Input: 100, Output: out})
	}
	if got := x.v4Out(); got != 76 {
		t.Errorf("after outputs 101 and 51: %d, want 76", got)
	}
}

// A prefill worker is busy for v4 when its queued prefill takes more than
// MaxPWaitS: at 1/1024 s a token, 4,096 queued tokens are exactly the 4 s
// bound (not busy), 4,097 over it; with the prefill pool out of service
// there is no worker to wait for.
func TestV4PrefillBusyBound(t *testing.T) {
	x := v4World(DecodeIsolation{TPOTSLOS: 0.012, MaxPWaitS: 4, Cost: StallCost{PerTokenS: 1.0 / 1024, DecodeStepS: 0.002}})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{7}, Input: 100, Output: 10})
	x.ensureLoad()
	for _, c := range []struct {
		queued int
		want   bool
	}{{4095, false}, {4096, false}, {4097, true}} {
		x.load.p[0] = c.queued
		if got := d.v4PBusy(); got != c.want {
			t.Errorf("%d tokens queued on p0: busy %v, want %v", c.queued, got, c.want)
		}
	}
	x.p.SetExcluded(0, true)
	if d.v4PBusy() {
		t.Error("with p0 out of service: busy, want no prefill worker to wait for")
	}
}

// v3 with its prefill pool down prefills a plain-PD request on the decoder
// (local fallback), queueing there the prompt less what d0 holds: 300
// tokens less 2 blocks of 64 = 172.
func TestV3PlainLocalQueuesUncached(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 5, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 64, V3: V3Config{DBudgetTokens: 1 << 20}}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	x.SetDown(RolePrefill, 0, true)
	blocks := []uint64{1, 2, 3, 4, 5}
	x.d.PinTo(0, "s", blocks[:2])
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks, Input: 300, Output: 4}) // turn 1 < seed-min-turn 5: plain PD
	if a := d.Action(); a.Kind != ActDirect || a.D != 0 || d.Mode() != ModeLocalFall {
		t.Fatalf("action %+v mode %s, want a local fallback on d0; path %v", a, d.Mode(), d.Path())
	}
	d.Accepted()
	if q := x.Snapshot().DecodeQueued[0]; q != 172 {
		t.Errorf("d0's queued prefill %d, want 172", q)
	}
}

// A prefill worker's backup report replaces its last one: a session it no
// longer backs is reseeded after a plain eviction, not a prefill-backed
// one; another worker's report leaves p0's sessions alone.
func TestPrefillBackupsReplaced(t *testing.T) {
	for _, c := range []struct {
		name    string
		reports func(x *Dispatcher)
		want    string
	}{
		{"backed", func(x *Dispatcher) { x.PrefillBackups(0, keysOf("s")) }, "pd-router-d-session-reseed-after-prefill-backed-eviction"},
		{"backed, then dropped", func(x *Dispatcher) {
			x.PrefillBackups(0, keysOf("s"))
			x.PrefillBackups(0, keysOf("u"))
		}, "pd-router-d-session-reseed-after-eviction"},
		{"backed, then dropped by another worker's report", func(x *Dispatcher) {
			x.PrefillBackups(0, keysOf("s"))
			x.PrefillBackups(1, keysOf("s"))
			x.PrefillBackups(0, nil)
		}, "pd-router-d-session-reseed-after-prefill-backed-eviction"},
	} {
		w := &labelWorld{t: t, x: NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack},
			[]string{"p0", "p1"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})}
		if d := w.run("s", 1, seedAll, true); d.Decoder() != 0 {
			t.Fatalf("turn 1 seeded on d%d", d.Decoder())
		}
		c.reports(w.x)
		if d := w.run("s", 2, refuseAllBut(0, AdmitReply{CanAdmit: true, Reason: "session-was-evicted"}), true); d.Mode() != c.want {
			t.Errorf("%s: %s, want %s (path %v)", c.name, d.Mode(), c.want, d.Path())
		}
	}
}

// The snapshot is the belief: the P router's in-flight counts when there
// is a prefill pool (none without one), the pins and resident tokens of
// the sessions pinned and of no other, each breaker's state.
func TestSnapshotExact(t *testing.T) {
	w := newLabelWorld(t, func(c *DispatchConfig) {
		c.Breaker = BreakerConfig{Failures: 1, WindowS: 60, CooldownS: 10}
	}, Options{Alpha: 1})
	w.run("s", 1, seedAll, true)  // seeded on d0, done
	w.run("u", 1, seedAll, false) // in flight
	w.x.ForgetSession("gone")     // a session never pinned
	w.x.PeerFailed(0, 1)          // d1's breaker opens at 0
	w.x.PeerFailed(0, 2)          // so does d2's…
	w.x.breakers[2].sent(100)     // …whose probe is out at 100
	b := w.x.Snapshot()
	if b.PInflight == nil || len(b.PInflight) != 1 {
		t.Errorf("PInflight %v, want one entry for p0", b.PInflight)
	}
	pins := map[string]int{"s": 0}
	if u, ok := b.Pins["u"]; ok {
		pins["u"] = u
	}
	if !reflect.DeepEqual(b.Pins, pins) {
		t.Errorf("pins %v, want %v", b.Pins, pins)
	}
	if len(b.Resident) != len(pins) {
		t.Errorf("resident %v: want an entry for each pinned session, %v", b.Resident, pins)
	}
	if want := []string{"closed", "open", "half-open-probing"}; !reflect.DeepEqual(b.Breakers, want) {
		t.Errorf("breakers %v, want %v", b.Breakers, want)
	}
	colo := NewDispatcher(DispatchConfig{Mechanism: MechColo, Policy: PolicyKVAware}, nil, []string{"w0"}, Options{Alpha: 1}, Options{Alpha: 1})
	if b := colo.Snapshot(); b.PInflight != nil {
		t.Errorf("no prefill pool: PInflight %v, want none", b.PInflight)
	}
}

// Round-robin and sticky pick among the allowed workers from the cursor
// on: after one dispatch to w0 the cursor is at w1, so with w1 not allowed
// the pick is w2 (the next one after the cursor), and with only w0 allowed
// it wraps to w0; a sticky session whose pin is not allowed goes the same
// way.
func TestRoundRobinAmongAllowed(t *testing.T) {
	for _, policy := range []Policy{PolicyDefault, PolicySticky} {
		r := NewRouter([]string{"w0", "w1", "w2"}, policy, Options{})
		r.Dispatched(0, "", nil)
		r.pins.Put(SessionKey{ID: "s"}, 1)
		for _, c := range []struct {
			allowed func(int) bool
			want    int
		}{
			{func(w int) bool { return w != 1 }, 2},
			{func(w int) bool { return w == 0 }, 0},
			{func(int) bool { return false }, -1},
		} {
			if got := r.PickAmong("s", nil, c.allowed).Worker; got != c.want {
				t.Errorf("%s: picked w%d, want w%d", policy, got, c.want)
			}
		}
	}
}
