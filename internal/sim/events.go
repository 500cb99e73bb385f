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
	idx  int32  // worker or link index
	ver  uint32 // for evWorker/evLink: schedule version; stale ones are skipped
	req  *req
	xfer *engine.Transfer // evXferTimeout
}

// eventHeap is a binary min-heap of events by (time, sequence), typed so
// that a push or pop does not box the event (container/heap would allocate
// on every one of the millions of events of a long run).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
