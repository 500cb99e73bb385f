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
// Memory keeps this engine's policy (a request is admitted when its prompt
// and whole output fit): vLLM allocates output blocks as it goes and
// preempts the newest request by recompute when they run out, which only
// differs when the pool, not max_num_seqs, binds (docs/fidelity.md).

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
