package kvc

import (
	"errors"
	"testing"
)

func lifecycleDispatcher(breaker BreakerConfig) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		Breaker: breaker},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// Every outcome out of the lifecycle's order (docs/lifecycle.md) is caught:
// a panic under SetStrict, and recorded either way.
func TestLifecycleOutOfOrder(t *testing.T) {
	req := Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 128, Output: 4}
	admitted := func(x *Dispatcher) *Dispatch { // deciding, its action a seed
		d := x.Begin(0, req)
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		return d
	}
	for _, tc := range []struct {
		name string
		run  func(x *Dispatcher)
	}{
		{"accepted during admission", func(x *Dispatcher) { x.Begin(0, req).Accepted() }},
		{"refused during admission", func(x *Dispatcher) { x.Begin(0, req).Refused("no") }},
		{"prefill done before accepted", func(x *Dispatcher) { admitted(x).PrefillDone() }},
		{"reply after the decision", func(x *Dispatcher) { admitted(x).Reply(AdmitReply{CanAdmit: true}) }},
		{"accepted twice", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.Accepted() }},
		{"refused after accepted", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.Refused("late") }},
		{"prefill done twice", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.PrefillDone(); d.PrefillDone() }},
		{"finished twice", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.Finished(true); d.Finished(true) }},
		{"landed after finished", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.Finished(true); d.TransferLanded() }},
		{"failed before accepted", func(x *Dispatcher) { admitted(x).TransferFailed(1) }},
		{"refused after finished", func(x *Dispatcher) { d := admitted(x); d.Accepted(); d.Finished(false); d.Refused("cause") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := lifecycleDispatcher(BreakerConfig{})
			func() {
				defer func() {
					r := recover()
					err, _ := r.(error)
					if !errors.Is(err, ErrLifecycle) {
						t.Errorf("no lifecycle panic (recovered %v)", r)
					}
				}()
				tc.run(x)
			}()
			if !errors.Is(x.LifecycleErr(), ErrLifecycle) || x.Violations() != 1 {
				t.Errorf("violation not recorded: %v, %d", x.LifecycleErr(), x.Violations())
			}
		})
	}
}

// The orders both executors use are legal, and every dispatch ends Open
// at 0 with exactly one Finished.
func TestLifecycleInOrder(t *testing.T) {
	x := lifecycleDispatcher(BreakerConfig{Failures: 1, WindowS: 10, CooldownS: 1})
	req := Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 128, Output: 4}
	// A seed: admission, accepted, KV landed, prefill over, finished.
	d := x.Begin(0, req)
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.TransferLanded()
	d.PrefillDone()
	d.Finished(true)
	// Abandoned while deciding (a client leaving during a pause).
	x.Begin(1, Request{Session: "t", Turn: 1, Blocks: []uint64{5}, Input: 64, Output: 4}).Finished(false)
	// Refused, then finished.
	d = x.Begin(2, Request{Session: "u", Turn: 1, Blocks: []uint64{7}, Input: 64, Output: 4})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Refused("worker-refused")
	if a := d.Action(); a.Kind != ActFail {
		t.Fatalf("after Refused: %+v", a)
	}
	d.Finished(false)
	// A transfer failure, then finished without PrefillDone.
	d = x.Begin(3, Request{Session: "v", Turn: 1, Blocks: []uint64{9}, Input: 64, Output: 4})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.TransferFailed(3)
	d.Finished(false)
	if err := x.LifecycleErr(); err != nil {
		t.Fatal(err)
	}
	if x.Open() != 0 {
		t.Fatalf("%d dispatches open after every one finished", x.Open())
	}
	if x.Begin(4, req); x.Open() != 1 {
		t.Fatalf("Open %d with one dispatch begun", x.Open())
	}
}

// Bug 7: only the half-open breaker's probe closes it. A transfer decided
// before the breaker opened (a straggler) landing while it is half-open
// does not, and neither does one landing while it is closed forgive the
// failures in its window.
func TestBreakerClosesOnlyOnProbe(t *testing.T) {
	x := lifecycleDispatcher(BreakerConfig{Failures: 2, WindowS: 100, CooldownS: 5})
	seed := func(now float64, session string) *Dispatch {
		d := x.Begin(now, Request{Session: session, Turn: 1, Blocks: []uint64{uint64(len(session))}, Input: 64, Output: 4})
		for d.Action().Kind == ActAdmit && d.Action().D != 0 {
			d.Reply(AdmitReply{Reason: "no-space"}) // steer it to d0
		}
		if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
			t.Fatalf("%s: %+v", session, a)
		}
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		if a := d.Action(); a.Kind != ActSeed || a.D != 0 {
			t.Fatalf("%s: %+v", session, a)
		}
		d.Accepted()
		return d
	}
	// A closed breaker: one failure, then a success; the failure still
	// counts in the window.
	f1 := seed(0, "a")
	f1.TransferFailed(1)
	f1.Finished(false)
	ok := seed(2, "b")
	ok.TransferLanded()
	ok.Finished(true)
	straggler := seed(3, "c") // decided while closed
	f2 := seed(3, "dd")
	f2.TransferFailed(4)
	f2.Finished(false)
	if !x.BreakerOpen(4, 0) {
		t.Fatal("two failures within the window did not open d0's breaker (the success between forgave the first)")
	}
	// Half-open after the cooldown; the straggler lands first.
	straggler.TransferLanded()
	straggler.Finished(true)
	if !x.BreakerOpen(4.5, 0) {
		t.Fatal("a straggler's landed transfer closed the breaker during its cooldown")
	}
	probe := seed(10, "eee")
	if !probe.probe {
		t.Fatal("the first seed after the cooldown is not the probe")
	}
	probe.TransferLanded()
	probe.Finished(true)
	if x.BreakerOpen(10, 0) {
		t.Fatal("the probe's landed transfer did not close the breaker")
	}
}

// Also found: a half-open breaker let through every dispatch decided
// before the probe's Accepted. The probe is taken at the decision now: a
// second dispatch decided meanwhile does not go to that decoder while
// another is allowed.
func TestHalfOpenOneProbe(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechPD, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		Breaker: BreakerConfig{Failures: 1, WindowS: 10, CooldownS: 1}},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
	x.PeerFailed(0, 0)
	x.PeerFailed(0.5, 1)
	r := Request{Blocks: []uint64{1, 2, 3}, Input: 192, Output: 4}
	a := x.Begin(5, r)
	b := x.Begin(5, r)
	if a.Action().Kind != ActPD || b.Action().Kind != ActPD {
		t.Fatalf("%+v %+v", a.Action(), b.Action())
	}
	if a.Action().D == b.Action().D {
		t.Fatalf("two dispatches decided during one half-open window both went to d%d", a.Action().D)
	}
	a.Accepted()
	b.Accepted()
	if !a.probe || !b.probe {
		t.Fatalf("each half-open decoder's one probe: %t %t", a.probe, b.probe)
	}
}
