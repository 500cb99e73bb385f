package kvc

import (
	"strings"
	"testing"
)

// A drained decoder gets no new request, not even its own session's direct
// append; with every decoder drained a request fails naming why; a decoder
// added at run time is picked, and undraining lets the first one back.
func TestPoolExcludeAndAdd(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	serve(t, x, 1, nil) // seeds on d0
	if p := x.session(SessionKey{ID: "s"}).pin; p != 0 {
		t.Fatalf("seeded on d%d", p)
	}
	x.DRouter().SetExcluded(0, true)
	for turn := 2; turn <= 4; turn++ {
		d := serve(t, x, turn, nil)
		if d.Decoder() == 0 {
			t.Fatalf("turn %d went to drained d0 (%v)", turn, d.Path())
		}
	}
	for _, w := range []int{1, 2} {
		x.DRouter().SetExcluded(w, true)
	}
	d := x.Begin(0, Request{Session: "s", Turn: 5, Blocks: []uint64{1}, Input: 10, Output: 1})
	if a := d.Action(); a.Kind != ActFail || !strings.Contains(a.Cause, "drained") {
		t.Fatalf("every decoder drained: %+v, want a failure naming the drain", a)
	}
	n := x.AddDecoder("d3")
	if n != 3 || x.cfg.MaxRetries != 3 {
		t.Fatalf("AddDecoder: index %d, ε %d; want 3 and 3", n, x.cfg.MaxRetries)
	}
	d = serve(t, x, 6, nil)
	if d.Decoder() != 3 {
		t.Fatalf("with only d3 in the pool the request went to d%d (%v)", d.Decoder(), d.Path())
	}
	x.DRouter().SetExcluded(0, false)
	x.DRouter().SetExcluded(3, true)
	if d = serve(t, x, 7, nil); d.Decoder() != 0 {
		t.Fatalf("undrained d0 not picked: d%d", d.Decoder())
	}
}

// A removed decoder's sessions are forgotten: the session's next turn is
// admitted and seeded elsewhere, not taken as resident there.
func TestPoolForgetDecoder(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	serve(t, x, 1, nil)
	x.DRouter().SetExcluded(0, true)
	x.ForgetDecoder(0)
	if _, ok := x.DRouter().Pin("s"); ok || x.session(SessionKey{ID: "s"}).pin != -1 || x.onD[0] != 0 {
		t.Fatalf("after ForgetDecoder(0) the session is still pinned (pin %d, onD %v)", x.session(SessionKey{ID: "s"}).pin, x.onD)
	}
	d := serve(t, x, 2, nil)
	if d.Decoder() == 0 || !strings.Contains(d.Mode(), "seed") {
		t.Fatalf("turn 2: %s on d%d, want a seed off d0", d.Mode(), d.Decoder())
	}
}

// Plain PD with every prefill worker drained fails, naming the pool.
func TestPoolNoPrefill(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechPD, Policy: PolicyKVAware}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	x.PRouter().SetExcluded(0, true)
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 10, Output: 1})
	if a := d.Action(); a.Kind != ActFail || !strings.Contains(a.Cause, "no-prefill-worker") {
		t.Fatalf("%+v, want a failure naming the prefill pool", a)
	}
}
