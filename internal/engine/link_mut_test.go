package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Active counts the transfers in setup and those flowing: two started
// with a 1 s setup and one past its setup are 2 + 1 = 3.
func TestLinkActiveCountsSetupAndFlow(t *testing.T) {
	l := NewLink(model.Link{Name: "l", SetupS: 1, BandwidthBytes: 1000})
	l.Start(0, &Transfer{Bytes: 10000}) // flows from 1 s, for 10 s alone
	l.Advance(1)
	if len(l.setup) != 0 || len(l.flowing) != 1 {
		t.Fatalf("at 1 s: %d in setup, %d flowing; want 0, 1", len(l.setup), len(l.flowing))
	}
	l.Start(1.5, &Transfer{Bytes: 10})
	l.Start(1.5, &Transfer{Bytes: 10})
	if got := l.Active(); got != 3 {
		t.Fatalf("Active %d, want 1 flowing + 2 in setup = 3", got)
	}
}

// A transfer of no bytes is done when its setup ends: it never joins the
// flow, so it is not active and takes no share of the bandwidth.
func TestLinkZeroByteTransferNeverFlows(t *testing.T) {
	l := NewLink(model.Link{Name: "l", SetupS: 0, BandwidthBytes: 1000})
	z := &Transfer{Bytes: 0}
	l.Start(0, z) // its setup (0 s) ends at 0
	y := &Transfer{Bytes: 1000}
	l.Start(0, y) // brings the link to 0 first: z is done there
	if got := l.Active(); got != 1 {
		t.Fatalf("Active %d after the empty transfer's setup, want 1 (y in setup)", got)
	}
	if at, ok := l.NextTime(); !ok || at != 0 {
		t.Fatalf("NextTime %v %v, want 0 at once (z waits to be handed over)", at, ok)
	}
	if done := l.Advance(0); len(done) != 1 || done[0] != z || z.DoneAt != 0 {
		t.Fatalf("Advance(0) = %v, z done at %v; want z alone, at 0", done, z.DoneAt)
	}
	// y flows alone at 1,000 B/s: 1,000 bytes end at 1 s.
	if done := l.Advance(2); len(done) != 1 || done[0] != y || y.DoneAt != 1 {
		t.Fatalf("Advance(2) = %v, y done at %v; want y at 1 s", done, y.DoneAt)
	}
}

// A completion that rounding puts short of its tag is still taken at the
// instant NextTime names. At 10⁶ s a 2-byte transfer on a 1 GB/s link ends
// 2 ns later; 10⁶ + 2e-9 rounds to a time whose distance from 10⁶, times
// 1e9 B/s, is about 1.98 bytes, 1 % short of the tag. Advance at that
// instant must still complete it (else the link would name the same
// instant for ever and never hand it over).
func TestLinkRoundedCompletionTakenAtOnce(t *testing.T) {
	const start, bytes, bw = 1e6, 2, 1e9
	l := NewLink(model.Link{Name: "l", SetupS: 0, BandwidthBytes: bw})
	x := &Transfer{Bytes: bytes}
	l.Start(start, x)
	l.Advance(start) // setup over: x flows with tag 2
	at, ok := l.NextTime()
	if !ok || at <= start {
		t.Fatalf("NextTime %v %v, want just after %v", at, ok, float64(start))
	}
	if served := (at - start) * bw; served >= bytes*(1-1e-12) {
		// A platform that fuses the multiply-add rounds otherwise.
		t.Skipf("%v bytes served at %v: this platform's rounding is not short of %d", served, at, bytes)
	}
	var done []*Transfer
	for i := 0; i < 5 && len(done) == 0; i++ {
		next, ok := l.NextTime()
		if !ok {
			break
		}
		done = append(done, l.Advance(next)...)
	}
	if len(done) != 1 || done[0] != x || x.DoneAt != at {
		t.Fatalf("after 5 advances: done %v, DoneAt %v; want x, at %v", done, x.DoneAt, at)
	}
}

// complete takes a transfer within 1e-12 of its own tag: with a tag of
// 10¹⁵ bytes, 100 bytes short (1e-13) is done, 1,000 short (1e-12 × 10¹⁵,
// exactly the tolerance) is done, 2,000 short (2e-12) is not.
func TestLinkCompleteTolerance(t *testing.T) {
	for _, c := range []struct {
		short float64
		done  bool
	}{{0, true}, {100, true}, {1000, true}, {2000, false}} {
		l := NewLink(model.Link{Name: "l", BandwidthBytes: 1e9})
		x := &Transfer{Bytes: 1, finish: 1e15}
		l.flowing = []*Transfer{x}
		l.served = 1e15 - c.short
		l.complete(7)
		if got := len(l.done) == 1; got != c.done {
			t.Fatalf("%v bytes short of a 1e15 tag: done %v, want %v", c.short, got, c.done)
		}
	}
}
