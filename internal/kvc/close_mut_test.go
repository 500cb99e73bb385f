package kvc

import (
	"fmt"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// Closing a session at its bounds (close.go): a closed record goes at once
// when nothing counts it, and stays while a pin on d0, a backup on p0, a
// request in flight or a decoder's belief path counts it.
func TestCloseSessionKeepsWhatCounts(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(x *Dispatcher, s *sessState)
		kept bool
	}{
		{"nothing counts", func(*Dispatcher, *sessState) {}, false},
		{"pinned on d0", func(_ *Dispatcher, s *sessState) { s.pin = 0 }, true},
		{"pinned on d1", func(_ *Dispatcher, s *sessState) { s.pin = 1 }, true},
		{"backup on p0", func(_ *Dispatcher, s *sessState) { s.backup = 0 }, true},
		{"one in flight", func(_ *Dispatcher, s *sessState) { s.inflight = 1 }, true},
		{"on the host tier", func(_ *Dispatcher, s *sessState) { s.onHost = true }, true},
		{"every belief path forgotten", func(_ *Dispatcher, s *sessState) { s.handles = make([]radix.Handle, 2) }, false},
		{"d1 believes a path", func(x *Dispatcher, s *sessState) {
			s.handles = make([]radix.Handle, 2)
			s.handles[1] = x.d.PinTo(1, "s", []uint64{1, 2})
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := v3Dispatcher(V3Config{})
			x.p.PinTo(0, "s", []uint64{1})
			c.set(x, x.session(SessionKey{ID: "s"}))
			x.CloseSession("s")
			if _, ok := x.p.pins.Get(SessionKey{ID: "s"}); ok {
				t.Error("P still pins the closed session")
			}
			if got := x.Sessions() == 1; got != c.kept {
				t.Errorf("record kept %t, want %t", got, c.kept)
			}
			x.CloseSession("s") // a second close changes nothing
			if got := len(x.closing); got != map[bool]int{true: 1, false: 0}[c.kept] {
				t.Errorf("%d sessions on the closing list, want %d", got, map[bool]int{true: 1, false: 0}[c.kept])
			}
		})
	}
	x := v3Dispatcher(V3Config{})
	x.CloseSession("never seen")
	if x.Sessions() != 0 || len(x.closing) != 0 {
		t.Errorf("closing an unknown session made %d records, %d on the list", x.Sessions(), len(x.closing))
	}
}

// The closing list is swept when it reaches 2 × kept + 256: 255 pinned
// sessions closed stay listed, the 256th sweeps (all still pinned: 256
// kept); once their pins go, the sweep at 2 × 256 + 256 = 768 drops them.
func TestCloseSessionSweepBounds(t *testing.T) {
	x := v3Dispatcher(V3Config{})
	closeN := func(from, n int) {
		for i := from; i < from+n; i++ {
			id := fmt.Sprint("s", i)
			x.session(SessionKey{ID: id}).pin = 0
			x.CloseSession(id)
		}
	}
	closeN(0, 255)
	if len(x.closing) != 255 || x.closingKept != 0 {
		t.Fatalf("after 255: %d listed, %d kept; want 255, 0", len(x.closing), x.closingKept)
	}
	closeN(255, 1)
	if len(x.closing) != 256 || x.closingKept != 256 {
		t.Fatalf("after 256: %d listed, %d kept; want 256, 256", len(x.closing), x.closingKept)
	}
	for i := range 256 {
		x.sess(SessionKey{ID: fmt.Sprint("s", i)}).pin = -1
	}
	closeN(256, 511)
	if len(x.closing) != 767 || x.Sessions() != 767 {
		t.Fatalf("after 767: %d listed, %d records; want 767, 767", len(x.closing), x.Sessions())
	}
	closeN(767, 1)
	if len(x.closing) != 512 || x.closingKept != 512 || x.Sessions() != 512 {
		t.Fatalf("after 768: %d listed, %d kept, %d records; want 512 each", len(x.closing), x.closingKept, x.Sessions())
	}
}
