package sim

import "testing"

// The project's three binary heaps (the event queue here, the radix tree's
// LRU leaves, the engine's trim order) are written out per element type.
// These benchmarks are why: the same sift written once as a generic over
// an element with a Before method runs the event queue's pop-and-push 2–3×
// slower (Go calls a type parameter's method through its dictionary, so
// Before is not inlined), and container/heap boxes every element.

// ordered is an element type whose values order themselves.
type ordered[E any] interface {
	*E
	Before(o *E) bool
}

func genericPush[E any, P ordered[E]](h *[]E, e E) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !P(&e).Before(&q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func genericPop[E any, P ordered[E]](h *[]E) E {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	var zero E
	q[n] = zero
	q = q[:n]
	*h = q
	i := 0
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && P(&q[r]).Before(&q[m]) {
			m = r
		}
		if !P(&q[m]).Before(&last) {
			break
		}
		q[i] = q[m]
		i = m
	}
	if n > 0 {
		q[i] = last
	}
	return top
}

func (e *event) Before(o *event) bool { return before(e, o) }

// heapBenchEvents are 4,096 events at pseudo-random times.
func heapBenchEvents() []event {
	ev := make([]event, 4096)
	x := uint64(88172645463325252)
	for i := range ev {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		ev[i] = event{t: float64(x%100000) / 7, seq: uint64(i)}
	}
	return ev
}

// TestGenericHeapOrders checks the generic heap the benchmark compares
// against pops in the event queue's order, so the comparison is of equals.
func TestGenericHeapOrders(t *testing.T) {
	ev := heapBenchEvents()
	var typed eventHeap
	var gen []event
	for _, e := range ev {
		typed.push(e)
		genericPush(&gen, e)
	}
	for len(typed) > 0 {
		a, b := typed.pop(), genericPop(&gen)
		if a.t != b.t || a.seq != b.seq {
			t.Fatalf("typed heap popped (%v, %d), generic (%v, %d)", a.t, a.seq, b.t, b.seq)
		}
	}
}

// BenchmarkEventHeap is one pop and one push on a 1,024-event queue.
func BenchmarkEventHeap(b *testing.B) {
	ev := heapBenchEvents()
	var h eventHeap
	for _, e := range ev[:1024] {
		h.push(e)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := h.pop()
		e.t += ev[i&4095].t
		h.push(e)
	}
}

// BenchmarkEventHeapGeneric is BenchmarkEventHeap on the generic heap.
func BenchmarkEventHeapGeneric(b *testing.B) {
	ev := heapBenchEvents()
	var h []event
	for _, e := range ev[:1024] {
		genericPush(&h, e)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := genericPop(&h)
		e.t += ev[i&4095].t
		genericPush(&h, e)
	}
}
