package engine

import "fmt"

// The decode batch credited by a clock instead of a walk. A decode run of
// k steps gives every sequence in the batch k tokens (a run is planned to
// end at the batch's next finish, so none is owed fewer), and walking the
// batch to credit them was one cache miss per running sequence per run:
// with --mixed-chunk at 400 arrivals a second nearly every step is a
// one-token run, so the walk visited a sequence once per token it
// generated (the Stage check, the gap check and the context sum were 22 %
// of a 100K-request DP×8 run). Here the batch keeps a clock of the steps
// credited to it; a sequence's generated count, own tokens, promised
// tokens and last token time are brought up to date from the clock when
// something reads them (settle), and a run touches only the sequences
// that joined since the last one (their first gap is their own) and those
// that finish in it (a heap by the clock at which each finishes). The
// worker-wide sums the walk kept (own, reserved, the batch's context) move
// by k times a count.
//
// What each run does, in what order, is what the walk did: the joiners'
// first gaps are folded in batch order (the histogram's running mean
// depends on it), the finishers end in batch order (the batch is in the
// order sequences joined it, and the heap breaks ties by that order), and
// a finisher's gaps are widened, not folded, so their order against the
// joiners' folds does not matter. On only where no other per-step reader of
// the batch needs every sequence current (batchOn): vLLM's scheduler, the
// attention tile tail, sliding-window step costs and TPOT slicing keep the
// walk.

// batchClock is the decode batch's clock and what is kept from it.
type batchClock struct {
	on    bool
	clk   int64      // decode steps credited to the whole batch so far
	end   float64    // when the latest credited run ended
	seq   uint64     // sequences joined so far: the batch's order
	ctx   int64      // Σ over the batch of Input + generated − its clock mark
	nRes  int64      // sequences in the batch with promised tokens left
	fin   []finEntry // heap by (finishing clock, seq)
	fresh []*Request // joined since the last run, in batch order
	ends  []*Request // scratch: this run's finishers, in batch order
}

type finEntry struct {
	at  int64 // the clock at which the sequence has generated all it must
	seq uint64
	r   *Request
}

// batchOn reports whether the worker's batch can run on the clock.
func (w *Worker) batchOn() bool {
	return !w.vllm() && w.tm.AttnTiles == nil && w.cfg.SliceTPOTS <= 0 &&
		(w.tm.DecodePerWindowCtxTokenS == 0 || w.tm.SlidingWindow <= 0)
}

// joinBatch appends r to the decode batch.
func (w *Worker) joinBatch(r *Request) {
	w.decoding = append(w.decoding, r)
	b := &w.bat
	if !b.on {
		return
	}
	left := int64(max(r.Output, 1) - r.generated)
	if r.reservedOut != 0 && r.reservedOut < left {
		// Promised tokens that run out before the sequence ends would need
		// a count of their own per run: credit this worker by walks again.
		w.settleBatch()
		b.on = false
		return
	}
	r.bmark = b.clk + 1
	b.seq++
	b.ctx += int64(r.Input+r.generated) - b.clk
	if r.reservedOut > 0 {
		b.nRes++
	}
	b.pushFin(finEntry{at: b.clk + left, seq: b.seq, r: r})
	b.fresh = append(b.fresh, r)
}

// settle brings r's step state up to the batch's clock.
func (w *Worker) settle(r *Request) {
	if r.bmark == 0 {
		return
	}
	d := w.bat.clk + 1 - r.bmark
	if d == 0 {
		return
	}
	r.bmark += d
	r.generated += int(d)
	r.own += d
	r.reservedOut -= min(d, r.reservedOut)
	r.lastTokenAt = w.bat.end
}

// settleBatch settles every sequence in the batch.
func (w *Worker) settleBatch() {
	if !w.bat.on {
		return
	}
	for _, r := range w.decoding {
		w.settle(r)
	}
}

// leaveBatch settles r and takes it out of the clock's sums, its heap and
// the joiners (the caller takes it out of w.decoding).
func (w *Worker) leaveBatch(r *Request) {
	if r.bmark == 0 {
		return
	}
	w.unclock(r)
	b := &w.bat
	for i := range b.fin {
		if b.fin[i].r == r {
			b.removeFin(i)
			break
		}
	}
	b.fresh = removeReq(b.fresh, r)
}

// unclock settles r and takes it out of the clock's sums. A sequence
// counted in nRes keeps promised tokens until it finishes (joinBatch), so
// its count is read before the settle that may spend the last of them.
func (w *Worker) unclock(r *Request) {
	b := &w.bat
	if r.reservedOut > 0 {
		b.nRes--
	}
	w.settle(r)
	b.ctx -= int64(r.Input+r.generated) - (r.bmark - 1)
	r.bmark = 0
}

// batchShapeClock is batchShape from the clock's sum.
func (w *Worker) batchShapeClock() (int, int64) {
	n := len(w.decoding)
	return n, w.bat.ctx + int64(n)*w.bat.clk
}

// fewestLeft is the fewest tokens any sequence in the batch has left.
func (w *Worker) fewestLeft() int {
	return int(w.bat.fin[0].at - w.bat.clk)
}

// advanceClock completes a decode run of k steps that ended at end: what
// Advance's walk of the batch did.
func (w *Worker) advanceClock(end float64, k int) {
	b := &w.bat
	gaps := w.cfg.Gaps != nil
	var shared, first, prevEnd float64
	n := int64(len(w.decoding))
	if gaps {
		prevEnd = w.gapLog.end
		shared, first = w.beginGapRun()
		for _, r := range b.fresh {
			w.gapSeq(r, first, prevEnd)
		}
	}
	continued := n - int64(len(b.fresh))
	clear(b.fresh)
	b.fresh = b.fresh[:0]
	b.clk += int64(k)
	b.end = end
	w.own += int64(k) * n
	w.reserved -= int64(k) * b.nRes
	ends := b.ends[:0]
	for len(b.fin) > 0 && b.fin[0].at <= b.clk {
		ends = append(ends, b.fin[0].r)
		b.removeFin(0)
	}
	if len(ends) > 0 {
		// The batch is in join order, and so are the finishers: one pass
		// over the pointers finds them without reading a sequence, and the
		// stretches between them move down by copy (the stretch before the
		// first stays where it is).
		// Each finisher is looked for from the one before: one compare a
		// pointer passed (the pass was the run's largest own cost).
		d := w.decoding
		out, from := 0, 0
		for _, e := range ends {
			rest := d[from:]
			k := 0
			for k < len(rest) && rest[k] != e {
				k++
			}
			if k == len(rest) {
				panic(fmt.Sprintf("engine %s: a finishing sequence is not in the decode batch", w.cfg.Name))
			}
			if out != from {
				copy(d[out:], rest[:k])
			}
			out += k
			from += k + 1
		}
		if out != from {
			copy(d[out:], d[from:])
		}
		out += len(d) - from
		clear(d[out:])
		w.decoding = d[:out]
		for _, r := range ends {
			w.unclock(r)
			w.finish(end, r)
		}
		clear(ends)
	}
	b.ends = ends[:0]
	if gaps {
		w.endGapRun(shared, n, continued)
	}
}

// The finishing heap, by (at, seq): a total order (seq is never reused),
// so any heap shape hands the finishers out in the same order.

func (e *finEntry) before(o *finEntry) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

func (b *batchClock) pushFin(e finEntry) {
	b.fin = append(b.fin, e)
	b.upFin(len(b.fin)-1, e)
}

// upFin places e at hole j, moving later parents down.
func (b *batchClock) upFin(j int, e finEntry) {
	q := b.fin
	for j > 0 {
		p := (j - 1) / 2
		if !e.before(&q[p]) {
			break
		}
		q[j] = q[p]
		j = p
	}
	q[j] = e
}

// removeFin takes entry i out. The last entry refills the hole, and it is
// as a rule among the latest to finish (sequences join in time order), so
// the hole is first carried down to a leaf along the earlier children
// without comparing it, and the last entry then climbs back up as far as it
// must (Floyd's bottom-up deletion: one compare a level instead of two; the
// climb may pass i, which a removal from the middle needs).
func (b *batchClock) removeFin(i int) {
	q := b.fin
	n := len(q) - 1
	e := q[n]
	q[n] = finEntry{}
	q = q[:n]
	b.fin = q
	if i == n {
		return
	}
	j := i
	for {
		m := 2*j + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && q[r].before(&q[m]) {
			m = r
		}
		q[j] = q[m]
		j = m
	}
	b.upFin(j, e)
}
