package engine

// vLLM V1's scheduler beside SGLang's (model.Server.Scheduler "vllm").
//
// vLLM V1 schedules one token budget per step (max_num_batched_tokens,
// here Config.ChunkTokens) shared by everything the step computes: the
// running requests first — each decoding request takes one token, a
// request part-way through its prefill the next chunk — and then waiting
// requests in arrival order, each taking what the budget has left, the
// last one chunked if it does not fit. Chunked prefill is always on and
// every step is one forward over decodes and prefill chunks together;
// max_num_seqs (Config.MaxRunning) caps the running requests. SGLang's
// default instead runs prefill steps with their own budget, the decode
// batch waiting (or riding along with --enable-mixed-chunk).
//
// Prefix caching is the worker's radix cache over the trace's blocks; a
// trace converted from a vLLM run uses vLLM's block size (16) and a prompt's
// partial last block is never shared, as vLLM caches full blocks only.
// Memory is vLLM's, not SGLang's: a request is admitted when its prompt
// (and its first token) fit, not its whole output; each step then needs
// one slot per decoding request, and when the pool (after evicting cached
// prefixes) cannot give them, the newest running request is preempted by
// recompute: its KV freed, it goes back to the front of the queue, and on
// readmission it computes its prompt (prefix cache hits included) and the
// tokens it had generated again before it decodes on. A step that preempts
// admits no waiting request (vLLM V1's scheduler: waiting requests are
// scheduled only when no running one was preempted). The pool is kept in
// tokens, not 16-token blocks: a request's partly filled last block (8
// tokens on average) is not charged.

// vllm reports whether this worker follows vLLM's scheduler.
func (w *Worker) vllm() bool {
	s := w.cfg.Profile.Server
	return s != nil && s.Scheduler == "vllm"
}

// stepBudget is the prefill tokens a step may carry: SGLang's chunk budget,
// or what vLLM's token budget leaves after one token per decoding request.
func (w *Worker) stepBudget() int {
	if !w.vllm() {
		return w.cfg.ChunkTokens
	}
	return max(w.cfg.ChunkTokens-len(w.decoding), 0)
}

// mixesDecode reports whether the decode batch runs inside prefill steps:
// always under vLLM, with --enable-mixed-chunk under SGLang.
func (w *Worker) mixesDecode() bool { return w.cfg.MixedChunk || w.vllm() }

// vllmRoom makes room for the step's decode tokens (one per decoding
// request that no reservation covers), evicting cached prefixes and then
// preempting the newest running requests by recompute until they fit. It
// reports whether the step must admit no waiting request: one was
// preempted and others still run.
func (w *Worker) vllmRoom(now float64) bool {
	preempted := false
	for {
		need := w.unreservedDecodes()
		if need == 0 || w.makeRoomFor(now, need, "") {
			break
		}
		v := w.newestRunning()
		if v == nil {
			break
		}
		w.preempt(now, v)
		preempted = true
	}
	return preempted && (len(w.decoding) > 0 || w.chunked != nil)
}

// unreservedDecodes is the decoding requests whose next token needs a free
// slot: under vLLM every Full one past its first token (a DecodeOnly
// request's output was reserved with its transfer).
func (w *Worker) unreservedDecodes() int64 {
	var n int64
	for _, r := range w.decoding {
		if r.reservedOut <= 0 {
			n++
		}
	}
	return n
}

// vllmAdmitNeed is the room a waiting request needs beyond its own under
// vLLM: this step's decode tokens, which vllmRoom made room for.
func (w *Worker) vllmAdmitNeed() int64 {
	if !w.vllm() {
		return 0
	}
	return w.unreservedDecodes()
}

// vllmRunSteps caps a decode run of k steps at what the free pool holds:
// vLLM allocates each step's slots as it goes (vllmRoom made room for one).
// A step that preempted (hold) runs alone: the waiting requests, the
// preempted one at their head, are tried again at the next step.
func (w *Worker) vllmRunSteps(k int, hold bool) int {
	if !w.vllm() {
		return k
	}
	if hold {
		return 1
	}
	if n := w.unreservedDecodes(); n > 0 {
		return min(k, max(int(w.free()/n), 1))
	}
	return k
}

// newestRunning is the Full request admitted last (vLLM's preemption
// victim, the tail of its running list): the chunked prefill or a decoding
// request, the later in the decode batch on a tie; nil if none.
func (w *Worker) newestRunning() *Request {
	var v *Request
	if r := w.chunked; r != nil && r.Kind == Full {
		v = r
	}
	for _, r := range w.decoding {
		if r.Kind == Full && (v == nil || r.AdmittedAt >= v.AdmittedAt) {
			v = r
		}
	}
	return v
}

// preempt takes r off the running requests by recompute: its KV goes back
// to the pool (a prompt it inserted stays in the prefix cache until
// evicted), and it waits at the queue's front to compute its prompt and
// the tokens it had generated again. Only a Full request on a colocated
// vLLM worker runs here.
func (w *Worker) preempt(now float64, r *Request) {
	if w.chunked == r {
		w.chunked = nil
	}
	w.decoding = removeReq(w.decoding, r)
	w.freeRequest(now, r)
	w.admitted--
	w.stats.Preemptions++
	w.parkGaps(r)
	r.recompute = r.generated
	r.prefilled, r.CachedTokens, r.matched, r.loaded, r.loadPending = 0, 0, 0, 0, false
	r.Stage = StageWaiting
	if w.order.on {
		w.enqueue(r) // the order keeps its own sequence: no front to go to
		return
	}
	w.waiting.pushFront(r)
}

// pushFront puts r at the queue's head (a preempted request goes first).
func (q *queue) pushFront(r *Request) {
	if q.head == 0 {
		q.items = append(q.items, nil)
		copy(q.items[1:], q.items)
		for i := 1; i < len(q.items); i++ {
			if x := q.items[i]; x != nil {
				x.wait.pos = int32(i)
			}
		}
		q.head = 1
	}
	q.head--
	q.items[q.head] = r
	r.wait.pos = int32(q.head)
	q.n++
}
