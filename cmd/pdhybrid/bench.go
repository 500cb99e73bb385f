package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", "pdhybrid bench [flags]", `
The main job: replay one agentic workload through several serving mechanisms
on the same simulated cluster and print them side by side.

With no flags it replays the built-in synthetic agentic coding workload
(Claude-Code-like sessions, see docs/workloads.md) on 4 simulated H200 GPUs:
naive PD as 1 prefill + 3 decode workers (round-robin) against data-parallel
serving on 4 colocated workers (sticky session routing). -trace replays any
canonical trace instead. -out DIR writes one run folder per mechanism
(readable by 'pdhybrid report'), DIR/comparison.json and the HTML report
DIR/report/index.html.`)
	var f simFlags
	f.register(fs)
	gpus := fs.Int("gpus", 4, "simulated `GPUs`; naive PD gets 1 prefill and gpus-1 decode workers, DP gets gpus colocated workers")
	pdPolicy := fs.String("pd-policy", "default", "routing `policies` for naive PD's decode workers, comma-separated (one run each): default, sticky, kv-aware")
	dpPolicy := fs.String("dp-policy", "sticky", "routing `policies` for data-parallel workers, comma-separated (one run each): default, sticky, kv-aware (kv-aware without -floor-k piles sessions sharing a system prompt onto one worker; see docs/simulator.md)")
	out := fs.String("out", "", "write one run folder per mechanism and comparison.json to `dir`")
	format := fs.String("format", "text", "table `format` on stdout: text, csv, json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench: unexpected argument %q", fs.Arg(0))}
	}
	if *gpus < 2 {
		return usageError{"bench: -gpus must be at least 2 (one prefill and one decode worker)"}
	}
	prof, err := f.loadProfile()
	if err != nil {
		return err
	}
	var runs []sim.Config
	for _, m := range []struct {
		mech     sim.Mechanism
		policies string
		name     string
	}{
		{sim.PDDisaggregation, *pdPolicy, fmt.Sprintf("naive-pd-1p%dd", *gpus-1)},
		{sim.PDColo, *dpPolicy, fmt.Sprintf("dp-x%d", *gpus)},
	} {
		pols := splitList(m.policies)
		for _, ps := range pols {
			pol, err := kvc.ParsePolicy(ps)
			if err != nil {
				return usageError{err.Error()}
			}
			cfg := f.config(prof, m.mech, pol)
			if m.mech == sim.PDColo {
				cfg.Colo = *gpus
			} else {
				cfg.Prefill, cfg.Decode = 1, *gpus-1
			}
			cfg.Name = m.name
			if len(pols) > 1 {
				cfg.Name += "-" + ps
			}
			runs = append(runs, cfg)
		}
	}

	start := time.Now()
	var names []string
	var sums []metrics.Summary
	comparison := map[string]any{"runs": []string{}}
	for _, cfg := range runs {
		dir := ""
		if *out != "" {
			dir = filepath.Join(*out, cfg.Name)
		}
		res, err := simulate(ctx, e, cfg, &f, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Name, err)
		}
		names = append(names, cfg.Name)
		sums = append(sums, res.Summary)
	}
	fmt.Fprintf(e.stderr, "bench: %d runs on %d simulated %s GPUs (%s) in %.1f s\n",
		len(runs), *gpus, prof.Hardware.Name, prof.Model.Name, time.Since(start).Seconds())
	if err := report.WriteTable(e.stdout, *format, names, sums); err != nil {
		return err
	}
	if *out != "" {
		comparison["runs"] = names
		comparison["summaries"] = sums
		b, err := json.MarshalIndent(comparison, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "comparison.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
		dirs := make([]string, len(names))
		for i, n := range names {
			dirs[i] = filepath.Join(*out, n)
		}
		runs, err := report.LoadAll(dirs)
		if err != nil {
			return err
		}
		page := filepath.Join(*out, "report")
		if err := report.WriteHTML(page, runs); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "bench: wrote %s: one run folder per mechanism, comparison.json, and the HTML report %s\n",
			*out, filepath.Join(page, "index.html"))
	}
	return nil
}
