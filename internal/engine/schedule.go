package engine

import (
	"fmt"
	"math"
)

// wake makes the worker notice new work at time now: an idle worker plans a
// step at once; a worker in a multi-step decode run cuts the run at the end
// of the step in progress, so the new work is considered at that boundary.
func (w *Worker) wake(now float64) {
	if w.parkWait {
		w.busy, w.parkWait = false, false // an idle wait for a prefetch (storagepark.go)
	}
	if !w.busy {
		// Plan at the owner's next Advance, not now: requests that arrive
		// at this same instant then share the first step, as they would in
		// one pass of SGLang's scheduler loop.
		w.busy, w.stepStart, w.stepEnd = true, now, now
		return
	}
	if w.plan.decodeK <= 1 || len(w.plan.chunks) > 0 {
		return // a single step: the next plan comes at its end anyway
	}
	elapsed := now - w.stepStart
	if elapsed <= 0 {
		// The run was planned at this very instant, or has not started
		// behind a trim's stall: plan again with the new work in view
		// (the stall still holds the new plan back: stallUntil).
		w.busy = false
		w.planNext(now)
		if len(w.parked) > 0 {
			w.parkTimer(now)
		}
		return
	}
	j := w.stepsWithin(elapsed)
	k := j + 1
	if w.runTime(j) >= elapsed && j >= 1 {
		k = j // now is exactly a step boundary
	}
	if k < w.plan.decodeK {
		w.plan.decodeK = k
		w.stepEnd = w.stepStart + w.runTime(k)
	}
}

// runTime is the duration of the first k steps of the current decode run:
// every step reads batch more context tokens than the one before.
func (w *Worker) runTime(k int) float64 {
	fk := float64(k)
	return fk*w.plan.base + w.plan.slope*fk*(fk-1)/2
}

// stepsWithin is the number of whole steps of the current run that fit in
// elapsed seconds.
func (w *Worker) stepsWithin(elapsed float64) int {
	j := w.plan.guessSteps(elapsed)
	for j > 0 && w.runTime(j) > elapsed {
		j--
	}
	for j < w.plan.decodeK && w.runTime(j+1) <= elapsed {
		j++
	}
	return min(j, w.plan.decodeK)
}

// guessSteps solves base·k + slope·k(k−1)/2 = elapsed for k in closed
// form. stepsWithin only nudges it by a step or two for rounding, so its
// cost stays O(1) however long the run: a wrong guess would still give the
// right count, one step of correction at a time, which is why its accuracy
// is tested on its own (TestGuessStepsExact).
func (p *stepPlan) guessSteps(elapsed float64) int {
	a := p.slope / 2
	b := p.base - a
	if a <= 0 {
		return int(elapsed / p.base)
	}
	return int((-b + math.Sqrt(b*b+4*a*elapsed)) / (2 * a))
}

// Advance completes the step (or decode run) that ends at now and plans the
// next one. The owner calls it when now reaches NextTime.
func (w *Worker) Advance(now float64) {
	if !w.busy {
		return
	}
	if now < w.stepEnd-1e-9 {
		panic(fmt.Sprintf("engine %s: Advance(%v) before step end %v", w.cfg.Name, now, w.stepEnd))
	}
	end := w.stepEnd
	w.stats.BusyS += end - w.stepStart
	w.busy, w.parkWait = false, false
	p := &w.plan
	if k := p.decodeK; k > 0 && w.bat.on {
		w.stats.DecodeSteps += int64(k)
		w.advanceClock(end, k)
	} else if k > 0 {
		w.stats.DecodeSteps += int64(k)
		// The gaps are taken in the same walk of the batch (itl.go), which
		// touches each sequence's step state once.
		gaps := w.cfg.Gaps != nil
		var shared, first, prevEnd float64
		var n, continued int64
		if gaps {
			prevEnd = w.gapLog.end
			shared, first = w.beginGapRun()
		}
		kept := w.decoding[:0]
		for _, r := range w.decoding {
			if r.Stage != StageDecoding {
				continue
			}
			if gaps {
				n++
				if w.gapSeq(r, first, prevEnd) {
					continued++
				}
			}
			w.generate(r, k)
			r.lastTokenAt = end
			if r.generated >= max(r.Output, 1) {
				w.finish(end, r)
				continue
			}
			kept = append(kept, r)
		}
		clear(w.decoding[len(kept):])
		w.decoding = kept
		if gaps {
			w.endGapRun(shared, n, continued)
		}
	}
	if len(p.chunks) > 0 {
		if w.host != nil {
			w.hiLoaded(end)
		}
		w.stats.PrefillSteps++
		for _, c := range p.chunks {
			if c.req.Stage != StagePrefill {
				continue
			}
			c.req.prefilled += c.n
			w.stats.PrefillTokens += int64(c.n)
			if c.req.prefilled >= c.req.Uncached() {
				if w.chunked == c.req {
					w.chunked = nil
				}
				w.prefillDone(end, c.req)
			} else if c.req.Kind == PrefillOnly {
				w.events = append(w.events, Event{Kind: EvChunkDone, Req: c.req, Time: end,
					Tokens: c.req.CachedTokens + c.req.prefilled})
			}
			if c.req.swaHold > 0 { // still holding: its next chunk, or its window alone
				w.swaTake(end, c.req)
			}
		}
	}
	p.chunks = p.chunks[:0]
	p.decodeK = 0
	w.windowAdvance(end)
	w.grantReservations(end)
	w.planNext(end)
	if len(w.parked) > 0 {
		w.parkTimer(end)
	}
}

// generate credits k new tokens to r; each takes one KV slot.
func (w *Worker) generate(r *Request, k int) {
	left := max(r.Output, 1) - r.generated
	k = min(k, left)
	r.generated += k
	r.own += int64(k)
	w.own += int64(k)
	// What was promised covers them; under vLLM only the first token was
	// (the rest take free slots that vllmRoom found).
	res := min(int64(k), r.reservedOut)
	r.reservedOut -= res
	w.reserved -= res
}

// prefillDone moves r's prompt into the prefix cache (if any) and on to its
// next stage.
func (w *Worker) prefillDone(now float64, r *Request) {
	r.PrefillEndAt = now
	if full := r.Input / w.cfg.BlockSize; full > 0 && full <= len(r.Blocks) {
		r.lastWhole = r.Blocks[full-1] // for its output tail (output.go)
	}
	if w.tree != nil && len(r.Blocks) > 0 {
		last := w.lastBlockTokens(r.Input, len(r.Blocks))
		from := 0
		if r.locked {
			from = r.matched
		}
		node, _ := w.insertPrompt(r, r.node, r.Blocks, from, last, now)
		// The tree now holds the prompt (adopted, or present already): the
		// request's own copy of it (what it computed and what it loaded
		// from host) is released.
		uncached := int64(r.Uncached() - r.recompute + r.loaded)
		r.own -= uncached
		w.own -= uncached
		r.node, r.locked = node, true
	}
	switch r.Kind {
	case PrefillOnly:
		r.Stage = StageHeld
		w.admitted-- // no longer running; the KV stays held until Release
		w.events = append(w.events, Event{Kind: EvPrefillDone, Req: r, Time: now, Tokens: r.Input})
	default:
		// Colocated: the prefill step produced the first token (or, after
		// a preemption by recompute, the next one).
		w.generate(r, 1)
		r.lastTokenAt = now
		if r.recompute == 0 {
			r.FirstTokenAt = now
			w.events = append(w.events, Event{Kind: EvFirstToken, Req: r, Time: now})
		}
		r.recompute = 0
		if r.generated >= max(r.Output, 1) {
			w.finish(now, r)
			return
		}
		r.Stage, r.DecodeStartAt = StageDecoding, now
		w.joinBatch(r)
	}
}

func (w *Worker) finish(now float64, r *Request) {
	w.completeGaps(r)
	w.keepOutput(now, r)
	w.sessionEnd(now, r)
	w.freeRequest(now, r)
	w.admitted--
	r.Stage, r.FinishedAt = StageDone, now
	w.events = append(w.events, Event{Kind: EvFinished, Req: r, Time: now})
}

// planNext decides the next step at time now: prefill has priority (SGLang's
// default scheduler), else a decode run up to the next finish.
func (w *Worker) planNext(now float64) {
	w.join(now)
	if len(w.parked) > 0 {
		w.unpark(now)
	}

	p := &w.plan
	p.chunks = p.chunks[:0]
	p.decodeK = 0
	hold := w.vllm() && w.vllmRoom(now) // vllm.go: room for the decodes, or preemption
	if k, ok := w.slicePlan(now); ok {
		w.planDecodeRun(now, k, hold)
		return
	}
	budget := w.stepBudget()    // vllm.go
	open := false               // a request's prefill continues past this step
	ahead := w.bypassAhead(now) // pbypass.go: the short class's step before the next chunk
	if r := w.chunked; r != nil && !ahead {
		n := w.sliceChunk(min(r.Uncached()-r.prefilled, budget), r.CachedTokens+r.prefilled)
		p.chunks = append(p.chunks, chunk{req: r, n: n, p: r.CachedTokens + r.prefilled})
		budget -= n
		open = r.prefilled+n < r.Uncached()
	}
	w.blocked = false
	for budget > 0 && !open && !ahead && !hold && w.waiting.len() > 0 {
		if w.admitted >= w.cfg.MaxRunning {
			w.blocked = true
			break
		}
		r := w.nextWaiting(now)
		w.schedWork++
		if !w.admit(now, r) {
			if r.isParked() {
				continue // its prefetch is not done: the next one (storagepark.go)
			}
			w.blocked = true
			w.countKVWait(r)
			break
		}
		w.dequeue(r)
		n := w.sliceChunk(min(r.Uncached(), budget), r.CachedTokens)
		p.chunks = append(p.chunks, chunk{req: r, n: n, p: r.CachedTokens})
		budget -= n
		if n < r.Uncached() {
			w.chunked, open = r, true
		}
	}

	if open && w.bypassRoom() > 0 {
		w.bypass(now)
	}

	var dur float64
	defer func() {
		if w.busy && w.stepStart < w.stallUntil {
			// A trim ran on the scheduler loop: no step starts before it
			// is over (F6).
			d := w.stallUntil - w.stepStart
			w.stepStart += d
			w.stepEnd += d
		}
	}()
	switch {
	case len(p.chunks) > 0:
		dur = w.tm.PrefillStepS() // eager where the engine runs prefill and mixed steps without CUDA graphs
		for _, c := range p.chunks {
			dur += w.tm.PrefillWorkS(c.n, c.p)
		}
		if w.mixesDecode() && len(w.decoding) > 0 {
			b, ctx := w.batchShape()
			p.decodeK, p.batch, p.ctx = 1, b, ctx
			dur += w.mixedDecodeS(b, ctx)
		}
		if w.host != nil {
			dur = w.hiStepS(dur)
		}
		if p.decodeK > 0 {
			p.base, p.slope = dur, 0
		}
	case len(w.decoding) > 0:
		dur = w.decodeRun(math.MaxInt, hold)
	default:
		return // idle
	}
	w.busy = true
	w.stepStart = now
	w.stepEnd = now + dur
}

// decodeRun plans a decode run of at most limit steps, up to the next
// finish, and reports its duration.
func (w *Worker) decodeRun(limit int, hold bool) float64 {
	p := &w.plan
	b, ctx := w.batchShape()
	k := limit
	if w.bat.on {
		k = min(k, w.fewestLeft())
	} else {
		for _, r := range w.decoding {
			k = min(k, max(r.Output, 1)-r.generated)
		}
	}
	p.decodeK, p.batch, p.ctx = w.vllmRunSteps(max(k, 1), hold), b, ctx
	wb, ws := w.windowS()
	p.base = w.tm.DecodeStepS(w.mdl, b, ctx) + w.attnTailS() + wb
	p.slope = w.tm.CtxSlope(b)*float64(b) + ws
	return w.runTime(p.decodeK)
}

// planDecodeRun starts a decode run of at most k steps now (slice.go),
// after any trim's stall, as planNext's decode case does.
func (w *Worker) planDecodeRun(now float64, k int, hold bool) {
	dur := w.decodeRun(k, hold)
	w.busy = true
	w.stepStart = now
	w.stepEnd = now + dur
	if w.stepStart < w.stallUntil {
		d := w.stallUntil - w.stepStart
		w.stepStart += d
		w.stepEnd += d
	}
}

// join moves requests whose KV has arrived into the decode batch at this
// step boundary. The first token came from the prefill worker with the KV:
// it is emitted now, with no forward on this worker.
func (w *Worker) join(now float64) {
	finished := false
	for _, r := range w.joining {
		if r.Stage != StageDecoding {
			continue
		}
		w.adoptPrompt(now, r)
		w.generate(r, 1)
		r.FirstTokenAt, r.lastTokenAt = now, now
		w.events = append(w.events, Event{Kind: EvFirstToken, Req: r, Time: now})
		if r.generated >= max(r.Output, 1) {
			w.finish(now, r)
			finished = true
			continue
		}
		w.joinBatch(r)
	}
	clear(w.joining)
	w.joining = w.joining[:0]
	if finished {
		w.grantReservations(now) // a one-token request freed its slot and KV
	}
}

// mixedDecodeS is what a decode batch adds to a prefill step it rides in.
// The step is one forward: the prefill overhead already reads every
// expert's weights (a chunk of even a few dozen tokens routes to nearly all
// 128), so the batch adds its per-sequence and context terms, not a second
// expert read.
func (w *Worker) mixedDecodeS(batch int, ctx int64) float64 {
	wb, _ := w.windowS()
	return w.tm.DecodePerSeqS*float64(batch) + w.tm.CtxSlope(batch)*float64(ctx) + w.attnTailS() + wb
}

func (w *Worker) batchShape() (int, int64) {
	if w.bat.on {
		return w.batchShapeClock()
	}
	var ctx int64
	for _, r := range w.decoding {
		ctx += int64(r.Input + r.generated)
	}
	return len(w.decoding), ctx
}

// admit tries to take r off the queue: lock its cached prefix and make room
// for the rest of its prompt and its output.
func (w *Worker) admit(now float64, r *Request) bool {
	cached := 0
	if w.tree != nil && len(r.Blocks) > 0 {
		m := w.tree.LockMatched(r.Blocks, w.promptMatch(r), now)
		r.node, r.locked = m.Node, true
		r.matched = m.Blocks
		// At least one token is always computed: its logits start decoding.
		cached = min(int(m.Tokens), r.Input+r.recompute-1)
		w.hiReused(now, r, m.Blocks)
	}
	cached = max(cached, 0)
	// What the host tier holds past HBM's match is loaded back (hicache.go):
	// cached for the prefill, but it takes room in the pool like computed KV.
	r.loaded = w.hiMatch(now, r, cached)
	if r.isParked() {
		w.unadmit(now, r) // it waits for its prefetch (storagepark.go)
		return false
	}
	r.CachedTokens = cached + r.loaded
	out := int64(w.outputOf(r))
	if w.vllm() {
		out = min(out, 1) // vLLM allocates output slots as it decodes
	}
	need := int64(r.Uncached()+r.loaded) + out - w.windowAdmitCredit(r)
	if !w.swaFits(r) {
		w.unadmit(now, r)
		return false
	}
	unpinned := w.unpinFor(now, r)
	if !w.makeRoomFor(now, need+w.vllmAdmitNeed(), r.Session) {
		w.repin(now, unpinned) // it waits: its session stays as it was
		if r.locked {
			w.tree.Unlock(r.node, now)
			r.locked = false
		}
		w.hiUnlock(now, r)
		r.CachedTokens, r.matched, r.loaded = 0, 0, 0
		return false
	}
	w.admitted++
	r.own = int64(r.Uncached() + r.loaded)
	w.own += r.own
	r.reservedOut = out
	w.reserved += out
	r.Stage, r.AdmittedAt = StagePrefill, now
	if w.windowFrees() {
		w.windowSet(now, r)
	}
	w.swaTake(now, r)
	r.loadPending = r.loaded > 0
	w.stats.CachedTokens += int64(cached)
	return true
}

// bypass adds to a step that continues a long chunked prefill the waiting
// requests whose uncached prompt fits in SessionConfig.BypassTokens, in
// their admission order (arrival order, or with ShortestFirst fewest
// uncached tokens first): a session-aware decoder's direct append of a few
// hundred tokens then rides past a 40K-token local seed instead of waiting
// its seconds out (SGLang's order, where the chunked request holds every
// step's budget until it is done). Such a step computes at most the chunk
// budget plus BypassTokens.
func (w *Worker) bypass(now float64) {
	if w.tree == nil {
		return
	}
	if w.cfg.ShortestFirst {
		w.bypassShortest(now)
		return
	}
	room := w.bypassRoom()
	q := &w.waiting
	for i := q.head; i < len(q.items) && room > 0; i++ {
		w.schedWork++
		if w.admitted >= w.cfg.MaxRunning {
			return
		}
		r := q.items[i]
		if r == nil || len(r.Blocks) == 0 {
			continue
		}
		if w.uncachedNow(r) > room || !w.admit(now, r) {
			continue
		}
		w.take(r)
		room -= r.Uncached()
	}
}

// bypassShortest is bypass in shortest-first order: the heap's requests
// while they fit, those that cannot be admitted set aside and put back.
func (w *Worker) bypassShortest(now float64) { w.bypassHeap(now, false) }

// bypassHeap takes the shortest-first heap's requests into the step while
// they fit the bypass's room, setting aside (and putting back) those that
// cannot be admitted, and with fullOnly those that are not Full (a prefill
// worker's hosted turns, pbypass.go).
func (w *Worker) bypassHeap(now float64, fullOnly bool) {
	room := w.bypassRoom()
	o := &w.order
	aside := w.aside[:0]
	for room > 0 && w.admitted < w.cfg.MaxRunning {
		w.syncOrder()
		if len(o.heap) == 0 || o.heap[0].wait.unc > room {
			break
		}
		r := o.heap[0]
		o.remove(r)
		w.schedWork++
		if (fullOnly && r.Kind != Full) || len(r.Blocks) == 0 || !w.admit(now, r) {
			if !r.isParked() {
				aside = append(aside, r)
			}
			continue
		}
		w.take(r)
		room -= r.Uncached()
	}
	w.restoreAside(aside)
}

// restoreAside puts the requests a bypass passed over back in the
// shortest-first order, once the order has caught up with the cache, and
// keeps the emptied slice for the next bypass.
func (w *Worker) restoreAside(aside []*Request) {
	w.syncOrder()
	for _, r := range aside {
		w.order.push(r)
	}
	clear(aside)
	w.aside = aside[:0]
}

// take moves r, just admitted by the bypass, from the queue into the step.
func (w *Worker) take(r *Request) {
	w.dequeue(r)
	w.plan.chunks = append(w.plan.chunks, chunk{req: r, n: r.Uncached(), p: r.CachedTokens})
}
