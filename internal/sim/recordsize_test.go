package sim

import (
	"testing"
	"unsafe"
)

// TestRecordSizeClass holds the simulator's per-request record in the
// 640-byte allocation size class: one is allocated for every request a
// run serves, so the next class (704 bytes) costs 10 % more memory per
// request at scale. Features that only some requests use keep their state
// behind engine.Request's rare pointer (requestExtra) rather than inline;
// a field that pushes req past 640 bytes should go there too, or this
// bound should move with a measurement that says why.
func TestRecordSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(req{}); n > 640 {
		t.Errorf("sim.req is %d bytes, want at most 640 (the 640-byte size class)", n)
	}
}
