package engine

// A Request's lifetime on a worker, for an owner that fills one Request
// for request after request (the simulator's recycled records,
// sim/recycle.go) instead of allocating each.
//
// A worker refers to a Request from Submit or Reserve until it is done
// with it: it finished (EvFinished, taken by the owner), it was released
// after its prefill (Release of a PrefillOnly request), or it was aborted
// and the step that was in progress at the abort has ended (that step's
// prefill chunks still name it: the step's end skips a chunk whose request
// left StagePrefill, reading its Stage). After that the worker keeps only
// stale records of it that it never reads again:
//
//   - its waiting order's watch entries (order.go), which name the
//     Request and the generation (waitState.gen) they were filed at and
//     are dropped, when a cache change or a compaction reaches them, as
//     soon as the generation moved on: Renew keeps the generation moving
//     across the Request's lives, so an entry of an earlier life is never
//     taken for the current one;
//   - scratch lists' spare room past their length (a queue's holes, the
//     step plan's, the batch's and the bypass's scratch), which are
//     written before they are read.
//
// Holds finds the records that are read; the simulator's poison mode
// checks it for every request it recycles.

// Renew fills r with n for another request: every field as n has it but
// the generation the worker's stale records of r's earlier lives are
// checked against, which moves on. An owner that reuses a Request fills
// it this way, never by assignment (an assignment would start the
// generation over, and a stale watch entry of an earlier life could match
// the new one's), and only once no worker holds it (Holds).
func (r *Request) Renew(n Request) {
	n.wait.gen = r.wait.gen + 1
	*r = n
}

// Holds names where w still refers to r in a record it reads ("" when
// none): a queue, the request being chunked, the decode or joining batch,
// the step in progress, the waiting order, the batch clock, the parked
// gaps or an event not yet taken. It walks them all, for tests and the
// simulator's poison mode, not for a hot path.
func (w *Worker) Holds(r *Request) string {
	if r == nil {
		return ""
	}
	has := func(list []*Request) bool {
		for _, x := range list {
			if x == r {
				return true
			}
		}
		return false
	}
	switch {
	case has(w.waiting.items[w.waiting.head:]):
		return "waiting queue"
	case has(w.prealloc.items[w.prealloc.head:]):
		return "reservation queue"
	case w.chunked == r:
		return "chunked prefill"
	case has(w.decoding):
		return "decode batch"
	case has(w.joining):
		return "joining batch"
	case has(w.bat.fresh):
		return "batch clock's joiners"
	case has(w.gapLog.parked):
		return "parked gaps"
	case has(w.order.heap), has(w.order.dirty):
		return "waiting order"
	}
	for _, c := range w.plan.chunks {
		if c.req == r {
			return "step in progress"
		}
	}
	for _, f := range w.bat.fin {
		if f.r == r {
			return "batch clock's finishers"
		}
	}
	if _, ok := w.order.famOf[r]; ok {
		return "waiting family"
	}
	for _, f := range w.order.fams {
		if f.owner == r {
			return "waiting family's anchor"
		}
	}
	for _, refs := range w.order.watch {
		for _, ref := range refs {
			if ref.r == r && ref.gen == r.wait.gen {
				return "waiting order's watch"
			}
		}
	}
	for i := range w.events {
		if w.events[i].Req == r {
			return "event not taken"
		}
	}
	return ""
}
