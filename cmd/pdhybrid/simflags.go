package main

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// simFlags are the knobs sim and bench share.
type simFlags struct {
	trace       string
	workload    string
	changedSeed bool
	blockSize   int
	synthReqs   int64
	synthSess   int
	synthRate   float64
	model       string
	hardware    string
	profile     string
	mc          modelConfigFlags // modelconfig.go
	link        string
	memPrefill  float64
	memDecode   float64
	memColo     float64
	chunk       int
	maxRunning  int
	maxBacklog  int
	mixed       bool
	timeScale   float64
	concurrency int
	timeout     float64
	idleForget  float64
	maxInput    int
	ignoreThink bool
	outputReuse string
	alpha       float64
	floorK      float64
	goodput     string
	sloTTFT     float64 // deprecated: --goodput ttft:MS
	sloTPOT     float64
	sloE2E      float64
	sample      float64
	seed        uint64
	force       bool
	kvc         kvcFlags
	transport   transportFlags
	peer        peerFlags
	hicache     hicacheFlags
}

// defaultGoodput is the SLO goodput counts against unless --goodput says
// otherwise.
const defaultGoodput = "ttft:2000,tpot:100"

// Ranges of the shared numeric flags (sim and bench --help quote them).
var (
	timeScaleRange  = between(0.001, 1000).is("a factor")
	memRange        = above(0).upTo(1).orZero("the profile's mem_fraction").is("a fraction")
	sampleRange     = between(0.001, 1e6).is("a number of seconds")
	maxWorkerSample = 250000 // lines of structural/workers.jsonl
)

func (f *simFlags) register(fs *pflag.FlagSet) {
	f.registerWorkload(fs)
	f.registerProfile(fs)
	fs.StringVar(&f.link, "link", "rdma-400g", "naive PD, KVC and the peers: the link `name` from the profile P→D transfers (and KVC's D→P snapshots) cross (rdma-400g, tcp-loopback, nvlink)")
	fs.Float64Var(&f.memPrefill, "mem-fraction-prefill", 0, "naive PD, KVC and the peers: HBM `fraction` prefill workers use for weights+KV, in (0, 1]; 0 = the profile's")
	fs.Float64Var(&f.memDecode, "mem-fraction-decode", 0, "naive PD, KVC and the peers: HBM `fraction` decode workers use for weights+KV, in (0, 1]; 0 = the profile's")
	fs.Float64Var(&f.memColo, "mem-fraction-colo", 0, "data-parallel: HBM `fraction` colocated workers use for weights+KV, in (0, 1]; 0 = the profile's")
	fs.IntVar(&f.chunk, "chunk-tokens", 0, "chunked-prefill budget per scheduler step, in `tokens`; 0 = the profile's (SGLang's default: 8192)")
	fs.IntVar(&f.maxBacklog, "max-backlog", sim.DefaultMaxBacklog, "stop the run, marked incomplete, when this many `requests` are in flight or waiting at once (an overloaded cluster; about 14 KB of memory each); warnings on stderr from a tenth of it; 0 = no limit")
	fs.IntVar(&f.maxRunning, "max-running", 0, "max running `requests` per worker, the decode batch included; 0 = the profile's (SGLang's default for the model and GPU: 2048 on the H200, 128 where a profile states none)")
	fs.BoolVar(&f.mixed, "mixed-chunk", false, "run the decode batch inside prefill steps (SGLang --enable-mixed-chunk)")
	f.hicache.register(fs, "every mechanism")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "divide trace time (and think time) by this `factor`, in [0.001, 1000]; 2 replays twice as fast")
	fs.IntVar(&f.concurrency, "concurrency", 0, "max `requests` in flight from the client; 0 = unlimited")
	fs.Float64Var(&f.timeout, "timeout", 0, "per-request timeout in `seconds` from sending; 0 = none")
	fs.Float64Var(&f.idleForget, "session-idle-forget", 0, "forget a session idle (nothing of it in flight or waiting) for longer than this many simulated `seconds`, in the replay, trace checker, control plane and decoders, so memory follows the live sessions (a trace never says a session ended); a later turn of a forgotten session stops the run; 0 = never (default)")
	fs.IntVar(&f.maxInput, "max-input-len", 0, "context length in `tokens`: a prompt this long or longer, or whose prompt plus output exceeds it, fails as SGLang refuses it; 0 = the model's max context (262144)")
	fs.BoolVar(&f.ignoreThink, "ignore-think-time", false, "release a turn when its parent ends, ignoring the trace's think time")
	fs.StringVar(&f.outputReuse, "output-reuse", "all", "whose output KV serves the next turn's prompt: `all` (every worker's prefix cache, as in live serving) or sessions (only a KVC decoder's kept session: the seed's trace replays, where the model's generated tokens never matched the trace's next prompt)")
	fs.Float64Var(&f.alpha, "alpha", 1, "kv-aware policy only: weight of stickiness, in `blocks` of prefix overlap (> 0)")
	fs.Float64Var(&f.floorK, "floor-k", 0, "kv-aware policy only: load-floor bonus in `blocks` for under-assigned workers; 0 = off")
	fs.StringVar(&f.goodput, "goodput", defaultGoodput, "goodput `SLOs` in milliseconds, as vLLM bench serve takes them: --goodput ttft:300 tpot:50 (keys ttft, tpot, e2el; a request is good when it completed within every bound); none = every completed request is good")
	fs.Float64Var(&f.sloTTFT, "slo-ttft", 0, "deprecated: goodput TTFT bound in `seconds`; use --goodput ttft:MS")
	fs.Float64Var(&f.sloTPOT, "slo-tpot", 0, "deprecated: goodput TPOT bound in `seconds`; use --goodput tpot:MS")
	fs.Float64Var(&f.sloE2E, "slo-e2el", 0, "deprecated: goodput end-to-end bound in `seconds`; use --goodput e2el:MS")
	for _, n := range []string{"slo-ttft", "slo-tpot", "slo-e2el"} {
		fs.MarkDeprecated(n, "use --goodput (milliseconds), e.g. --goodput ttft:2000 tpot:100")
	}
	fs.Float64Var(&f.sample, "sample-interval", 1, fmt.Sprintf("worker KV occupancy sample period in simulated `seconds`; structural/workers.jsonl keeps at most %d samples (about 40 MB), so a longer run keeps every 2nd, 4th, ... sample (the period doubles; stderr says so)", maxWorkerSample))
	fs.Uint64Var(&f.seed, "seed", synth.DefaultAgentic().Seed, "random `seed` of the built-in workload; only without --trace (the simulator itself is deterministic)")
	f.kvc.register(fs)
	f.peer.register(fs)
	f.transport.register(fs)
	fs.BoolVar(&f.force, "force", false, "with --out: replace the run already in that folder (only files pdhybrid writes are removed)")
}

// registerWorkload adds the flags that choose the workload: a trace file
// or a built-in workload and its size (--seed is registered with the rest).
func (f *simFlags) registerWorkload(fs *pflag.FlagSet) {
	fs.StringVar(&f.trace, "trace", "", "canonical trace `file` to replay; - reads standard input (default: the built-in synthetic agentic workload)")
	fs.StringVar(&f.workload, "workload", "agentic", "built-in `workload` when no --trace is given: agentic (Claude-Code-like sessions fitted to the WEKA set), groups (BLIS's agentic spec), seed-swe or seed-inferact (shaped like the seed's two workloads; docs/workloads.md)")
	fs.IntVar(&f.blockSize, "block-size", 0, "with --trace: `tokens` per hash id for a file without a header line; 0 = take it from the header")
	fs.Int64Var(&f.synthReqs, "synth-requests", 0, "built-in workload: stop after this many `requests`; 0 = no request limit (the session count ends the workload)")
	fs.IntVar(&f.synthSess, "synth-sessions", 0, "built-in workload: number of `sessions`; 0 = 40, or unbounded when --synth-requests is given")
	fs.Float64Var(&f.synthRate, "synth-rate", 0, "built-in workload: session arrival rate in `sessions/s`; 0 = 0.1")
}

// registerProfile adds the flags that choose the model and hardware.
func (f *simFlags) registerProfile(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "qwen3-30b-a3b", "built-in model `name`")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "built-in hardware `name` (h100-80g, h200-141g)")
	fs.StringVar(&f.profile, "profile", "", "model/hardware profile JSON `file`, replacing --model/--hardware (see docs/engine.md; --dump-profile writes one to start from)")
	f.mc.register(fs)
}

// runModes says which mechanisms and policies a command will run, so flags
// that do not apply to any of them are rejected.
type runModes struct {
	pd, colo bool // naive PD runs; data-parallel runs
	kvc      bool // kvcache-centric runs (P and D workers too)
	kvAware  bool // some run uses the kv-aware policy
	// peer: a peer baseline runs (P and D workers); conditional and
	// decider: pd-conditional, pd-prefix-decider runs.
	peer, conditional, decider bool
	// rival, ppd: a 2026 rival runs (pd-ppd or pd-deflect); pd-ppd runs.
	rival, ppd bool
}

// pdWorkers says whether some run has prefill and decode workers.
func (m runModes) pdWorkers() bool { return m.pd || m.kvc || m.peer }

// checkWorkload validates the flags registerWorkload adds, and --seed.
func (f *simFlags) checkWorkload(ck *checks) {
	ck.num("block-size", atLeast(1).upTo(1<<20).orZero("the trace header's").is("a number of tokens"))
	ck.num("synth-requests", atLeast(1).upTo(1e9).orZero("no request limit"))
	ck.num("synth-sessions", atLeast(1).upTo(1e7).orZero("the default"))
	ck.num("synth-rate", above(0).upTo(1000).orZero("the default, 0.1").is("a rate in sessions/s"))
	file := f.trace != ""
	ck.only("block-size", file, "with --trace (the built-in workload has its own)")
	for _, n := range []string{"synth-requests", "synth-sessions", "synth-rate", "seed", "workload"} {
		ck.only(n, !file, "to the built-in workload, not with --trace")
	}
	ck.oneOf("workload", "agentic", "groups", "seed-swe", "seed-inferact")
	for _, n := range []string{"synth-requests", "synth-sessions", "synth-rate"} {
		ck.only(n, f.workload == "agentic", "to --workload agentic (the presets have fixed sizes)")
	}
	f.changedSeed = ck.set("seed")
}

// check validates the shared flags before any work: ranges, the flags that
// apply only to some modes, and the profile-dependent limits (memory
// fractions against the weights, prompt length against the context).
func (f *simFlags) check(ck *checks, m runModes) {
	f.checkWorkload(ck)
	ck.num("mem-fraction-prefill", memRange)
	ck.num("mem-fraction-decode", memRange)
	ck.num("mem-fraction-colo", memRange)
	ck.num("chunk-tokens", between(1, 1<<22).is("a number of tokens").orZero("the profile's"))
	ck.num("max-backlog", between(1, 1e8).is("a number of requests").orZero("no limit"))
	ck.num("max-running", between(1, 1<<16).is("a number of requests").orZero("the profile's"))
	ck.num("time-scale", timeScaleRange)
	ck.num("concurrency", between(1, 1e9).orZero("unlimited"))
	ck.num("timeout", above(0).upTo(1e9).orZero("no timeout").is("a number of seconds"))
	ck.num("session-idle-forget", above(0).upTo(1e9).orZero("never").is("a number of seconds"))
	ck.num("max-input-len", atLeast(1).upTo(1<<30).orZero("the model's max context").is("a number of tokens"))
	ck.num("alpha", above(0).upTo(1e9).is("a weight in blocks"))
	ck.num("floor-k", above(0).upTo(1e9).orZero("off").is("a bonus in blocks"))
	for _, n := range []string{"slo-ttft", "slo-tpot", "slo-e2el"} {
		ck.num(n, above(0).upTo(1e6).orZero("no bound").is("a number of seconds"))
	}
	ck.num("sample-interval", sampleRange)
	f.hicache.check(ck)

	ck.oneOf("output-reuse", "all", "sessions")
	ck.only("link", m.pdWorkers(), "to mechanisms with P and D workers (pd-disaggregation, kvcache-centric, the peers), which transfer KV from P to D")
	ck.only("mem-fraction-prefill", m.pdWorkers(), "to mechanisms with prefill workers (pd-disaggregation, kvcache-centric, the peers)")
	ck.only("mem-fraction-decode", m.pdWorkers(), "to mechanisms with decode workers (pd-disaggregation, kvcache-centric, the peers)")
	f.kvc.check(ck, m.kvc)
	f.peer.check(ck, m.conditional, m.decider)
	f.peer.checkRival(ck, m.rival, m.ppd)
	f.transport.check(ck, m.pdWorkers())
	ck.only("mem-fraction-colo", m.colo, "to data-parallel (pd-colo) workers")
	ck.only("alpha", m.kvAware, "with the kv-aware policy")
	ck.only("floor-k", m.kvAware, "with the kv-aware policy")
	if ck.set("goodput") {
		for _, n := range []string{"slo-ttft", "slo-tpot", "slo-e2el"} {
			if ck.set(n) {
				ck.fail("--%s: give either --goodput or the deprecated --%s, not both", n, n)
			}
		}
	}
	if _, err := f.slo(ck); err != nil {
		ck.fail("%v", err)
	}
	if ck.set("profile") {
		ck.only("model", false, "without --profile (the profile names its model)")
		ck.only("hardware", false, "without --profile (the profile names its hardware)")
	}
	f.mc.check(ck)
}

// slo resolves --goodput (or the deprecated --slo-* in seconds).
func (f *simFlags) slo(ck *checks) (metrics.SLO, error) {
	if !ck.set("goodput") && (ck.set("slo-ttft") || ck.set("slo-tpot") || ck.set("slo-e2el")) {
		return metrics.SLO{TTFTS: f.sloTTFT, TPOTS: f.sloTPOT, LatencyS: f.sloE2E}, nil
	}
	return parseGoodput(f.goodput)
}

// parseGoodput reads vLLM's --goodput syntax: KEY:MS pairs separated by
// commas or spaces, keys ttft, tpot, e2el, values in milliseconds > 0.
func parseGoodput(s string) (metrics.SLO, error) {
	var slo metrics.SLO
	if strings.TrimSpace(s) == "none" {
		return slo, nil
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(fields) == 0 {
		return slo, fmt.Errorf("--goodput %q: want KEY:MS pairs such as ttft:300 tpot:50, or none", s)
	}
	seen := map[string]bool{}
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, ":")
		ms, err := strconv.ParseFloat(v, 64)
		switch {
		case !ok:
			return slo, fmt.Errorf("--goodput %s: want KEY:MS (ttft:300), keys ttft, tpot, e2el", kv)
		case err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) || ms <= 0 || ms > 1e9:
			return slo, fmt.Errorf("--goodput %s: want a bound in milliseconds in (0, 1e9]", kv)
		case seen[k]:
			return slo, fmt.Errorf("--goodput %s: %s given twice", kv, k)
		}
		seen[k] = true
		switch k {
		case "ttft":
			slo.TTFTS = ms / 1e3
		case "tpot":
			slo.TPOTS = ms / 1e3
		case "e2el":
			slo.LatencyS = ms / 1e3
		default:
			return slo, fmt.Errorf("--goodput %s: unknown key %q; want ttft, tpot or e2el", kv, k)
		}
	}
	return slo, nil
}

// loadProfile resolves --profile or --model/--hardware and checks what the
// profile loader does not: a profile problem is a usage error naming the
// flag that brought it in.
func (f *simFlags) loadProfile() (*model.Profile, error) {
	var p *model.Profile
	var err error
	src := fmt.Sprintf("--model %s --hardware %s", f.model, f.hardware)
	switch {
	case f.mc.path != "":
		src = "--model-config " + f.mc.path
		if p, err = f.mc.profile(f.hardware); err != nil {
			return nil, err
		}
	case f.profile != "":
		src = "--profile " + f.profile
		p, err = model.Load(f.profile)
	default:
		p, err = model.Builtin(f.model, f.hardware)
	}
	if err != nil {
		return nil, usagef("%s: %v", src, err)
	}
	if err := checkProfile(p); err != nil {
		return nil, usagef("%s: %v", src, err)
	}
	f.mc.applyScheduler(p)
	return p, nil
}

// checkProfile covers what model.Profile.Validate leaves out.
func checkProfile(p *model.Profile) error {
	m := p.Model
	var errs []string
	if m.Experts < 0 || m.TopK < 0 || (m.Experts == 0) != (m.TopK == 0) || m.TopK > m.Experts {
		errs = append(errs, fmt.Sprintf("model.top_k %d with model.experts %d: want 0 for both (a dense model) or 1 ≤ top_k ≤ experts", m.TopK, m.Experts))
	}
	if m.MaxContext <= 0 {
		errs = append(errs, fmt.Sprintf("model.max_context %d: want > 0 tokens", m.MaxContext))
	}
	if m.WeightBytes < 0 || p.Hardware.WorkspaceBytes < 0 {
		errs = append(errs, "model.weight_bytes and hardware.workspace_bytes must be ≥ 0")
	}
	if m.QHeads < 0 {
		errs = append(errs, fmt.Sprintf("model.q_heads %d: want ≥ 0", m.QHeads))
	}
	if len(errs) > 0 {
		return fmt.Errorf("profile %s: %s", p.Name, strings.Join(errs, "; "))
	}
	return nil
}

// checkWithProfile validates the flags whose range depends on the profile.
func (f *simFlags) checkWithProfile(ck *checks, p *model.Profile, m runModes) {
	for _, r := range []struct {
		flag string
		v    float64
		on   bool
	}{{"mem-fraction-prefill", f.memPrefill, m.pdWorkers()}, {"mem-fraction-decode", f.memDecode, m.pdWorkers()}, {"mem-fraction-colo", f.memColo, m.colo}} {
		if !r.on || r.v == 0 || !memRange.contains(r.v) {
			continue
		}
		if p.KVPoolTokens(r.v) < int64(max(f.chunk, 1)) {
			need := float64(p.Model.WeightBytes+p.Hardware.WorkspaceBytes+int64(max(f.chunk, 1))*p.Model.KVBytesPerToken()) / float64(p.Hardware.HBMBytes)
			ck.fail("--%s %v: weights (%.1f GB) and workspace (%.1f GB) of %s leave no room for KV in %v of %.1f GB HBM; want a fraction in (%.3f, 1]",
				r.flag, r.v, float64(p.Model.WeightBytes)/1e9, float64(p.Hardware.WorkspaceBytes)/1e9, p.Name, r.v, float64(p.Hardware.HBMBytes)/1e9, need)
		}
	}
	f.hicache.checkWithProfile(ck, p, p.KVPoolTokens(max(f.memPrefill, f.memDecode, f.memColo)))
	if f.maxInput > p.Model.MaxContext {
		ck.fail("--max-input-len %d: longer than %s's context of %d tokens; want 0 (the context) or a number of tokens in [1, %d]", f.maxInput, p.Model.Name, p.Model.MaxContext, p.Model.MaxContext)
	}
	if m.pd || m.peer {
		if _, ok := p.Links[f.link]; !ok {
			var names []string
			for n := range p.Links {
				names = append(names, n)
			}
			sort.Strings(names)
			ck.fail("--link %q: profile %s has no such link; want one of %s", f.link, p.Name, strings.Join(names, ", "))
		}
	}
}

// config builds a sim config for one mechanism.
func (f *simFlags) config(p *model.Profile, slo metrics.SLO, mech sim.Mechanism, policy kvc.Policy) sim.Config {
	cfg := sim.Config{
		Mechanism: mech, Policy: policy, Profile: p, Link: f.link,
		PrefillMemFraction: f.memPrefill, DecodeMemFraction: f.memDecode, ColoMemFraction: f.memColo,
		ChunkTokens: f.chunk, MaxRunning: f.maxRunning, MixedChunk: f.mixed, MaxBacklog: cmp.Or(f.maxBacklog, -1),
		TimeScale: f.timeScale, Concurrency: f.concurrency, TimeoutS: f.timeout, SessionIdleForgetS: f.idleForget,
		MaxInputLen: f.maxInput, IgnoreThink: f.ignoreThink, OutputReuse: f.outputReuse,
		Alpha: f.alpha, FloorK: f.floorK,
		SLO:             slo,
		SampleIntervalS: f.sample, Seed: f.seed,
		KVC:  f.kvc.config(),
		Peer: f.peer.config(),
	}
	if kvc.Mechanism(mech).IsRival() {
		cfg.Peer.Rival = f.peer.rivalConfig()
	}
	f.transport.apply(&cfg)
	if f.hicache.enabled {
		h := f.hicache.config()
		cfg.HiCache = &sim.HiCache{Ratio: h.Ratio, SizeBytes: h.SizeBytes, WritePolicy: h.WritePolicy.String(), DemoteIdle: h.DemoteIdle, TrimHostFirst: h.TrimHostFirst}
		if s := h.Storage; s.Enabled {
			cfg.HiCache.StorageBackend, cfg.HiCache.StorageSizeBytes, cfg.HiCache.StoragePrefetchPolicy = s.Backend, s.SizeBytes, s.Prefetch.String()
			cfg.HiCache.StorageShared = f.hicache.shared
			cfg.HiCache.StorageSharedBandwidth = f.hicache.sharedGBps * 1e9
		}
	}
	return cfg
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
