package engine

import (
	"testing"
)

// BenchmarkDecodeStep: scheduling work per decode event with a 64-request
// batch of 5K-token contexts on a decode worker (each Advance is one arithmetic run up to the
// next finish, then a new request joins).
func BenchmarkDecodeStep(b *testing.B) {
	p, _ := testProfileB()
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: p, BlockSize: 64, MaxRunning: 128})
	now := 0.0
	id := int64(0)
	add := func() {
		id++
		r := &Request{ID: id, Kind: DecodeOnly, Input: 5000, Output: 1 + int(id%300)}
		if err := w.Reserve(now, r); err != nil || r.Stage != StageReserved {
			b.Fatal("reservation not granted at once", err)
		}
		w.StartDecode(now, r)
	}
	for i := 0; i < 64; i++ {
		add()
	}
	w.TakeEvents()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, ok := w.NextTime()
		if !ok {
			b.Fatal("decode worker went idle: the benchmark lost requests")
		}
		now = t
		w.Advance(now)
		finished := 0
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvFinished {
				finished++
			}
		}
		// Add only after the events are consumed: the worker reuses them.
		for ; finished > 0; finished-- {
			add()
		}
		w.TakeEvents()
	}
}
