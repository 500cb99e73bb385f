package engine

import "testing"

// Tests that pin order.go's rules one by one, each with values worked out
// by hand (docs/mutation.md, "engine, order.go, trimorder.go, slice.go,
// worker.go").

// orderWorker is a prefill worker with a prefix cache whose waiting
// requests are never planned: Submit only marks it busy, and no test here
// calls Advance, so what the order holds is what Submit and the cache left.
func orderWorker(t *testing.T, shortest bool, maxWait float64) *Worker {
	t.Helper()
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1 << 20,
		PrefixCache: true, ShortestFirst: shortest, MaxWaitS: maxWait})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// cachePrompt puts blocks (the last one lastTokens long) in w's prefix
// cache, unlocked, as a finished prompt leaves them.
func cachePrompt(w *Worker, blocks []uint64, lastTokens int64) {
	w.tree.Insert(0, blocks, 0, lastTokens, 0)
}

// watchEntries counts the entries w's watch index holds, and fails on a
// slot filed with none.
func watchEntries(t *testing.T, w *Worker) int {
	t.Helper()
	n := 0
	for s, refs := range w.order.watch {
		if len(refs) == 0 {
			t.Fatalf("slot %+v filed with no entry", s)
		}
		n += len(refs)
	}
	return n
}

// The counts are kept only where a decision reads them: shortest-first
// admission, or a session worker's prefill bypass with a threshold above 0.
func TestMutOrderOnOnlyWhereCountsAreRead(t *testing.T) {
	for _, tc := range []struct {
		shortest bool
		session  bool
		bypass   int
		want     bool
	}{
		{false, false, 0, false},
		{false, true, 0, false}, // a session worker without a bypass
		{false, true, 1, true},
		{true, false, 0, true},
	} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1 << 20,
			PrefixCache: true, ShortestFirst: tc.shortest, Session: SessionConfig{Enabled: tc.session, BypassTokens: tc.bypass}})
		if err != nil {
			t.Fatal(err)
		}
		if w.order.on != tc.want || (w.order.watch != nil) != tc.want {
			t.Errorf("shortest %v, session %v, bypass %d: order on %v (watch %v), want %v",
				tc.shortest, tc.session, tc.bypass, w.order.on, w.order.watch != nil, tc.want)
		}
	}
}

// Work is the order's count, plus the scheduler's, plus the cache's.
func TestMutWorkSumsItsParts(t *testing.T) {
	w := orderWorker(t, false, 0)
	cachePrompt(w, chain(1, 4), 64)
	w.PrefixMatch(chain(1, 4), 256) // the cache walks one edge of 4 blocks: 4 + 1
	w.order.work, w.schedWork = 5, 7
	if tw := w.tree.Work(); tw == 0 || w.Work() != 12+tw {
		t.Fatalf("Work %d, want 5 + 7 + the cache's %d (> 0)", w.Work(), tw)
	}
	bare, err := New(Config{Name: "c", Profile: testProfile(t), BlockSize: 64, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	bare.order.work, bare.schedWork = 5, 7
	if bare.Work() != 12 {
		t.Fatalf("Work without a cache %d, want 5 + 7", bare.Work())
	}
}

// Only a request with blocks on a worker with a cache is watched: live
// counts the watched ones, in and out of the queue.
func TestMutWatchedCount(t *testing.T) {
	w := orderWorker(t, true, 0)
	a := &Request{ID: 1, Kind: PrefillOnly, Blocks: chain(1, 2), Input: 128, Output: 1}
	b := &Request{ID: 2, Kind: PrefillOnly, Input: 50, Output: 1} // no blocks: nothing to match
	c := &Request{ID: 3, Kind: PrefillOnly, Blocks: chain(3, 2), Input: 128, Output: 1}
	for _, r := range []*Request{a, b, c} {
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err)
		}
	}
	if !a.wait.track || b.wait.track || !c.wait.track || w.order.live != 2 {
		t.Fatalf("watched a %v b %v c %v, live %d; want a and c, live 2", a.wait.track, b.wait.track, c.wait.track, w.order.live)
	}
	w.dequeue(a)
	if a.wait.track || w.order.live != 1 {
		t.Fatalf("after a leaves: watched %v, live %d; want false, 1", a.wait.track, w.order.live)
	}
	// An empty cache: each watched match looks into one slot under the
	// root and hangs from none, so a and c have one entry each, a's stale.
	if n := watchEntries(t, w); n != 2 || w.order.refs != 2 {
		t.Fatalf("watch holds %d entries, refs says %d; want 2 and 2", n, w.order.refs)
	}
}

// A match that ends at a cached node is watched at two slots: the one it
// looks into and the one its node hangs from; refs counts both.
func TestMutWatchTwoSlots(t *testing.T) {
	w := orderWorker(t, true, 0)
	cachePrompt(w, chain(1, 4), 64)
	a := &Request{ID: 1, Kind: PrefillOnly, Blocks: append(chain(1, 4), 7, 8), Input: 384, Output: 1}
	if err := w.Submit(0, a); err != nil {
		t.Fatal(err)
	}
	if n := watchEntries(t, w); n != 2 || w.order.refs != 2 {
		t.Fatalf("watch holds %d entries, refs says %d; want 2 and 2", n, w.order.refs)
	}
	// 384 tokens less the 256 cached.
	if a.wait.unc != 128 {
		t.Fatalf("a's uncached count %d, want 384 − 256 = 128", a.wait.unc)
	}
}

// The watch index is compacted once its entries pass 4·live + 4096: with
// a and b watched (live 2) at two slots each, every rematch of a adds 2
// stale-making entries; 4 + 2·2050 = 4104 is not past 4·2 + 4096 = 4104,
// 4106 is, and then only the four live entries stay.
func TestMutWatchCompaction(t *testing.T) {
	w := orderWorker(t, true, 0)
	cachePrompt(w, chain(1, 4), 64)
	a := &Request{ID: 1, Kind: PrefillOnly, Blocks: append(chain(1, 4), 7), Input: 320, Output: 1}
	b := &Request{ID: 2, Kind: PrefillOnly, Blocks: append(chain(1, 4), 7, 9), Input: 384, Output: 1}
	for _, r := range []*Request{a, b} {
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err)
		}
	}
	if w.order.refs != 4 || w.order.live != 2 {
		t.Fatalf("refs %d live %d, want 4 and 2", w.order.refs, w.order.live)
	}
	for range 2050 {
		w.rematch(a)
	}
	if w.order.refs != 4104 {
		t.Fatalf("after 2,050 rematches refs %d, want 4 + 4,100 = 4,104 (no compaction yet)", w.order.refs)
	}
	work := w.order.work
	w.rematch(a)
	if w.order.refs != 4 || watchEntries(t, w) != 4 {
		t.Fatalf("after the 2,051st rematch refs %d (%d filed), want the 4 live entries", w.order.refs, watchEntries(t, w))
	}
	if got := w.order.work - work; got != 4106 {
		t.Fatalf("compaction looked at %d entries, want 4,106", got)
	}
	// The live entries still work: a change at the slot a and b look into
	// (block 7 under the cached chain) matches both again.
	cachePrompt(w, append(chain(1, 4), 7), 64)
	w.syncOrder()
	if !a.wait.fresh || !b.wait.fresh || a.wait.unc != 1 || b.wait.unc != 64 {
		t.Fatalf("after block 7 is cached: a fresh %v unc %d, b fresh %v unc %d; want 320 − min(320, 319) = 1 and 384 − 320 = 64",
			a.wait.fresh, a.wait.unc, b.wait.fresh, b.wait.unc)
	}
}

// A request that leaves the queue and comes back (vLLM's preemption puts
// requests back) must not revive the entries of its first wait: after a
// compaction only its current two are left.
func TestMutRequeuedRequestEntriesStayStale(t *testing.T) {
	w := orderWorker(t, true, 0)
	cachePrompt(w, chain(1, 4), 64)
	a := &Request{ID: 1, Kind: PrefillOnly, Blocks: append(chain(1, 4), 7), Input: 320, Output: 1}
	w.enqueue(a)
	w.dequeue(a)
	w.enqueue(a)
	if w.order.refs != 4 {
		t.Fatalf("refs %d, want 2 stale + 2 live", w.order.refs)
	}
	w.order.compact()
	if w.order.refs != 2 || watchEntries(t, w) != 2 {
		t.Fatalf("after compaction refs %d, want a's 2 live entries", w.order.refs)
	}
}

// The MaxWaitS bound is strict: a head that has waited exactly the bound
// is not aged yet, and the shortest goes first.
func TestMutMaxWaitStrict(t *testing.T) {
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1 << 20,
		ShortestFirst: true, MaxWaitS: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	big := &Request{ID: 1, Kind: PrefillOnly, Input: 1000, Output: 1}
	small := &Request{ID: 2, Kind: PrefillOnly, Input: 10, Output: 1}
	w.Submit(0, big)
	w.Submit(0.25, small)
	if r := w.nextWaiting(0.5); r != small {
		t.Fatalf("at 0.5 s (waited exactly 0.5 s) next is %d, want the shortest, 2", r.ID)
	}
	if r := w.nextWaiting(0.75); r != big {
		t.Fatalf("at 0.75 s (waited 0.75 s > 0.5 s) next is %d, want the aged head, 1", r.ID)
	}
}

// Equal uncached counts go in arrival order.
func TestMutShortestFirstTieArrival(t *testing.T) {
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1 << 20,
		ShortestFirst: true})
	if err != nil {
		t.Fatal(err)
	}
	rs := []*Request{
		{ID: 1, Kind: PrefillOnly, Input: 10, Output: 1},
		{ID: 2, Kind: PrefillOnly, Input: 10, Output: 1},
		{ID: 3, Kind: PrefillOnly, Input: 10, Output: 1},
	}
	for _, r := range rs {
		w.Submit(0, r)
	}
	for _, want := range rs {
		if r := w.nextWaiting(0); r != want {
			t.Fatalf("next %d, want %d (arrival order among 10-token prompts)", r.ID, want.ID)
		}
		w.dequeue(want)
	}
}

// A prompt the cache holds whole still computes its last token: 1
// uncached, whether counted at once or after the cache changed.
func TestMutFullyCachedCountsOne(t *testing.T) {
	w := orderWorker(t, true, 0)
	a := &Request{ID: 1, Kind: PrefillOnly, Blocks: chain(1, 4), Input: 256, Output: 1}
	w.Submit(0, a)
	if a.wait.unc != 256 {
		t.Fatalf("a on an empty cache: %d uncached, want 256", a.wait.unc)
	}
	cachePrompt(w, chain(1, 4), 64)
	w.syncOrder()
	if a.wait.unc != 1 {
		t.Fatalf("a fully cached, matched again: %d uncached, want 256 − min(256, 255) = 1", a.wait.unc)
	}
	b := &Request{ID: 2, Kind: PrefillOnly, Blocks: chain(1, 4), Input: 256, Output: 1}
	if got := w.uncachedNow(b); got != 1 {
		t.Fatalf("b fully cached, not queued: %d uncached, want 1", got)
	}
}

// A match taken while nothing changed is reused: the cache is not walked
// again (its Work does not move), for a watched request and an unwatched one.
func TestMutPromptMatchReused(t *testing.T) {
	for _, shortest := range []bool{false, true} {
		w := orderWorker(t, shortest, 0)
		cachePrompt(w, chain(1, 4), 64)
		r := &Request{ID: 1, Kind: PrefillOnly, Blocks: append(chain(1, 4), 7), Input: 320, Output: 1}
		if shortest {
			w.Submit(0, r) // watched
		}
		m := w.promptMatch(r)
		before := w.tree.Work()
		if again := w.promptMatch(r); again != m || w.tree.Work() != before {
			t.Fatalf("shortest %v: the second match walked the cache (work %d → %d) or moved (%+v → %+v)",
				shortest, before, w.tree.Work(), m, again)
		}
		if m.Tokens != 256 {
			t.Fatalf("shortest %v: matched %d tokens, want 256", shortest, m.Tokens)
		}
	}
}

// The heap's own work: one per push, remove and fix.
func TestMutHeapWork(t *testing.T) {
	var o waitOrder
	rs := []*Request{{ID: 1}, {ID: 2}, {ID: 3}}
	for i, unc := range []int{3, 1, 2} {
		rs[i].wait.unc, rs[i].wait.seq = unc, uint64(i+1)
		o.push(rs[i])
	}
	if o.work != 3 || o.heap[0] != rs[1] {
		t.Fatalf("after 3 pushes work %d, top %d; want 3 and request 2 (1 uncached)", o.work, o.heap[0].ID)
	}
	o.remove(rs[1]) // from the top: a swap with the last, then a fix
	if o.work != 5 || o.heap[0] != rs[2] {
		t.Fatalf("after removing the top work %d, top %d; want 3 + 1 + 1 = 5 and request 3", o.work, o.heap[0].ID)
	}
	last := o.heap[len(o.heap)-1]
	o.remove(last) // the last: no fix
	if o.work != 6 || len(o.heap) != 1 {
		t.Fatalf("after removing the last work %d, %d left; want 6 and 1", o.work, len(o.heap))
	}
}

// mkQueue is a queue of total slots with live requests from head on and
// total − head − live holes after them.
func mkQueue(head, live, total int) (*queue, []*Request) {
	q := &queue{items: make([]*Request, total), head: head, n: live}
	var rs []*Request
	for i := range live {
		r := &Request{ID: int64(i + 1)}
		r.wait.pos = int32(head + i)
		q.items[head+i] = r
		rs = append(rs, r)
	}
	return q, rs
}

// A push squeezes the queue when more than 64 taken slots lead it and
// they are at least half of it, or more than 64 holes follow the head and
// outnumber the live requests.
func TestMutQueueSqueeze(t *testing.T) {
	for _, tc := range []struct {
		head, live, total int
		squeeze           bool
	}{
		{65, 65, 130, true},  // head 65 > 64, 2·65 ≥ 130
		{64, 64, 128, false}, // head 64 is not > 64; no holes
		{65, 66, 131, false}, // 2·65 < 131; no holes
		{0, 10, 74, false},   // 64 holes: not > 64
		{0, 65, 130, false},  // 65 holes > 64 but not > 65 live
		{0, 10, 75, true},    // 65 holes > 64 and > 10 live
	} {
		q, rs := mkQueue(tc.head, tc.live, tc.total)
		x := &Request{ID: 999}
		q.push(x)
		rs = append(rs, x)
		squeezed := q.head == 0 && len(q.items) == tc.live+1
		if squeezed != tc.squeeze || !squeezed && len(q.items) != tc.total+1 {
			t.Errorf("head %d live %d slots %d: %d slots, head %d after a push; want squeezed %v",
				tc.head, tc.live, tc.total, len(q.items), q.head, tc.squeeze)
			continue
		}
		for _, r := range rs {
			if q.items[r.wait.pos] != r {
				t.Fatalf("head %d live %d slots %d: request %d not at its position %d", tc.head, tc.live, tc.total, r.ID, r.wait.pos)
			}
		}
		if q.len() != tc.live+1 || q.peek() != rs[0] {
			t.Fatalf("head %d live %d slots %d: len %d, head request %d", tc.head, tc.live, tc.total, q.len(), q.peek().ID)
		}
	}
}

// remove of a request this queue does not hold, whose position (from
// another queue) is one past this queue's end, is refused.
func TestMutQueueRemoveForeign(t *testing.T) {
	q, _ := mkQueue(0, 2, 2)
	r := &Request{ID: 9}
	r.wait.pos = 2
	if q.remove(r) || q.len() != 2 {
		t.Fatalf("removing a foreign request: len %d", q.len())
	}
}
