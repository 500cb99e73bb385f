package emulator

import (
	"container/heap"
	"math"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// The wall-clock driver: one goroutine owns the engine.Worker (and, on a
// prefill worker, the engine.Link its KV leaves on), because the engine is
// not safe for concurrent use and has no clock of its own. HTTP handlers
// send it closures over a channel; it runs each at the current model time,
// sleeps until the engine's NextTime (or the link's, or a timeout's, or the
// next token of a streamed request), calls Advance, and hands events to the
// server's hooks.
//
// Model time is wall time since the driver started, multiplied by the time
// scale: with --time-scale 10 a step the model charges 1 s takes 0.1 s.
// Engine calls always get exact model times: a step is advanced at its own
// end time even when the goroutine wakes late, so the model's timeline does
// not drift with the machine's load; only what clients see is late.

// driverHooks is what the server does with what the driver observes. Every
// hook runs on the driver goroutine.
type driverHooks interface {
	event(ev engine.Event)
	transferDone(now float64, t *engine.Transfer)
	// streamed is called after every step boundary that may have produced
	// tokens for streamed requests (see driver.streams).
	streamed(now float64)
}

type driver struct {
	clk   Clock
	start time.Time
	scale float64
	w     *engine.Worker
	link  *engine.Link // prefill workers: the egress link; else nil
	hooks driverHooks

	cmds chan func(now float64)
	quit chan struct{}
	done chan struct{}

	timers    timerHeap
	timerSeq  uint64
	compactAt int // heap size at which cancelled timers are swept out
	// streams holds the decoding requests whose clients get every token as
	// it is made; the driver wakes at their step boundaries.
	streams  map[*engine.Request]struct{}
	tickFrom float64 // last time streamed progress was handed out
	evbuf    []engine.Event
}

func newDriver(clk Clock, scale float64, w *engine.Worker, link *engine.Link) *driver {
	return &driver{
		clk: clk, scale: scale, w: w, link: link,
		cmds: make(chan func(float64)), quit: make(chan struct{}), done: make(chan struct{}),
		streams: map[*engine.Request]struct{}{},
	}
}

// now is the current model time (driver goroutine).
func (d *driver) now() float64 { return d.clk.Now().Sub(d.start).Seconds() * d.scale }

// wallFor is how long to sleep for dt model seconds (rounded up, so a wake
// is never early, and capped so a far deadline is re-examined hourly).
func (d *driver) wallFor(dt float64) time.Duration {
	s := dt / d.scale
	if s <= 0 {
		return 0
	}
	if s > 3600 {
		return time.Hour
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// do runs fn on the driver goroutine and waits for it; false means the
// driver has stopped and fn did not run.
func (d *driver) do(fn func(now float64)) bool {
	ran := make(chan struct{})
	select {
	case d.cmds <- func(now float64) { fn(now); close(ran) }:
	case <-d.done:
		return false
	}
	select {
	case <-ran:
		return true
	case <-d.done:
		return false
	}
}

// post queues fn for the driver without waiting for it to run.
func (d *driver) post(fn func(now float64)) bool {
	select {
	case d.cmds <- fn:
		return true
	case <-d.done:
		return false
	}
}

// stop ends the loop and waits for it.
func (d *driver) stop() {
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	<-d.done
}

func (d *driver) run() {
	defer close(d.done)
	d.start = d.clk.Now() // model time 0 is when the worker starts serving
	for {
		now := d.now()
		d.catchUp(now)
		var tc <-chan time.Time
		var tm Timer
		if at, ok := d.nextDue(); ok {
			tm = d.clk.NewTimer(d.wallFor(at - now))
			tc = tm.C()
		}
		select {
		case fn := <-d.cmds:
			if tm != nil {
				tm.Stop()
			}
			now = d.now()
			d.catchUp(now)
			fn(now)
			d.drain()
		case <-tc:
		case <-d.quit:
			if tm != nil {
				tm.Stop()
			}
			return
		}
	}
}

type dueKind uint8

const (
	dueNone dueKind = iota
	dueWorker
	dueLink
	dueTimer
	dueTick
)

// next is the earliest thing the driver must do and when.
func (d *driver) next() (float64, dueKind) {
	at, kind := math.Inf(1), dueNone
	if t, ok := d.w.NextTime(); ok {
		at, kind = t, dueWorker
	}
	if d.link != nil {
		if t, ok := d.link.NextTime(); ok && t < at {
			at, kind = t, dueLink
		}
	}
	for len(d.timers) > 0 && d.timers[0].cancelled {
		heap.Pop(&d.timers)
	}
	if len(d.timers) > 0 && d.timers[0].at < at {
		at, kind = d.timers[0].at, dueTimer
	}
	if t, ok := d.nextTick(); ok && t < at {
		at, kind = t, dueTick
	}
	return at, kind
}

func (d *driver) nextDue() (float64, bool) {
	at, kind := d.next()
	return at, kind != dueNone
}

// catchUp does, in time order, everything due by now, each at its own time.
func (d *driver) catchUp(now float64) {
	d.drain()
	for {
		at, kind := d.next()
		if kind == dueNone || at > now+1e-9 {
			return
		}
		switch kind {
		case dueWorker:
			d.w.Advance(at)
			d.drain()
			d.tickFrom = at
			d.hooks.streamed(at)
		case dueLink:
			for _, t := range d.link.Advance(at) {
				d.hooks.transferDone(at, t)
			}
			d.drain()
		case dueTimer:
			t := heap.Pop(&d.timers).(*dtimer)
			if !t.cancelled {
				t.fn(at)
				d.drain()
			}
		case dueTick:
			d.tickFrom = at
			d.hooks.streamed(at)
		}
	}
}

// drain hands the engine's pending events to the server, including those
// its handlers cause.
func (d *driver) drain() {
	for {
		evs := d.w.TakeEvents()
		if len(evs) == 0 {
			return
		}
		// The worker reuses the slice: copy before calling back into it.
		d.evbuf = append(d.evbuf[:0], evs...)
		for _, ev := range d.evbuf {
			d.hooks.event(ev)
		}
	}
}

// nextTick is the next step boundary of a decode run holding a streamed
// request, before the run's end (which NextTime covers). The run is
// advanced arithmetically, so the boundary is found by bisection on
// GeneratedBy, to 100 ns of model time.
func (d *driver) nextTick() (float64, bool) {
	if len(d.streams) == 0 {
		return 0, false
	}
	end, ok := d.w.NextTime()
	if !ok || end <= d.tickFrom {
		return 0, false
	}
	for r := range d.streams {
		if r.Stage != engine.StageDecoding {
			continue
		}
		base := d.w.GeneratedBy(d.tickFrom, r)
		if d.w.GeneratedBy(end, r) <= base {
			continue // not in the run in progress
		}
		lo, hi := d.tickFrom, end
		for i := 0; i < 64 && hi-lo > 1e-7; i++ {
			mid := lo + (hi-lo)/2
			if d.w.GeneratedBy(mid, r) > base {
				hi = mid
			} else {
				lo = mid
			}
		}
		if hi >= end-1e-9 {
			return 0, false
		}
		return hi, true
	}
	return 0, false
}

// after runs fn at model time at (on the driver goroutine); call it from the
// driver goroutine only.
func (d *driver) after(at float64, fn func(now float64)) *dtimer {
	// Cancelled timers wait in the heap for their time; a long timeout
	// under a high request rate would keep many, so sweep them out
	// whenever the heap has doubled.
	if len(d.timers) >= max(d.compactAt, 1024) {
		kept := d.timers[:0]
		for _, t := range d.timers {
			if !t.cancelled {
				kept = append(kept, t)
			}
		}
		clear(d.timers[len(kept):])
		d.timers = kept
		heap.Init(&d.timers)
		d.compactAt = 2 * len(d.timers)
	}
	d.timerSeq++
	t := &dtimer{at: at, seq: d.timerSeq, fn: fn}
	heap.Push(&d.timers, t)
	return t
}

// dtimer is a model-time callback.
type dtimer struct {
	at        float64
	seq       uint64
	fn        func(now float64)
	cancelled bool
}

func (t *dtimer) cancel() {
	if t != nil {
		t.cancelled = true
	}
}

type timerHeap []*dtimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*dtimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
