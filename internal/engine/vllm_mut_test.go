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

// A request preempted by recompute finds its prompt in the prefix cache on
// readmission and computes only the tokens it had generated. As in
// TestVLLMPreemptsByRecompute (pool 40), with each 10-token prompt in a
// block of its own: both prefill to 0.012 and decode 9 steps of 0.007 to
// 0.075, when the pool is full (2 × (10 + 10)); B is preempted (its 10
// generated tokens freed, its prompt left as cache, 10 free), A runs a step
// alone to 0.081, where B's 10 recomputed + 1 + A's next 1 = 12 do not fit
// the 9 free, and 9 more to its end at 0.135. B then has its 10 prompt
// tokens cached, computes its 10 generated ones (0.010 + 10·1e-4 → its 11th
// token at 0.146) and decodes 9 steps of 0.006: done at 0.200. Prefill in
// all: 20 + 10.
func TestVLLMRecomputeReusesTheCachedPrompt(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PoolTokens: 40, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Blocks: []uint64{1}, Input: 10, Output: 20}
	b := &Request{ID: 2, Kind: Full, Blocks: []uint64{2}, Input: 10, Output: 20}
	w.Submit(0, a)
	w.Submit(0, b)
	done := map[int64]float64{}
	for w.Running() > 0 || w.Queued() > 0 {
		t1, ok := w.NextTime()
		if !ok {
			t.Fatalf("stalled at %d running, %d queued", w.Running(), w.Queued())
		}
		w.Advance(t1)
		checkPool(t, w)
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvFinished {
				done[ev.Req.ID] = ev.Time
			}
		}
	}
	s := w.Stats()
	if !near(done[1], 0.135) || !near(done[2], 0.200) || s.Preemptions != 1 || b.CachedTokens != 10 || s.PrefillTokens != 30 {
		t.Fatalf("done A %v, B %v; %d preemptions; B cached %d; prefill %d; want 0.135, 0.200, 1, 10, 30",
			done[1], done[2], s.Preemptions, b.CachedTokens, s.PrefillTokens)
	}
}

// A step that preempted its only running request holds nothing back: the
// queue is tried at once. Pool 40: P (PrefillOnly, 20) and A (Full, 10
// prompt, 15 out) prefill together (0.010 + 30·1e-4 = 0.013); P's 20 stay
// held, A's 11 leave 9 free: 9 decode steps of 0.006 fill the pool at
// 0.067. A is preempted (its 20 freed), and tried again in the same plan:
// its 10 + 10 recomputed + 1 do not fit the 20 free, a KV wait. P's release
// at 1 lets it in: 20 tokens computed (0.012) and 4 decode steps (0.024):
// done at 1.036.
func TestVLLMLonePreemptionTriesTheQueue(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PoolTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	p := &Request{ID: 1, Kind: PrefillOnly, Input: 20}
	a := &Request{ID: 2, Kind: Full, Input: 10, Output: 15}
	w.Submit(0, p)
	w.Submit(0, a)
	end, _ := drive(w, 0)
	if !near(end, 0.067) || w.Stats().Preemptions != 1 || w.Stats().KVWaits != 1 || a.Stage != StageWaiting {
		t.Fatalf("idle at %v with %d preemptions, %d KV waits, A in stage %d; want 0.067, 1, 1, waiting", end, w.Stats().Preemptions, w.Stats().KVWaits, a.Stage)
	}
	if err := w.Release(1, p); err != nil {
		t.Fatal(err)
	}
	_, done := times(w)
	if !near(done[2], 1.036) || w.Stats().KVWaits != 1 {
		t.Fatalf("A done at %v, %d KV waits; want 1.036, 1", done[2], w.Stats().KVWaits)
	}
}
