package kvc

import (
	"strings"
	"testing"
)

// Every execution-mode label of the seed's vocabulary (seed-inventory §2.5)
// is reachable, each from the situation it names, and every request carries
// the chain of reasons that led to it (its path). Not reachable by design:
// the generic failure bucket `kvcache-centric` (a failed request here keeps
// the label of the path it took and fails with its cause, F7), and the
// labels from before the seed's v1 relabelling (`…-large-append…` without
// `real-`), which the v1 names replaced.

type labelWorld struct {
	x *Dispatcher
	t *testing.T
}

func newLabelWorld(t *testing.T, mod func(*DispatchConfig), opts Options) *labelWorld {
	cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: opts, TauReject: 3, TauAppend: 8192,
		MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack}
	if mod != nil {
		mod(&cfg)
	}
	return &labelWorld{t: t, x: NewDispatcher(cfg, []string{"p0"}, []string{"d0", "d1", "d2"}, opts, opts)}
}

// run sends turn of session s through the dispatcher, answering each
// admission with reply; finish ends the request (else it stays in flight).
func (w *labelWorld) run(s string, turn int, reply func(d int) AdmitReply, finish bool) *Dispatch {
	w.t.Helper()
	blocks := []uint64{uint64(s[0])<<32 | 1, uint64(s[0])<<32 | 2, uint64(s[0])<<32 | uint64(10+turn)}
	d := w.x.Begin(float64(turn), Request{Session: s, Turn: turn, Blocks: blocks, Input: 150 + 10*turn, Output: 5})
	for i := 0; d.Action().Kind == ActAdmit; i++ {
		if i > 10 {
			w.t.Fatal("admission loop")
		}
		d.Reply(reply(d.Action().D))
	}
	if d.Action().Kind == ActFail {
		if s != "failing" {
			w.t.Fatalf("%s turn %d failed: %v", s, turn, d.Path())
		}
		return d
	}
	d.Accepted()
	if finish {
		d.Finished(true)
	}
	return d
}

func seedAll(int) AdmitReply { return AdmitReply{CanAdmit: true, Reason: "session-not-resident"} }
func refuseAll(reason string) func(int) AdmitReply {
	return func(int) AdmitReply { return AdmitReply{Reason: reason} }
}

// home answers direct on d, seed elsewhere.
func home(d int) func(int) AdmitReply {
	return func(i int) AdmitReply {
		if i == d {
			return AdmitReply{CanAdmit: true, Direct: true}
		}
		return seedAll(i)
	}
}

// at answers d with its reply and the other decoders with other.
func at(d int, r AdmitReply, other func(int) AdmitReply) func(int) AdmitReply {
	return func(i int) AdmitReply {
		if i == d {
			return r
		}
		return other(i)
	}
}

func TestEveryLabelReachable(t *testing.T) {
	seeded := func(t *testing.T, mod func(*DispatchConfig), opts Options) *labelWorld {
		w := newLabelWorld(t, mod, opts)
		if d := w.run("s", 1, seedAll, true); d.Decoder() != 0 {
			t.Fatalf("turn 1 seeded on d%d", d.Decoder())
		}
		return w
	}
	floor := Options{Alpha: 1, FloorK: 1000} // the load floor outbids the session's decoder
	routerGate := func(c *DispatchConfig) { c.Gate = GateRouter }
	// inFlight leaves turn 1 running on d0: the router gate does not know
	// what d0 will hold (no-direct-info).
	inFlight := func(t *testing.T) *labelWorld {
		w := newLabelWorld(t, routerGate, Options{Alpha: 1})
		w.run("s", 1, seedAll, false)
		return w
	}
	evicted := func(t *testing.T) *labelWorld {
		w := seeded(t, nil, Options{Alpha: 1})
		w.x.SessionEvicted(0, "s")
		return w
	}
	cases := []struct {
		label string
		mode  func(t *testing.T) *Dispatch
	}{
		{"kvcache-direct-to-d-session", func(t *testing.T) *Dispatch { return seeded(t, nil, Options{Alpha: 1}).run("s", 2, home(0), true) }},
		{"pd-router-turn1-seed", func(t *testing.T) *Dispatch {
			return newLabelWorld(t, nil, Options{Alpha: 1}).run("s", 1, seedAll, true)
		}},
		{"pd-router-turn1-d-backpressure", func(t *testing.T) *Dispatch {
			// Every decoder has a seed in flight (seed-max-inflight-decode 1).
			w := newLabelWorld(t, func(c *DispatchConfig) { c.SeedMaxInflight = 1 }, Options{Alpha: 1})
			for _, s := range []string{"a", "b", "c"} {
				w.run(s, 1, seedAll, false)
			}
			return w.run("s", 1, seedAll, true)
		}},
		{"pd-router-d-session-reseed", func(t *testing.T) *Dispatch { return seeded(t, nil, Options{Alpha: 1}).run("s", 2, seedAll, true) }},
		{"pd-router-d-session-reseed-after-eviction", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, refuseAllBut(0, AdmitReply{CanAdmit: true, Reason: "session-was-evicted"}), true)
		}},
		{"pd-router-d-session-reseed-after-prefill-backed-eviction", func(t *testing.T) *Dispatch {
			w := seeded(t, nil, Options{Alpha: 1})
			w.x.PrefillBackups(0, keysOf("s"))
			return w.run("s", 2, refuseAllBut(0, AdmitReply{CanAdmit: true, Reason: "session-was-evicted"}), true)
		}},
		{"pd-router-session-not-resident-reseed", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, at(0, AdmitReply{Reason: "session-not-resident"}, seedAll), true)
		}},
		{"pd-router-session-was-evicted-reseed", func(t *testing.T) *Dispatch {
			return evicted(t).run("s", 2, at(0, AdmitReply{Reason: "no-space"}, seedAll), true)
		}},
		{"pd-router-no-direct-info-reseed", func(t *testing.T) *Dispatch { return inFlight(t).run("s", 2, seedAll, true) }},
		{"pd-router-real-large-append-reseed", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, at(0, AdmitReply{Reason: "real-large-append"}, seedAll), true)
		}},
		{"pd-router-real-large-append-reseed-after-eviction", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, at(0, AdmitReply{Reason: "real-large-append"},
				func(int) AdmitReply { return AdmitReply{CanAdmit: true, Reason: "session-was-evicted"} }), true)
		}},
		{"pd-router-policy-no-bypass-reseed", func(t *testing.T) *Dispatch { return seeded(t, nil, floor).run("s", 2, seedAll, true) }},
		{"pd-router-policy-no-bypass-reseed-after-eviction", func(t *testing.T) *Dispatch {
			return seeded(t, nil, floor).run("s", 2, func(int) AdmitReply { return AdmitReply{CanAdmit: true, Reason: "session-was-evicted"} }, true)
		}},
		{"pd-router-other-large-append-reseed", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, at(0, AdmitReply{Reason: "no-space"}, seedAll), true)
		}},
		{"pd-router-fallback-real-large-append-session-cap", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, at(0, AdmitReply{Reason: "real-large-append"}, refuseAll("session-cap")), true)
		}},
		{"pd-router-fallback-session-not-resident-session-cap", func(t *testing.T) *Dispatch {
			return newLabelWorld(t, nil, Options{Alpha: 1}).run("s", 1, refuseAll("session-cap"), true)
		}},
		{"pd-router-fallback-policy-no-bypass-session-cap", func(t *testing.T) *Dispatch { return seeded(t, nil, floor).run("s", 2, refuseAll("session-cap"), true) }},
		{"pd-router-fallback-session-not-resident-seed-filter-early-turn", func(t *testing.T) *Dispatch {
			return newLabelWorld(t, func(c *DispatchConfig) { c.SeedMinTurn = 2 }, Options{Alpha: 1}).run("s", 1, seedAll, true)
		}},
		{"pd-router-fallback-no-d-capacity", func(t *testing.T) *Dispatch {
			// No decoder to ask (every one drained): the request carries
			// the label and fails with its cause, no-decode-worker.
			w := newLabelWorld(t, nil, Options{Alpha: 1})
			for d := 0; d < 3; d++ {
				w.x.DRouter().SetExcluded(d, true)
			}
			d := w.run("failing", 1, seedAll, true)
			if a := d.Action(); a.Kind != ActFail || !strings.HasPrefix(a.Cause, "no-decode-worker") {
				t.Errorf("no decoder: action %+v", a)
			}
			return d
		}},
		{"pd-router-fallback-real-large-append", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, refuseAll("real-large-append"), true)
		}},
		{"pd-router-fallback-policy-no-bypass", func(t *testing.T) *Dispatch {
			return seeded(t, nil, floor).run("s", 2, refuseAll("session-not-resident"), true)
		}},
		{"pd-router-fallback-session-not-resident", func(t *testing.T) *Dispatch {
			return newLabelWorld(t, nil, Options{Alpha: 1}).run("s", 1, refuseAll("session-not-resident"), true)
		}},
		{"pd-router-fallback-session-was-evicted-no-d-capacity", func(t *testing.T) *Dispatch {
			return evicted(t).run("s", 2, refuseAll("no-space"), true)
		}},
		{"pd-router-fallback-other-large-append-no-d-capacity", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, refuseAll("no-space"), true)
		}},
		{"pd-router-fallback-other-large-append-d-backpressure", func(t *testing.T) *Dispatch {
			return seeded(t, nil, Options{Alpha: 1}).run("s", 2, func(int) AdmitReply { return AdmitReply{Reason: "queue", PauseMs: 40} }, true)
		}},
		{"pd-router-fallback-no-direct-info-no-d-capacity", func(t *testing.T) *Dispatch { return inFlight(t).run("s", 2, refuseAll("no-space"), true) }},
		{"pd-disaggregation-router", func(t *testing.T) *Dispatch {
			return newLabelWorld(t, func(c *DispatchConfig) { c.Mechanism = MechPD }, Options{Alpha: 1}).run("s", 1, seedAll, true)
		}},
	}
	whys := map[string]bool{}
	for _, tc := range cases {
		d := tc.mode(t)
		if d.Mode() != tc.label {
			t.Errorf("want %s, got %s (path %v)", tc.label, d.Mode(), d.Path())
			continue
		}
		if strings.HasPrefix(tc.label, "pd-router-") && !strings.HasPrefix(tc.label, "pd-router-turn1-seed") && !strings.HasPrefix(tc.label, "pd-router-d-session-reseed") {
			// The chain of reasons: the first one is in the path.
			found := false
			for _, p := range d.Path() {
				if strings.HasPrefix(p, "why: ") || p == "no decoder to ask" || strings.HasPrefix(p, "skip ") {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: path %v carries no reason", tc.label, d.Path())
			}
		}
		for _, w := range []string{"session-not-resident", "session-was-evicted", "no-direct-info", "real-large-append", "policy-no-bypass", "other-large-append"} {
			if strings.Contains(tc.label, w) {
				whys[w] = true
			}
		}
	}
	if len(whys) != 6 {
		t.Errorf("reasons reached: %v, want all six of the seed's {why}", whys)
	}
	// DP is its own mechanism.
	x := NewDispatcher(DispatchConfig{Mechanism: MechColo, Policy: PolicyKVAware}, nil, []string{"w0", "w1"}, Options{Alpha: 1}, Options{Alpha: 1})
	if d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 10, Output: 1}); d.Mode() != "dp-colo-router" {
		t.Errorf("colocated: %s", d.Mode())
	}
}

// refuseAllBut answers d with r and refuses the others (no-space).
func refuseAllBut(d int, r AdmitReply) func(int) AdmitReply {
	return at(d, r, refuseAll("no-space"))
}
