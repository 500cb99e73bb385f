package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// heapHeadroom is the least room the collector leaves above the live heap
// in the simulator's commands (sim, bench, sweep).
//
// Go's default (GOGC=100) starts a collection when the heap doubles, from
// a 4 MiB start: a run over the Mooncake trace (12,031 requests, under
// 60 MB allocated in all) collected six times, and the collector took
// 10–24 % of its CPU. With at least 64 MiB of headroom it collects not at
// all, and a large run (live heap over 64 MiB) keeps
// GOGC=100's doubling: peak memory grows by at most 64 MiB, never by a
// factor. A GOGC the user sets is left alone.
const heapHeadroom = 64 << 20

var headroomOnce sync.Once

// keepHeapHeadroom sets the collector to leave at least heapHeadroom bytes
// above the live heap from now on, re-tuned after every collection, and
// first asks for huge pages for that much heap (hugeheap.go).
func keepHeapHeadroom() {
	if os.Getenv("GOGC") != "" {
		return
	}
	headroomOnce.Do(func() {
		hugeHeap(heapHeadroom)
		h := newHeadroom(heapHeadroom)
		debug.SetGCPercent(headroomPercent(0, h.floor))
		h.arm()
	})
}

type headroom struct {
	floor  uint64
	sample []metrics.Sample
	off    atomic.Bool // the hook stops at the next collection (tests)
}

func newHeadroom(floor uint64) *headroom {
	return &headroom{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// gcCycle is garbage the moment it is made: its finalizer runs after the
// next collection, re-tunes and makes the next one. It holds a pointer, so
// it is never batched in the tiny allocator (whose finalizers may not run).
type gcCycle struct{ h *headroom }

func (h *headroom) arm() {
	runtime.SetFinalizer(&gcCycle{h: h}, func(c *gcCycle) {
		if c.h.off.Load() {
			return
		}
		c.h.tune()
		c.h.arm()
	})
}

// tune sets GOGC for the live heap the last collection left.
func (h *headroom) tune() {
	metrics.Read(h.sample)
	var live uint64
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		live = h.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(headroomPercent(live, h.floor))
}

// headroomPercent is the GOGC that puts the next collection about floor
// bytes above a live heap of live bytes, and never below Go's default of
// 100. The heap goal is live + (live + stacks + globals) × GOGC/100 but at
// least Go's heap minimum, 4 MiB × GOGC/100 (the whole goal before the
// first collection, which live = 0 stands for): so a percent of floor/live
// suffices, with live taken as at least 4 MiB, where the minimum rules.
func headroomPercent(live, floor uint64) int {
	const startHeap = 4 << 20
	if live < startHeap {
		live = startHeap
	}
	return max(100, int((floor*100+live-1)/live))
}
