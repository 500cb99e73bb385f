package engine

import "testing"

// A vLLM-scheduled decode worker whose only request is a DecodeOnly one
// (its output reserved with its transfer) needs no free slots per step:
// the run is not capped by the free pool. roundProfile: the first token at
// the join (0), then decode steps of 0.005 + 0.001 = 0.006 s for the other
// two tokens → done at 0.012.
func TestVLLMDecodeOnlyRunNeedsNoFreeSlots(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 100, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: DecodeOnly, Input: 10, Output: 3}
	if err := w.Reserve(0, r); err != nil {
		t.Fatal(err)
	}
	if err := w.StartDecode(0, r); err != nil {
		t.Fatal(err)
	}
	_, done := times(w)
	if !near(r.FirstTokenAt, 0) || !near(done[1], 0.012) {
		t.Fatalf("first token %v, done %v; want 0, 0.012", r.FirstTokenAt, done[1])
	}
}

// vLLM's preemption victim is the Full request admitted last: a chunked
// Full prefill admitted at 2 beats a decode admitted at 1; a decode
// admitted at 3 beats it; of two admitted at the same time the later in the
// batch; DecodeOnly requests never.
func TestNewestRunningByHand(t *testing.T) {
	chunked := &Request{ID: 1, Kind: Full, AdmittedAt: 2}
	d1 := &Request{ID: 2, Kind: Full, AdmittedAt: 1}
	d3 := &Request{ID: 3, Kind: Full, AdmittedAt: 3}
	d3b := &Request{ID: 4, Kind: Full, AdmittedAt: 3}
	only := &Request{ID: 5, Kind: DecodeOnly, AdmittedAt: 9}
	for _, tc := range []struct {
		name     string
		chunked  *Request
		decoding []*Request
		want     *Request
	}{
		{"chunked newer than the decode", chunked, []*Request{d1}, chunked},
		{"decode newer than the chunked", chunked, []*Request{d1, d3}, d3},
		{"a tie goes to the later in the batch", nil, []*Request{d3, d3b, d1}, d3b},
		{"DecodeOnly is never a victim", nil, []*Request{only}, nil},
		{"a DecodeOnly chunked is not either", &Request{Kind: DecodeOnly, AdmittedAt: 5}, []*Request{d1}, d1},
	} {
		w := &Worker{chunked: tc.chunked, decoding: tc.decoding}
		if got := w.newestRunning(); got != tc.want {
			t.Errorf("%s: victim %v, want %v", tc.name, got, tc.want)
		}
	}
}

// pushFront on a queue whose head is at 0 shifts every live item one place
// (a hole left as it is) and keeps their positions right: each can still
// be removed by its position, and the queue pops the pushed one first.
func TestPushFrontAtHeadZero(t *testing.T) {
	var q queue
	a, b, c, d := &Request{ID: 1}, &Request{ID: 2}, &Request{ID: 3}, &Request{ID: 4}
	q.push(a)
	q.push(b)
	q.push(c)
	q.remove(b) // a hole at 1; the head stays at 0
	q.pushFront(d)
	if q.len() != 3 || q.head != 0 || d.wait.pos != 0 || a.wait.pos != 1 || c.wait.pos != 3 {
		t.Fatalf("len %d head %d; positions d %d a %d c %d; want 3, 0; 0, 1, 3", q.len(), q.head, d.wait.pos, a.wait.pos, c.wait.pos)
	}
	if !q.remove(c) || !q.remove(a) || q.pop() != d || q.len() != 0 {
		t.Fatalf("the shifted items could not be removed by position")
	}
}
