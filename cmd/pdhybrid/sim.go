package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/report"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

func simCmd(e *env) *cobra.Command {
	c, _ := simCommand(e)
	return c
}

// simOpts are sim's flags: the knobs it shares with bench and its own.
type simOpts struct {
	f                             simFlags
	mech, policy, out, name, dump string
	prefill, decode, colo         int
}

// simCommand builds the sim command and the flags it parses into, so sweep
// can resolve each of its cells through exactly sim's parsing and checks.
func simCommand(e *env) (*cobra.Command, *simOpts) {
	var o simOpts
	c := &cobra.Command{
		Use:   "sim [flags]",
		Short: "one simulation run with every knob exposed",
		Long: `Run one simulation: replay a trace (or the built-in agentic workload) through
one serving mechanism on a simulated cluster, closed-loop per session.

Writes a summary table to stdout. With --out DIR it also writes
DIR/metrics.jsonl (one line per request, with its latency breakdown),
DIR/summary.json, DIR/config.json (the resolved config, profile included),
DIR/structural/workers.jsonl (worker KV occupancy over time), and the
control plane's decisions: structural/session-d-binding.jsonl (every turn's
decoder), admission-events.jsonl (KVC admission RPCs: mode, can_admit,
reason, RTT, pause), evictions.jsonl (tokens freed, granularity, and
"state": idle, or hot with a request of the session on that decoder),
backpressure-events.jsonl, d-to-p-sync.jsonl and events.jsonl (anything
else).
A folder that already holds a run is refused unless --force.

SIGINT or SIGTERM stops the run within a moment: the folder is written
with what was simulated so far, summary.json says "complete": false with
the stop reason, and the exit status is 130.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.mech, "mechanism", "pd-disaggregation", "serving `mechanism`: pd-disaggregation (naive PD), pd-colo (data-parallel), kvcache-centric (KVC: direct appends on session-aware decoders, seeds/reseeds through P, plain-PD fallback), or a peer as a baseline on decoders with SGLang's decode radix cache (docs/peer-baselines.md): pd-conditional (Dynamo's conditional disaggregation: local prefill on the decoder when --conditional-strategy says so), pd-prefix-decider (llm-d's prefix-based-pd-decider: P only when the uncached suffix ≥ --decider-non-cached-tokens), pd-decode-radix (SGLang's --disaggregation-decode-enable-radix-cache, PR #19746: every request through P, only the delta KV sent); or a 2026 rival on the same decoders: pd-ppd (PPD, arXiv 2603.13358: turn 1 through P, turn 2+ append-prefilled on the session's decoder when the SLO-weighted gain beats the harm, --ppd-ttft-weight/--ppd-tpot-weight), pd-deflect (prefill deflection, arXiv 2607.02043: a request whose TTFT via P would miss --rival-ttft-slo-ms is prefilled on the decoder whose TBT-bounded chunks give the lowest TTFT); DP with HiCache and PD with the decode radix cache and HiCache are pd-colo and pd-decode-radix with --enable-hierarchical-cache")
	fs.StringVar(&o.policy, "policy", "default", "routing `policy` over the decode (or colocated) workers: default (round-robin), sticky, kv-aware (Algorithm 1), cache-aware (SGLang router's DP default: shortest queue past a 32-request imbalance, else the best prefix match over half the prompt, else the smallest tree); kvcache-centric and the peers default to kv-aware")
	fs.IntVar(&o.prefill, "prefill", 1, "pd-disaggregation, kvcache-centric, the peers: number of prefill `workers` (GPUs)")
	fs.IntVar(&o.decode, "decode", 3, "pd-disaggregation, kvcache-centric, the peers: number of decode `workers` (GPUs)")
	fs.IntVar(&o.colo, "colo", 4, "pd-colo: number of colocated `workers` (GPUs)")
	fs.StringVar(&o.out, "out", "", "write the run folder to `dir` (default: none, only the table on stdout)")
	fs.StringVar(&o.name, "name", "", "run `name` recorded in config.json (default: mechanism/policy)")
	fs.StringVar(&o.dump, "dump-profile", "", "write the resolved model/hardware profile as JSON to `file` (- for stdout) and exit; edit it and pass it back with --profile")
	o.f.register(fs)
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		keepHeapHeadroom()
		cfg, dumped, err := o.resolve(e, newChecks(c))
		if err != nil || dumped {
			return err
		}
		w, err := openWorkload(e, &o.f)
		if err != nil {
			return err
		}
		defer w.close()
		if o.out != "" {
			if _, err := prepareOut(o.out, o.f.force, outRun); err != nil {
				return err
			}
		}
		res, err := simulate(ctx, e, cfg, w, o.out, cfg.Name)
		if res == nil {
			return err
		}
		if terr := report.WriteTable(e.stdout, "text", []string{cfg.Name}, []metrics.Summary{res.Summary}); err == nil {
			err = terr
		}
		if err == nil {
			err = noneCompleted(&res.Summary)
		}
		return err
	})
	return c, &o
}

// noneCompleted is the error of a run in which no request completed: its
// table has no latency to show (each is "—"), and exit status 0 would let
// a script read it as a run that worked.
func noneCompleted(s *metrics.Summary) error {
	switch {
	case s.Completed > 0:
		return nil
	case s.Requests == 0:
		return errors.New("no request completed: the workload had none")
	}
	causes := make([]string, 0, len(s.FailureCauses))
	for c, n := range s.FailureCauses {
		causes = append(causes, fmt.Sprintf("%d %s", n, c))
	}
	sort.Strings(causes)
	return fmt.Errorf("no request completed: all %d ended without an answer (%s)", s.Requests, strings.Join(causes, ", "))
}

// resolve checks the parsed flags (ck reads them) and builds the run's
// config. With --dump-profile it writes the profile instead and says so.
func (o *simOpts) resolve(e *env, ck *checks) (cfg sim.Config, dumped bool, err error) {
	f := &o.f
	m, err := sim.ParseMechanism(o.mech)
	if err != nil {
		return cfg, false, usagef("--mechanism %s: %v", o.mech, err)
	}
	policy := o.policy
	rival := m == sim.PDPPD || m == sim.PDDeflect
	peer := m == sim.PDConditional || m == sim.PDPrefixDecider || m == sim.PDDecodeRadix || rival
	if (m == sim.KVCacheCentric || peer) && !ck.set("policy") {
		policy = string(kvc.PolicyKVAware) // Algorithm 1
	}
	pol, err := kvc.ParsePolicy(policy)
	if err != nil {
		return cfg, false, usagef("--policy %s: %v", policy, err)
	}
	modes := runModes{pd: m == sim.PDDisaggregation, colo: m == sim.PDColo, kvc: m == sim.KVCacheCentric, kvAware: pol == kvc.PolicyKVAware,
		peer: peer, conditional: m == sim.PDConditional, decider: m == sim.PDPrefixDecider, rival: rival, ppd: m == sim.PDPPD}
	ck.num("prefill", between(1, 1024).is("a number of workers"))
	ck.num("decode", between(1, 1024).is("a number of workers"))
	ck.num("colo", between(1, 1024).is("a number of workers"))
	ck.only("prefill", modes.pdWorkers(), "to --mechanism pd-disaggregation, kvcache-centric or a peer")
	ck.only("decode", modes.pdWorkers(), "to --mechanism pd-disaggregation, kvcache-centric or a peer")
	ck.only("colo", modes.colo, "to --mechanism pd-colo")
	ck.only("force", o.out != "", "with --out")
	f.check(ck, modes)
	if err := ck.err(); err != nil {
		return cfg, false, err
	}
	prof, err := f.loadProfile()
	if err != nil {
		return cfg, false, err
	}
	if o.dump != "" {
		return cfg, true, dumpProfile(e, prof, o.dump)
	}
	f.checkWithProfile(ck, prof, modes)
	if err := ck.err(); err != nil {
		return cfg, false, err
	}
	slo, _ := f.slo(ck)
	cfg = f.config(prof, slo, m, pol)
	cfg.Prefill, cfg.Decode, cfg.Colo = o.prefill, o.decode, o.colo
	if m == sim.PDColo {
		cfg.Prefill, cfg.Decode = 0, 0
	} else {
		cfg.Colo = 0
	}
	cfg.Name = o.name
	if cfg.Name == "" {
		cfg.Name = string(m) + "/" + string(pol)
	}
	return cfg, false, nil
}

// simulate runs cfg over an opened workload, writing the run folder when dir
// is set. A run that stops early (interrupted, or a limit) still writes its
// folder, marked incomplete, and returns the partial result with the
// *sim.StopError. On any other failure the folder's run files are removed,
// so no half-written run is ever read as a whole one.
func simulate(ctx context.Context, e *env, cfg sim.Config, w *workload, dir, label string) (*sim.Result, error) {
	var sink sim.Sink
	var ds *sim.DirSink
	var thin *thinSink
	if dir != "" {
		var err error
		if ds, err = sim.NewDirSink(dir); err != nil {
			return nil, err
		}
		thin = newThinSink(ds, maxWorkerSample)
		sink = thin
	}
	start := e.now()
	prog := newProgress(e, label, w, cfg.TimeScale)
	cfg.Warn = func(msg string) { fmt.Fprintf(e.stderr, "%s: warning: %s\n", label, msg) }
	res, err := sim.Run(ctx, cfg, w.src.runSource(), sink, prog.callback())
	prog.finish()
	var stop *sim.StopError
	if err != nil && !errors.As(err, &stop) {
		if ds != nil {
			ds.Close()
			removeRun(dir)
		}
		return nil, err
	}
	s := &res.Summary
	s.ModelID, s.Hardware = cfg.Profile.Model.Name, cfg.Profile.Hardware.Name
	s.Date = start.Format(time.RFC3339)
	s.Workload = w.desc
	if dir != "" { // only summary.json records it; finding it may run git
		s.Version = versionString()
	}
	s.RequestRate = w.src.requestRate(cfg.TimeScale)
	if cfg.Concurrency > 0 {
		s.MaxConcurrency = &cfg.Concurrency
	}
	s.TimeScale = cfg.TimeScale
	s.WorkerSampleIntervalS = cfg.SampleIntervalS
	if ds != nil {
		s.WorkerSampleIntervalS *= float64(thin.factor())
		werr := thin.Flush()
		if cerr := ds.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = sim.WriteRunFiles(dir, cfg, res)
		}
		if werr != nil {
			removeRun(dir)
			return nil, werr
		}
		// A thinned workers.jsonl is no news worth a line per run: the
		// period it kept is summary.json's worker_sample_interval_s, which
		// report reads.
	}
	if stop != nil {
		where := "nothing written (no --out)"
		if dir != "" {
			where = "wrote " + dir + ", marked \"complete\": false"
		}
		fmt.Fprintf(e.stderr, "%s: stopped (%s) at simulated %.0f s: %d requests ended of %d read from %s; %s\n",
			label, stop.Reason, res.Replay.SimDurationS, res.Summary.Requests, res.Replay.Requests, w.desc, where)
		return res, err
	}
	fmt.Fprintf(e.stderr, "%s: %d requests from %s, %d sessions, %.0f s simulated\n",
		label, res.Replay.Requests, w.desc, res.Replay.Sessions, res.Replay.SimDurationS)
	if cfg.TimeScale != 1 {
		// The seed learned this the hard way: compressing a trace 10x turned
		// its results into a burst-queueing artefact. Say it with the result.
		fmt.Fprintf(e.stderr, "%s: note: time scale %g compresses arrivals and think times %gx: the offered load is higher than the trace's, and queueing with it\n",
			label, cfg.TimeScale, cfg.TimeScale)
	}
	return res, nil
}

// removeRun deletes the run files of a failed run from dir.
func removeRun(dir string) {
	ours, _ := classifyRun(dir) // files before the folder that holds them
	for _, p := range ours {
		os.Remove(p)
	}
	os.Remove(dir) // only if empty
}

// dumpProfile writes p where asked.
func dumpProfile(e *env, p *model.Profile, path string) error {
	return writeOutput(e, path, func(w io.Writer) error { return p.Encode(w) })
}

// writeOutput runs write against stdout (path "-") or a new file at path.
// A failed write removes the partial file, so a broken run never leaves a
// truncated file behind that looks whole.
func writeOutput(e *env, path string, write func(io.Writer) error) (err error) {
	if path == "-" || path == "" {
		return write(e.stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	return write(f)
}
