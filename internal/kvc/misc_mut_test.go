package kvc

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// Bounds of small helpers mutation testing found no test of (breaker.go,
// pool.go, service.go, tiers.go), every figure by hand.

// A breaker opened at 100 s with a 10 s cooldown lets its probe through at
// 110 s, not at 105 s; with Failures 0 it never opens.
func TestBreakerCooldownAndOffByHand(t *testing.T) {
	b := breaker{cfg: BreakerConfig{Failures: 1, CooldownS: 10}, open: true, openedAt: 100}
	if b.sent(105) {
		t.Error("probe at 105 s, 5 s into a 10 s cooldown")
	}
	if !b.sent(110) {
		t.Error("no probe at 110 s, the cooldown's end")
	}
	off := breaker{cfg: BreakerConfig{Failures: 0, WindowS: 10}}
	for i := range 5 {
		off.failure(float64(i), false)
	}
	if off.open || len(off.fails) != 0 {
		t.Errorf("Failures 0: open %t with %d failures counted; want closed, none", off.open, len(off.fails))
	}
}

// ForgetDecoder(1) unpins only the sessions on d1, forgets d1's last-turn
// mark and belief path, and leaves d0's alone; a record whose handles do
// not reach d1 is left as it is.
func TestForgetDecoderByHand(t *testing.T) {
	x := v3Dispatcher(V3Config{})
	x.Resident("a", 0, []uint64{1}, 1000)
	a := x.sess(SessionKey{ID: "a"})
	a.handles[1] = x.d.PinTo(1, "a", []uint64{1})
	x.Resident("b", 1, []uint64{2}, 1000)
	c := x.session(SessionKey{ID: "c"})
	c.handles = make([]radix.Handle, 1)
	x.ForgetDecoder(1)
	b := x.sess(SessionKey{ID: "b"})
	if a.pin != 0 || a.last != 0 || b.pin != -1 || b.last != -1 {
		t.Errorf("a pin %d last %d, b pin %d last %d; want 0 0 −1 −1", a.pin, a.last, b.pin, b.last)
	}
	if a.handles[1] != (radix.Handle{}) || a.handles[0] == (radix.Handle{}) {
		t.Error("a's handles: want d1's forgotten and d0's kept")
	}
}

// SetDown and Down ignore an index past the pool.
func TestSetDownPastThePool(t *testing.T) {
	x := v3Dispatcher(V3Config{})
	x.SetDown(RoleDecode, 1, true)
	x.SetDown(RoleDecode, 2, true) // two decoders: no d2
	x.SetDown(RolePrefill, 1, true)
	if !x.Down(RoleDecode, 1) || x.Down(RoleDecode, 2) || x.Down(RolePrefill, 1) || x.Down(RoleDecode, -1) {
		t.Errorf("down: d1 %t, d2 %t, p1 %t; want true, false, false", x.Down(RoleDecode, 1), x.Down(RoleDecode, 2), x.Down(RolePrefill, 1))
	}
}

// A host-tier answer with no host tokens, or of a tier not named, changes
// nothing the router believes of the session's host copy.
func TestBelieveTierNeedsHostTokens(t *testing.T) {
	for _, rep := range []AdmitReply{{Tier: TierHost, HostTokens: 0}, {Tier: "disk", HostTokens: 300}} {
		x := v3Dispatcher(V3Config{})
		x.Resident("s", 0, []uint64{1}, 1000)
		s := x.sess(SessionKey{ID: "s"})
		s.onHost, s.hostTok = true, 500
		x.believeTier(0, SessionKey{ID: "s"}, rep)
		if !s.onHost || s.hostTok != 500 {
			t.Errorf("%+v: onHost %t, %d host tokens; want true, 500", rep, s.onHost, s.hostTok)
		}
	}
}
