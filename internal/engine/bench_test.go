package engine

import (
	"testing"
)

// BenchmarkDecodeStep: scheduling work per decode event with a 64-request
// batch on a decode worker (each Advance is one arithmetic run up to the
// next finish, then a new request joins).
func BenchmarkDecodeStep(b *testing.B) {
	p, _ := testProfileB()
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: p, BlockSize: 64, MaxRunning: 128})
	now := 0.0
	id := int64(0)
	add := func() {
		id++
		r := &Request{ID: id, Kind: DecodeOnly, Input: 50000, Output: 1 + int(id%300)}
		w.Reserve(now, r)
		w.StartDecode(now, r)
	}
	for i := 0; i < 64; i++ {
		add()
	}
	w.TakeEvents()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, _ := w.NextTime()
		now = t
		w.Advance(now)
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvFinished {
				add()
			}
		}
		w.TakeEvents()
	}
}
