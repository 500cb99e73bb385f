package engine

// A request whose storage prefetch has not arrived waits in the queue,
// not in a prefill step. SGLang's scheduler skips such a request when it
// builds a prefill batch (get_new_batch_prefill: check_prefetch_progress
// false → continue) and admits the others behind it, so the GPU runs
// other work meanwhile; under wait_complete a request is skipped until all
// its pages have arrived, under timeout until then or its deadline
// (HiRadixCache.can_terminate_prefetch). The model parks such a request
// outside the waiting queue until that time (stPark), then puts it back at
// the queue's head (unpark), where, still waiting, it would have been
// found again first; its admission then waits for nothing. A worker with
// nothing else to do waits idle for the earliest one (parkTimer), and a
// decode run is cut at the step boundary after it, as an arrival cuts one
// (wake).

// stPark sets r aside until its prefetch is done at readyAt (admission's
// stPrefetch found it would wait): off the waiting queue, the seconds it
// waits counted as storage wait.
func (w *Worker) stPark(now float64, r *Request, readyAt float64) {
	w.dequeue(r)
	r.more().parkedUntil = readyAt
	w.parked = append(w.parked, r)
	w.stats.StorageWaitS += readyAt - now
}

// isParked reports whether r waits for its prefetch outside the queue.
func (r *Request) isParked() bool { return r.rare != nil && r.rare.parkedUntil > 0 }

// unpark puts the parked requests whose prefetch is done by now back at
// the head of the waiting queue, those parked first ahead.
func (w *Worker) unpark(now float64) {
	w.parkWait = false
	kept := w.parked[:0]
	var ready []*Request
	for _, r := range w.parked {
		if r.rare.parkedUntil <= now {
			ready = append(ready, r)
			continue
		}
		kept = append(kept, r)
	}
	clear(w.parked[len(kept):])
	w.parked = kept
	for i := len(ready) - 1; i >= 0; i-- {
		r := ready[i]
		r.rare.parkedUntil = 0
		w.requeueFront(r)
	}
}

// requeueFront puts r back in the waiting queue at its head (in the
// shortest-first order, where its place is its uncached count).
func (w *Worker) requeueFront(r *Request) {
	if !w.order.on {
		w.waiting.pushFront(r)
		return
	}
	w.enqueue(r)
	if !w.cfg.ShortestFirst {
		w.waiting.remove(r)
		w.waiting.pushFront(r)
	}
}

// unparkAborted forgets a parked request that was aborted.
func (w *Worker) unparkAborted(r *Request) {
	r.rare.parkedUntil = 0
	w.parked = removeReq(w.parked, r)
}

// parkTimer makes the worker look at its parked requests when the first
// one's prefetch is done: an idle worker waits for it (a step with no
// work that ends then: parkWait), a decode run is cut at the first step
// boundary at or after it. A prefill step runs to its end: the scheduler
// looks again only then.
func (w *Worker) parkTimer(now float64) {
	at := w.parked[0].rare.parkedUntil
	for _, r := range w.parked[1:] {
		at = min(at, r.rare.parkedUntil)
	}
	switch {
	case !w.busy:
		w.busy, w.parkWait = true, true
		w.plan.chunks, w.plan.decodeK = w.plan.chunks[:0], 0
		w.stepStart, w.stepEnd = at, at
	case w.plan.decodeK > 1 && len(w.plan.chunks) == 0 && at < w.stepEnd:
		if k := w.stepsWithin(at-w.stepStart) + 1; k < w.plan.decodeK {
			w.plan.decodeK = k
			w.stepEnd = w.stepStart + w.runTime(k)
		}
	}
}
