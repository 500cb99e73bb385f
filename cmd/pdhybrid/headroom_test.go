package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestHeadroomPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 * mib, 1600},        // before the first collection: 4 MiB × 16 = 64 MiB
		{1 * mib, 64 * mib, 1600},  // the heap minimum rules under 4 MiB
		{16 * mib, 64 * mib, 400},  // 16 + 64 MiB
		{20 * mib, 64 * mib, 320},  // 20 + 64 MiB
		{30 * mib, 64 * mib, 214},  // rounded up: 30 + 64.2 MiB
		{64 * mib, 64 * mib, 100},  // Go's doubling gives the floor itself
		{500 * mib, 64 * mib, 100}, // never below the default
		{10 * mib, 0, 100},         // no floor: the default
	} {
		if got := headroomPercent(c.live, c.floor); got != c.want {
			t.Errorf("live %d MiB, floor %d MiB: GOGC %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

// After each collection the tuner sets GOGC from the live heap that
// collection left, and goes on doing so (its hook re-arms).
func TestHeadroomRetunesAfterEachCollection(t *testing.T) {
	saved := debug.SetGCPercent(100)
	defer debug.SetGCPercent(saved)
	h := newHeadroom(1 << 40) // far above any live heap: GOGC reads floor/live
	defer h.off.Store(true)
	h.arm()
	for round := 0; round < 3; round++ {
		debug.SetGCPercent(100)
		runtime.GC()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.Gosched()
			if p := debug.SetGCPercent(-1); p != 100 {
				debug.SetGCPercent(p)
				if p < 1000 {
					t.Fatalf("round %d: GOGC %d, want floor/live (over 1000)", round, p)
				}
				break
			} else {
				debug.SetGCPercent(p)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: GOGC not re-tuned 10 s after a collection", round)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
