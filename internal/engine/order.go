package engine

import "github.com/pdhybrid/pdhybrid/internal/radix"

// Shortest-first admission (Config.ShortestFirst). SGLang admits a
// worker's waiting requests in arrival order (or by longest prefix match),
// so a direct append of a few hundred tokens queued behind a 40K-token
// local seed waits the seed out, and on a prefill worker a 19K-token cold
// prompt waits behind every larger one ahead of it (Mooncake at 4 GPUs:
// 1.96 s in P's queue at the p90–p99 band). Admitting the fewest uncached
// tokens first cuts those waits; MaxWaitS bounds what it costs the largest
// prompts, which go first once they have waited that long. Without the
// bound, the BLIS spec at 4 GPUs, overloaded, kept a request waiting 4,755 s.
//
// The order is (aged first, in arrival order), then fewest uncached tokens,
// then arrival order. Every scheduling decision costs O(log queue): the
// waiting requests sit in a heap by uncached tokens, and each keeps its
// uncached count as the cache stood when it was last matched. A change to
// the prefix cache moves only the matches that look into the slots it
// changed (radix.Tree's journal), so only those requests are matched again,
// not every waiting prompt at every step: re-matching them all was 71 % of
// a KVC v3 run's CPU at 100K short requests, and made it superlinear.

// waitState is a request's place in its worker's waiting queue and
// shortest-first order.
type waitState struct {
	// Its index in the queue it waits in, and in the shortest-first heap
	// + 1 (0 = not in it): 32 bits each, so that the Request keeps its
	// size class with the decode batch's clock mark (batchclock.go).
	pos   int32
	hidx  int32
	seq   uint64 // arrival number on this worker: the order's last key
	unc   int    // uncached prompt tokens as of its last match (fresh)
	fresh bool   // memo and unc hold for the cache as it stands
	track bool   // its match is watched (waitOrder.watch)
	gen   uint32 // bumped when its watch entries go stale
}

// waitOrder keeps the waiting requests' uncached counts current and their
// shortest-first order. It is on only where a decision reads those counts:
// shortest-first admission, or the prefill bypass.
type waitOrder struct {
	on      bool       // counts are kept (ShortestFirst or a bypass)
	heap    []*Request // ShortestFirst: by (unc, seq)
	seq     uint64
	watch   map[uint64][]watchRef  // matches a change at the slot may move, by slotKey
	refs    int                    // entries in watch, stale ones included
	live    int                    // watched requests
	dirty   []*Request             // matches to take again
	work    uint64                 // requests and entries looked at (Worker.Work)
	spare   [][]watchRef           // emptied watch lists, for reuse (fileWatch)
	fams    map[uint64]*waitFamily // prompt families by first block (orderfamily.go)
	famOf   map[*Request]famRef    // tracked waiting requests' families
	skipped uint64                 // blocks matched without compares (orderfamily.go)
}

// maxSpareWatch bounds the emptied watch lists kept for reuse, and
// maxSpareWatchCap the room of one kept: most slots name one or two
// requests, so a few small lists serve the next ones, and a list grown
// under a hot slot is left to the collector.
const (
	maxSpareWatch    = 256
	maxSpareWatchCap = 16
)

type watchRef struct {
	r   *Request
	gen uint32
}

func (w *Worker) initOrder() {
	w.order.on = w.cfg.ShortestFirst || w.bypassRoom() > 0
	if w.order.on && w.tree != nil {
		w.tree.Journal(true)
		w.order.watch = map[uint64][]watchRef{}
	}
}

// Work is a deterministic measure of the worker's scheduling cost so far:
// the waiting requests, watch entries, heap moves and trim-order entries
// its decisions looked at, and the nodes and blocks its prefix cache's
// lookups visited. Tests bound how it grows with the workload; wall time on
// a shared machine cannot.
func (w *Worker) Work() uint64 {
	n := w.order.work + w.schedWork
	if w.tree != nil {
		n += w.tree.Work()
	}
	return n
}

// enqueue adds r to the waiting queue (and the order).
func (w *Worker) enqueue(r *Request) {
	w.waiting.push(r)
	if !w.order.on {
		return
	}
	o := &w.order
	o.seq++
	r.wait.seq = o.seq
	r.wait.fresh = false
	if w.tree != nil && len(r.Blocks) > 0 {
		r.wait.track = true
		o.live++
		o.joinFamily(r)
	}
	r.wait.unc = w.uncachedNow(r)
	if w.cfg.ShortestFirst {
		o.push(r)
	}
}

// dequeue takes r off the waiting queue (and the order).
func (w *Worker) dequeue(r *Request) {
	if !w.waiting.remove(r) || !w.order.on {
		return
	}
	o := &w.order
	if r.wait.hidx > 0 {
		o.remove(r)
	}
	if r.wait.track {
		r.wait.track, r.wait.fresh = false, false
		r.wait.gen++ // its watch entries go stale
		o.live--
		o.leaveFamily(r)
	}
}

// nextWaiting is the request admission takes next: the queue's head in
// arrival order, or with ShortestFirst the one that has waited longest if
// it waited past MaxWaitS, else the one with the fewest uncached tokens.
func (w *Worker) nextWaiting(now float64) *Request {
	r := w.waiting.peek()
	if !w.cfg.ShortestFirst || (w.cfg.MaxWaitS > 0 && now-r.SubmittedAt > w.cfg.MaxWaitS) {
		return r
	}
	w.syncOrder()
	return w.order.heap[0]
}

// uncachedNow is what a waiting request would compute if admitted now: its
// prompt less what the cache holds of it (at least one token, as admit
// counts it), or all of it on a worker without a cache.
func (w *Worker) uncachedNow(r *Request) int {
	if w.tree == nil || len(r.Blocks) == 0 {
		return r.Input
	}
	return r.Input - min(int(w.promptMatch(r).Tokens), r.Input-1)
}

// promptMatch is the prefix cache's match of r's prompt, the one taken at
// r's last admission attempt while the cache is unchanged since, or, for a
// watched request, while no change touched its match's slots: a request
// waiting for room is tried at every step, and each try walked its whole
// prompt again (KVC v3's decoders on the BLIS spec: 8,742 of 13,814 tries).
func (w *Worker) promptMatch(r *Request) radix.Match {
	mm := &r.memo
	same := mm.tree == w.tree && mm.blocks == &r.Blocks[0] && int(mm.n) == len(r.Blocks) && int(mm.input) == r.Input
	if r.wait.track {
		w.syncOrder()
		if same && r.wait.fresh {
			return mm.m
		}
	} else if same && mm.ver == w.tree.Version() {
		return mm.m
	}
	return w.rematch(r)
}

// rematch matches r's prompt against the cache now.
func (w *Worker) rematch(r *Request) radix.Match {
	mm := &r.memo
	mm.tree, mm.ver, mm.blocks, mm.n, mm.input = w.tree, w.tree.Version(), &r.Blocks[0], int32(len(r.Blocks)), int32(r.Input)
	if last := w.lastBlockTokens(r.Input, len(r.Blocks)); r.wait.track {
		mm.m = w.matchInFamily(r, last) // orderfamily.go
	} else {
		mm.m = w.tree.Match(r.Blocks, last)
	}
	if r.wait.track {
		w.watchMatch(r)
	}
	return mm.m
}

// watchMatch files r's fresh match under the slots a change could move it
// at, and puts r in its new place in the order.
func (w *Worker) watchMatch(r *Request) {
	o := &w.order
	r.wait.gen++
	r.wait.fresh = true
	look, lookOK, up, upOK := w.tree.MatchSlots(r.Blocks, r.memo.m)
	if lookOK {
		o.fileWatch(look, watchRef{r: r, gen: r.wait.gen})
	}
	if upOK {
		o.fileWatch(up, watchRef{r: r, gen: r.wait.gen})
	}
	if o.refs > 4*o.live+4096 {
		o.compact()
	}
	unc := r.Input - min(int(r.memo.m.Tokens), r.Input-1)
	if unc != r.wait.unc {
		r.wait.unc = unc
		if r.wait.hidx > 0 {
			o.fix(int(r.wait.hidx) - 1)
		}
	}
}

// fileWatch adds ref to slot s's watch list. A slot with none takes an
// emptied list from spare: each waiting request filed a fresh one, an
// allocation a request on one-turn sessions (KVC v3's shortest-first
// decoders), and the lists are emptied as fast as they are filed.
func (o *waitOrder) fileWatch(slot radix.Slot, ref watchRef) {
	s := slotKey(slot)
	refs, ok := o.watch[s]
	if !ok && len(o.spare) > 0 {
		refs = o.spare[len(o.spare)-1]
		o.spare[len(o.spare)-1] = nil
		o.spare = o.spare[:len(o.spare)-1]
	}
	o.watch[s] = append(refs, ref)
	o.refs++
}

// slotKey is the watch index's key for a slot: a uint64 map key takes the
// runtime's fast path, where a struct key was hashed field by field (7 %
// of KVC v3's CPU on the BLIS spec). Two slots may share a key (the
// parent's index is mixed into the block id); a change at one then also
// matches the other's requests again, which finds the same matches: work,
// never a different result. Block ids are hashes, so that is rare.
func slotKey(s radix.Slot) uint64 {
	return s.First ^ uint64(uint32(s.Parent))*0x9e3779b97f4a7c15
}

// spareWatch keeps an emptied watch list for fileWatch, within bounds.
func (o *waitOrder) spareWatch(refs []watchRef) {
	if len(o.spare) >= maxSpareWatch || cap(refs) > maxSpareWatchCap {
		return
	}
	clear(refs)
	o.spare = append(o.spare, refs[:0])
}

// syncOrder reads the cache's journal and matches again the waiting
// requests whose slots it names.
func (w *Worker) syncOrder() {
	if w.order.watch == nil {
		return
	}
	o := &w.order
	for _, slot := range w.tree.TakeChanges() {
		s := slotKey(slot)
		refs, ok := o.watch[s]
		if !ok {
			continue
		}
		delete(o.watch, s)
		o.refs -= len(refs)
		o.work += uint64(len(refs))
		for _, ref := range refs {
			if r := ref.r; ref.gen == r.wait.gen && r.wait.fresh {
				r.wait.fresh = false
				o.dirty = append(o.dirty, r)
			}
		}
		o.spareWatch(refs)
	}
	for len(o.dirty) > 0 {
		r := o.dirty[len(o.dirty)-1]
		o.dirty[len(o.dirty)-1] = nil
		o.dirty = o.dirty[:len(o.dirty)-1]
		if r.wait.track && !r.wait.fresh {
			w.rematch(r)
		}
	}
}

// compact drops stale watch entries, so that the index follows the
// waiting queue, not every request that ever waited.
func (o *waitOrder) compact() {
	o.work += uint64(o.refs)
	o.refs = 0
	for s, refs := range o.watch {
		kept := refs[:0]
		for _, ref := range refs {
			if ref.gen == ref.r.wait.gen && ref.r.wait.fresh {
				kept = append(kept, ref)
			}
		}
		clear(refs[len(kept):])
		if len(kept) == 0 {
			delete(o.watch, s)
			o.spareWatch(kept)
			continue
		}
		o.watch[s] = kept
		o.refs += len(kept)
	}
}

// The shortest-first heap, by (unc, seq).

func (o *waitOrder) less(i, j int) bool {
	a, b := &o.heap[i].wait, &o.heap[j].wait
	if a.unc != b.unc {
		return a.unc < b.unc
	}
	return a.seq < b.seq
}

func (o *waitOrder) swap(i, j int) {
	h := o.heap
	h[i], h[j] = h[j], h[i]
	h[i].wait.hidx, h[j].wait.hidx = int32(i+1), int32(j+1)
}

func (o *waitOrder) push(r *Request) {
	o.work++
	o.heap = append(o.heap, r)
	r.wait.hidx = int32(len(o.heap))
	o.up(len(o.heap) - 1)
}

func (o *waitOrder) remove(r *Request) {
	o.work++
	i, n := int(r.wait.hidx)-1, len(o.heap)-1
	if i != n {
		o.swap(i, n)
	}
	o.heap[n] = nil
	o.heap = o.heap[:n]
	r.wait.hidx = 0
	if i != n {
		o.fix(i)
	}
}

func (o *waitOrder) fix(i int) {
	o.work++
	if !o.down(i) {
		o.up(i)
	}
}

func (o *waitOrder) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !o.less(i, p) {
			return
		}
		o.swap(i, p)
		i = p
	}
}

func (o *waitOrder) down(i int) bool {
	start, n := i, len(o.heap)
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && o.less(r, m) {
			m = r
		}
		if !o.less(m, i) {
			break
		}
		o.swap(i, m)
		i = m
	}
	return i > start
}

// queue is a FIFO of requests that reuses its storage. A request taken
// from the middle (shortest-first admission, the bypass, an abort) leaves a
// hole, so removal is O(1) and positions stay put while a caller walks the
// queue; holes are squeezed out as requests are pushed.
type queue struct {
	items []*Request
	head  int // first live item, or len(items)
	n     int // live items
}

func (q *queue) len() int       { return q.n }
func (q *queue) peek() *Request { return q.items[q.head] }

func (q *queue) push(r *Request) {
	if holes := len(q.items) - q.head - q.n; q.head > 64 && q.head*2 >= len(q.items) || holes > 64 && holes > q.n {
		q.squeeze()
	}
	r.wait.pos = int32(len(q.items))
	q.items = append(q.items, r)
	q.n++
}

func (q *queue) pop() *Request {
	r := q.items[q.head]
	q.remove(r)
	return r
}

// remove takes r out of the queue; false if it was not in it.
func (q *queue) remove(r *Request) bool {
	i := int(r.wait.pos)
	if i < q.head || i >= len(q.items) || q.items[i] != r {
		return false
	}
	q.items[i] = nil
	q.n--
	for q.head < len(q.items) && q.items[q.head] == nil {
		q.head++
	}
	return true
}

// squeeze moves the live items to the front, in order.
func (q *queue) squeeze() {
	k := 0
	for _, r := range q.items[q.head:] {
		if r != nil {
			r.wait.pos = int32(k)
			q.items[k] = r
			k++
		}
	}
	clear(q.items[k:])
	q.items = q.items[:k]
	q.head = 0
}
