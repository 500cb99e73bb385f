package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/report"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

func runSim(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sim", "pdhybrid sim [flags]", `
Run one simulation: replay a trace (or the built-in agentic workload) through
one serving mechanism on a simulated cluster, closed-loop per session.

Writes a summary table to stdout. With -out DIR it also writes
DIR/metrics.jsonl (one line per request, with its latency breakdown),
DIR/summary.json, DIR/config.json (the resolved config, profile included),
DIR/structural/workers.jsonl (worker KV occupancy over time) and
DIR/structural/events.jsonl (session bindings and other decisions).`)
	var f simFlags
	f.register(fs)
	mech := fs.String("mechanism", "pd-disaggregation", "serving `mechanism`: pd-disaggregation (naive PD) or pd-colo (data-parallel)")
	policy := fs.String("policy", "default", "routing `policy`: default (round-robin), sticky, kv-aware")
	prefill := fs.Int("prefill", 1, "pd-disaggregation: number of prefill `workers` (GPUs)")
	decode := fs.Int("decode", 3, "pd-disaggregation: number of decode `workers` (GPUs)")
	colo := fs.Int("colo", 4, "pd-colo: number of colocated `workers` (GPUs)")
	out := fs.String("out", "", "write the run folder to `dir`")
	name := fs.String("name", "", "run `name` recorded in config.json (default: mechanism/policy)")
	dump := fs.String("dump-profile", "", "write the resolved model/hardware profile as JSON to `file` (- for stdout) and exit; edit it and pass it back with -profile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("sim: unexpected argument %q", fs.Arg(0))}
	}
	m, err := sim.ParseMechanism(*mech)
	if err != nil {
		return usageError{err.Error()}
	}
	pol, err := kvc.ParsePolicy(*policy)
	if err != nil {
		return usageError{err.Error()}
	}
	prof, err := f.loadProfile()
	if err != nil {
		return err
	}
	if *dump != "" {
		return dumpProfile(e, prof, *dump)
	}
	cfg := f.config(prof, m, pol)
	cfg.Prefill, cfg.Decode, cfg.Colo = *prefill, *decode, *colo
	if m == sim.PDColo {
		cfg.Prefill, cfg.Decode = 0, 0
	} else {
		cfg.Colo = 0
	}
	cfg.Name = *name
	if cfg.Name == "" {
		cfg.Name = string(m) + "/" + string(pol)
	}
	res, err := simulate(ctx, e, cfg, &f, *out)
	if err != nil {
		return err
	}
	return report.WriteTable(e.stdout, "text", []string{cfg.Name}, []metrics.Summary{res.Summary})
}

// simulate runs one config over the flags' workload, writing the run folder
// when dir is set.
func simulate(ctx context.Context, e *env, cfg sim.Config, f *simFlags, dir string) (*sim.Result, error) {
	src, desc, closeSrc, err := f.source()
	if err != nil {
		return nil, err
	}
	defer closeSrc()
	var sink sim.Sink
	var ds *sim.DirSink
	if dir != "" {
		if ds, err = sim.NewDirSink(dir); err != nil {
			return nil, err
		}
		sink = ds
	}
	prog, done := progressPrinter(e.stderr, cfg.Name)
	res, err := sim.Run(ctx, cfg, src, sink, prog)
	done()
	if ds != nil {
		if cerr := ds.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.stderr, "%s: %d requests from %s, %d sessions, %.0f s simulated\n",
		cfg.Name, res.Replay.Requests, desc, res.Replay.Sessions, res.Replay.SimDurationS)
	if cfg.TimeScale != 1 {
		// The seed learned this the hard way: compressing a trace 10x turned
		// its results into a burst-queueing artefact. Say it with the result.
		fmt.Fprintf(e.stderr, "%s: note: time scale %g compresses arrivals and think times %gx: the offered load is higher than the trace's, and queueing with it\n",
			cfg.Name, cfg.TimeScale, cfg.TimeScale)
	}
	if dir != "" {
		if err := sim.WriteRunFiles(dir, cfg, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func slo(ttft, tpot, e2e float64) metrics.SLO {
	return metrics.SLO{TTFTS: ttft, TPOTS: tpot, LatencyS: e2e}
}

// dumpProfile writes p where asked.
func dumpProfile(e *env, p *model.Profile, path string) error {
	return writeOutput(e, path, func(w io.Writer) error { return p.Encode(w) })
}
