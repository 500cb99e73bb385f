package engine

import (
	"math"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// TestLinkContention: two transfers flowing together share the bandwidth;
// a lone one runs at full speed after its setup latency.
func TestLinkContention(t *testing.T) {
	spec := model.Link{Name: "l", SetupS: 0.001, BandwidthBytes: 1e9}
	l := NewLink(spec)
	a := &Transfer{Bytes: 1e9}
	l.Start(0, a)
	if got, _ := l.NextTime(); got != 0.001 {
		t.Fatalf("first event at %v, want the end of setup 0.001", got)
	}
	// b starts when a is half done: both then flow at 0.5 GB/s.
	b := &Transfer{Bytes: 1e9}
	var done []*Transfer
	advance := func(until float64) {
		for {
			next, ok := l.NextTime()
			if !ok || next > until {
				return
			}
			done = append(done, l.Advance(next)...)
		}
	}
	advance(0.5)
	l.Advance(0.5)
	l.Start(0.5, b)
	advance(10)
	if len(done) != 2 || done[0] != a || done[1] != b {
		t.Fatalf("completion order %v", done)
	}
	// a flows alone from 0.001 to 0.501 (b's setup ends): 0.5 GB left. Both
	// then flow at 0.5 GB/s, so a ends at 1.501 with b half done; b then
	// flows alone and ends at 2.001.
	if math.Abs(a.DoneAt-1.501) > 1e-9 || math.Abs(b.DoneAt-2.001) > 1e-9 {
		t.Fatalf("a done %v (want 1.501), b done %v (want 2.001)", a.DoneAt, b.DoneAt)
	}
	if l.Active() != 0 {
		t.Fatalf("%d transfers left", l.Active())
	}
	if want := spec.TransferS(1e9); math.Abs(want-1.001) > 1e-12 {
		t.Fatalf("lone transfer time %v", want)
	}
}
