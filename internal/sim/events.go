package sim

// The simulator's event queue: what can happen next, in time order.

import "github.com/pdhybrid/pdhybrid/internal/engine"

// event kinds on the simulator's queue.
const (
	evWorker = iota
	evLink
	evRelease
	evTimeout
	evSample
	evAdmit       // an admission RPC's reply reaches the router
	evExecute     // a backpressure pause is over
	evXferTimeout // a transfer's timeout
	evLand        // a transfer the decoder can handle now (its trim stall is over)
	evSync        // a D→P snapshot's timeout or the end of its pin (dtop.go)
)

type event struct {
	t    float64
	seq  uint64
	kind uint8
	idx  int32 // worker or link index
	// For evWorker/evLink: the schedule version; for an event of a
	// request (pushFor): the request's life, req.gen. Stale ones are skipped.
	ver  uint32
	req  *req
	xfer *engine.Transfer // evXferTimeout
}

// current reports whether e's request is still the one e was queued for:
// false once the record was recycled for a later request (recycle.go).
// Only the events that do nothing for an ended request ask (a timeout, an
// admission reply, a pause's end, a transfer's timeout); the others cannot
// outlive their request (a release comes before the request is sent; a
// transfer landing after a trim stall holds the record, req.xferLive).
func (e *event) current() bool { return e.req.gen == e.ver }

// eventHeap is a binary min-heap of events by (time, sequence), typed so
// that a push or pop does not box the event (container/heap would allocate
// on every one of the millions of events of a long run).
type eventHeap []event

// before orders events by (time, sequence).
func before(a, b *event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// push and pop move a hole instead of swapping: each level writes one
// event, not two (events hold pointers, so every write pays a write
// barrier while the collector runs).
func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&e, &q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q[n] = event{}
	q = q[:n]
	*h = q
	if n == 0 {
		return top
	}
	i := 0
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && before(&q[r], &q[m]) {
			m = r
		}
		if !before(&q[m], &last) {
			break
		}
		q[i] = q[m]
		i = m
	}
	q[i] = last
	return top
}
