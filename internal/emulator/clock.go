package emulator

import (
	"sort"
	"sync"
	"time"
)

// Clock is the wall clock the emulator reads. Only the driver (and the
// handlers' stall and startup waits) call it; the engine model never does.
// Tests inject a FakeClock to make timing exact.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer fires once on C after its duration, unless stopped first.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// RealClock is the system clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// FakeClock is a clock that moves only when told. Timers fire when Advance
// reaches their deadline, in deadline order; WaitForTimers lets a test wait
// (in real time) until the code under test has armed its timers, so it can
// then move time exactly to the next deadline.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	armed  chan struct{} // closed and replaced whenever a timer is armed
}

// NewFakeClock starts at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), armed: make(chan struct{})}
}

type fakeTimer struct {
	c        *FakeClock
	ch       chan time.Time
	deadline time.Time
	fired    bool
	stopped  bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired || t.stopped {
		return false
	}
	t.stopped = true
	t.c.remove(t)
	return true
}

// Now is the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a timer d from the fake now; d ≤ 0 fires at the next
// Advance (of any length, zero included).
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), deadline: c.now.Add(max(d, 0))}
	c.timers = append(c.timers, t)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].deadline.Before(c.timers[j].deadline) })
	close(c.armed)
	c.armed = make(chan struct{})
	return t
}

func (c *FakeClock) remove(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves time forward by d, firing every timer whose deadline is
// reached.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
	c.fireDue()
}

func (c *FakeClock) fireDue() {
	for len(c.timers) > 0 && !c.timers[0].deadline.After(c.now) {
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.fired = true
		t.ch <- c.now
	}
}

// Next is the earliest pending deadline.
func (c *FakeClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].deadline, true
}

// AdvanceToNext moves time to the earliest pending deadline (not backwards)
// and fires what is due there; it reports whether a timer was pending.
func (c *FakeClock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	if d := c.timers[0].deadline; d.After(c.now) {
		c.now = d
	}
	c.fireDue()
	return true
}

// Pending is the number of armed timers.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers waits up to timeout of real time until at least n timers
// are armed, and reports whether they are.
func (c *FakeClock) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, armed := len(c.timers) >= n, c.armed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-armed:
		case <-deadline.C:
			return false
		}
	}
}
