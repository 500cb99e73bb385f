package synth

// sessionHeap orders active sessions by the time of their next request, ties
// broken by creation order, so the merged stream is globally time-ordered and
// deterministic. It holds only sessions that still have turns to come, which
// is what keeps a generator's memory at O(concurrently active sessions).
type sessionHeap[S any] struct {
	items []heapItem[S]
}

type heapItem[S any] struct {
	at  float64
	seq uint64
	s   S
}

func (h *sessionHeap[S]) len() int { return len(h.items) }

func less[S any](a, b *heapItem[S]) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// peek returns the earliest item's time and sequence number; ok is false when
// the heap is empty.
func (h *sessionHeap[S]) peek() (at float64, seq uint64, ok bool) {
	if len(h.items) == 0 {
		return 0, 0, false
	}
	return h.items[0].at, h.items[0].seq, true
}

func (h *sessionHeap[S]) push(at float64, seq uint64, s S) {
	h.items = append(h.items, heapItem[S]{at, seq, s})
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&h.items[i], &h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

// pop removes and returns the earliest session.
func (h *sessionHeap[S]) pop() (at float64, s S) {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	var zero heapItem[S]
	h.items[last] = zero // drop the reference for the GC
	h.items = h.items[:last]
	i, n := 0, last
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&h.items[r], &h.items[l]) {
			m = r
		}
		if !less(&h.items[m], &h.items[i]) {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
	return top.at, top.s
}
