"""CPython's collector in an engine-like loop holding N requests.

Each held request carries what a vLLM V1 Request holds that the collector
walks (vllm/v1/request.py: prompt_token_ids, _all_token_ids, _output_token_ids
lists, block_hashes, sampling params, event lists, a dict of attributes);
each step makes 128 requests' outputs and the step's own containers and drops
them; every 8th step one running request finishes and one arrives, so the
held count stays N. Prints the mean wall time a step takes, the collections of
each generation (gc.get_stats) and the oldest generation's share of the step
(gc.callbacks), per N.

    python3 calibration/gcheld.py STEPS CYCLES [cyclic]

CYCLES objects in reference cycles are dropped every step (0: none, as in a
loop whose objects all die by reference count; 20 forces collections).
"cyclic" puts each request in a reference cycle, as vLLM's Request was before
its fix for vllm-project/vllm issue 31200 (partial(block_hasher, self)).
docs/fidelity.md ("What the drift is not") holds the figures.
"""
import gc, sys, time, collections, random, functools

class SamplingParams:
    def __init__(self):
        self.max_tokens = 1448; self.temperature = 1.0; self.stop = []; self.stop_token_ids = []
        self.logit_bias = None; self.extra_args = {}; self.ignore_eos = True

class Request:
    def __init__(self, rid):
        self.request_id = f"cmpl-{rid:032x}"
        self.prompt_token_ids = [random.randrange(32000) for _ in range(1034)]
        self._all_token_ids = list(self.prompt_token_ids)
        self._output_token_ids = []
        self.block_hashes = [random.randbytes(32) for _ in range(65)]
        self.sampling_params = SamplingParams()
        self.events = []; self.spec_token_ids = []; self.mm_features = []
        self.status = 0; self.num_computed_tokens = 0; self.arrival_time = time.time()
        self.kv_transfer_params = None; self.trace_headers = {}
        if CYCLIC_REQUESTS:
            # vLLM before its fix for issue 31200: Request held
            # partial(block_hasher, self), a reference cycle, so a finished
            # request is freed only by the collector.
            self.get_hash_new_full_blocks = functools.partial(len, self)

class Output:
    __slots__ = ("request_id", "new_token_ids", "finish_reason", "events")
    def __init__(self, r, t):
        self.request_id = r.request_id; self.new_token_ids = [t]; self.finish_reason = None; self.events = None

CYCLES = 0
CYCLIC_REQUESTS = False

def run(held, steps):
    random.seed(1)
    rid = 0
    running = []
    waiting = collections.deque()
    for _ in range(held):
        r = Request(rid); rid += 1
        (running if len(running) < 128 else waiting).append(r)
    gc.collect()
    spent = [0.0, 0]
    t0 = [0.0]
    def cb(phase, info):
        if info["generation"] != 2: return
        if phase == "start": t0[0] = time.perf_counter()
        else: spent[0] += time.perf_counter() - t0[0]; spent[1] += 1
    gc.callbacks.append(cb)
    before = [g["collections"] for g in gc.get_stats()]
    start = time.perf_counter()
    for s in range(steps):
        sched = {r.request_id: 1 for r in running}
        outs = []
        for r in running:
            t = random.randrange(32000)
            r._output_token_ids.append(t); r._all_token_ids.append(t)
            outs.append(Output(r, t))
        msg = tuple((o.request_id, o.new_token_ids) for o in outs)
        for _ in range(CYCLES):  # garbage in reference cycles, which only the collector frees
            c = {}; c["self"] = c
        del sched, outs, msg
        if s % 8 == 0:
            done = running.pop(0)
            if waiting:
                running.append(waiting.popleft())
            nr = Request(rid); rid += 1
            (waiting if len(running) >= 128 else running).append(nr)
            del done
    wall = time.perf_counter() - start
    gc.callbacks.remove(cb)
    after = [g["collections"] for g in gc.get_stats()]
    return wall / steps, spent[0] / steps, spent[1], [a - b for a, b in zip(after, before)]

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    globals()["CYCLES"] = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    globals()["CYCLIC_REQUESTS"] = len(sys.argv) > 3 and sys.argv[3] == "cyclic"
    print(sys.version.split()[0], "gc thresholds", gc.get_threshold())
    for held in (150, 500, 1000, 2000):
        step, gc2, n, per = run(held, steps)
        print(f"held {held:5d}: step {step*1e6:7.1f} us, collections by generation {per}, gen-2 time {gc2*1e6:6.1f} us a step")
