package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// simFlags are the knobs sim and bench share.
type simFlags struct {
	trace       string
	blockSize   int
	synthReqs   int64
	synthSess   int
	synthRate   float64
	model       string
	hardware    string
	profile     string
	link        string
	memPrefill  float64
	memDecode   float64
	memColo     float64
	chunk       int
	maxRunning  int
	mixed       bool
	timeScale   float64
	concurrency int
	timeout     float64
	maxInput    int
	ignoreThink bool
	alpha       float64
	floorK      float64
	sloTTFT     float64
	sloTPOT     float64
	sloE2E      float64
	sample      float64
	seed        uint64
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.trace, "trace", "", "canonical trace `file` to replay (default: the built-in synthetic agentic workload)")
	fs.IntVar(&f.blockSize, "block-size", 0, "tokens per hash id for a trace `file` without a header line (0 = require a header)")
	fs.Int64Var(&f.synthReqs, "synth-requests", 0, "built-in workload: stop after this many `requests` (0 = its default size)")
	fs.IntVar(&f.synthSess, "synth-sessions", 0, "built-in workload: number of `sessions` (0 = its default, 40; unbounded when -synth-requests is set)")
	fs.Float64Var(&f.synthRate, "synth-rate", 0, "built-in workload: session arrival `rate` in sessions/s (0 = default 0.1)")
	fs.StringVar(&f.model, "model", "qwen3-30b-a3b", "built-in model `name`")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "built-in hardware `name` (h100-80g, h200-141g)")
	fs.StringVar(&f.profile, "profile", "", "model/hardware profile JSON `file` (overrides -model/-hardware; see docs/engine.md)")
	fs.StringVar(&f.link, "link", "rdma-400g", "P→D transfer link `name` from the profile (rdma-400g, tcp-loopback, nvlink)")
	fs.Float64Var(&f.memPrefill, "mem-fraction-prefill", 0, "prefill workers' HBM `fraction` for weights+KV (0 = the profile's, 0.835)")
	fs.Float64Var(&f.memDecode, "mem-fraction-decode", 0, "decode workers' HBM `fraction` (0 = the profile's)")
	fs.Float64Var(&f.memColo, "mem-fraction-colo", 0, "colocated workers' HBM `fraction` (0 = the profile's)")
	fs.IntVar(&f.chunk, "chunk-tokens", 8192, "chunked-prefill budget per scheduler step, in `tokens`")
	fs.IntVar(&f.maxRunning, "max-running", 128, "max running `requests` per worker")
	fs.BoolVar(&f.mixed, "mixed-chunk", false, "run the decode batch inside prefill steps (SGLang --enable-mixed-chunk)")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "divide trace time (and think time) by this `factor`; 2 replays twice as fast")
	fs.IntVar(&f.concurrency, "concurrency", 0, "max `requests` in flight from the client (0 = unlimited)")
	fs.Float64Var(&f.timeout, "timeout", 0, "per-request timeout in `seconds` from send (0 = none)")
	fs.IntVar(&f.maxInput, "max-input-len", 0, "fail prompts longer than this many `tokens` (0 = the model's max context, 262144)")
	fs.BoolVar(&f.ignoreThink, "ignore-think-time", false, "release a turn when its parent ends, ignoring the trace's think time")
	fs.Float64Var(&f.alpha, "alpha", 1, "kv-aware: weight of stickiness in `blocks` of overlap")
	fs.Float64Var(&f.floorK, "floor-k", 0, "kv-aware: load-floor bonus `K` for under-assigned workers (0 = off)")
	fs.Float64Var(&f.sloTTFT, "slo-ttft", 2, "goodput SLO: max TTFT in `seconds` (0 = no bound)")
	fs.Float64Var(&f.sloTPOT, "slo-tpot", 0.1, "goodput SLO: max TPOT in `seconds` (0 = no bound)")
	fs.Float64Var(&f.sloE2E, "slo-e2el", 0, "goodput SLO: max end-to-end latency in `seconds` (0 = no bound)")
	fs.Float64Var(&f.sample, "sample-interval", 1, "worker occupancy log period in simulated `seconds`")
	fs.Uint64Var(&f.seed, "seed", synth.DefaultAgentic().Seed, "`seed` for the built-in workload (the simulator itself is deterministic)")
}

// loadProfile resolves -profile or -model/-hardware.
func (f *simFlags) loadProfile() (*model.Profile, error) {
	if f.profile != "" {
		return model.Load(f.profile)
	}
	return model.Builtin(f.model, f.hardware)
}

// config builds a sim config for one mechanism.
func (f *simFlags) config(p *model.Profile, mech sim.Mechanism, policy kvc.Policy) sim.Config {
	return sim.Config{
		Mechanism: mech, Policy: policy, Profile: p, Link: f.link,
		PrefillMemFraction: f.memPrefill, DecodeMemFraction: f.memDecode, ColoMemFraction: f.memColo,
		ChunkTokens: f.chunk, MaxRunning: f.maxRunning, MixedChunk: f.mixed,
		TimeScale: f.timeScale, Concurrency: f.concurrency, TimeoutS: f.timeout,
		MaxInputLen: f.maxInput, IgnoreThink: f.ignoreThink,
		Alpha: f.alpha, FloorK: f.floorK,
		SLO:             slo(f.sloTTFT, f.sloTPOT, f.sloE2E),
		SampleIntervalS: f.sample, Seed: f.seed,
	}
}

// source opens the workload: a trace file, or the built-in generator. The
// returned closer must be called when the run is over.
func (f *simFlags) source() (sim.Source, string, func() error, error) {
	if f.trace == "" {
		cfg := synth.DefaultAgentic()
		cfg.Seed = f.seed
		if f.synthReqs > 0 {
			cfg.Requests = f.synthReqs
			cfg.Sessions = 0
		}
		if f.synthSess > 0 {
			cfg.Sessions = f.synthSess
		}
		if f.synthRate > 0 {
			cfg.ArrivalRate = f.synthRate
		}
		st, err := synth.NewAgentic(cfg)
		if err != nil {
			return nil, "", nil, err
		}
		desc := fmt.Sprintf("built-in agentic workload (seed %d, sessions arriving at %.3g/s", cfg.Seed, cfg.ArrivalRate)
		if cfg.Sessions > 0 {
			desc += fmt.Sprintf(", %d sessions", cfg.Sessions)
		}
		if cfg.Requests > 0 {
			desc += fmt.Sprintf(", first %d requests", cfg.Requests)
		}
		return st, desc + ")", func() error { return nil }, nil
	}
	file, err := os.Open(f.trace)
	if err != nil {
		return nil, "", nil, err
	}
	rd, err := trace.NewReader(file, f.trace, f.blockSize)
	if err != nil {
		file.Close()
		return nil, "", nil, err
	}
	if rd.Header().BlockSize <= 0 {
		file.Close()
		return nil, "", nil, usageError{fmt.Sprintf("%s has no header line: give its block size with -block-size", f.trace)}
	}
	return rd, f.trace, file.Close, nil
}

// progressPrinter prints a progress line to w at most once a second of wall
// time, and only once the run has lasted a second.
func progressPrinter(w io.Writer, label string) (sim.Progress, func()) {
	start := time.Now()
	last := start
	printed := false
	return func(done int, simT float64) {
			now := time.Now()
			if now.Sub(last) < time.Second {
				return
			}
			last = now
			printed = true
			fmt.Fprintf(w, "\r%s: %d requests done, simulated %.0f s, %.1f s elapsed", label, done, simT, now.Sub(start).Seconds())
		}, func() {
			if printed {
				fmt.Fprintln(w)
			}
		}
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
