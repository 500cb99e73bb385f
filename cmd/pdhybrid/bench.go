package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

func benchCmd(e *env) *cobra.Command {
	var f simFlags
	var gpus int
	var pdPolicy, dpPolicy, kvcPolicy, peers, out, format string
	c := &cobra.Command{
		Use:   "bench [flags]",
		Short: "replay an agentic workload through naive PD, data-parallel and KVC serving, side by side",
		Long: `The main job: replay one agentic workload through several serving mechanisms
on the same simulated cluster and print them side by side.

With no flags it replays the built-in synthetic agentic coding workload
(Claude-Code-like sessions, see docs/workloads.md) on 4 simulated H200 GPUs:
naive PD as 1 prefill + 3 decode workers (round-robin), data-parallel
serving on 4 colocated workers (sticky session routing), and KVC on the same
1 prefill + 3 decode workers (kv-aware routing, session-aware decoders,
direct appends; the --direct-max-uncached-tokens family of flags tunes it).
--trace replays any
canonical trace instead. Under the table (--format text) comes the
workload's latency floor, what no mechanism can beat (pdhybrid floor).
--out DIR writes one run folder per mechanism
(readable by 'pdhybrid report'), DIR/comparison.json (with the floor) and the HTML report
DIR/report/index.html; a folder that already holds a bench output is
refused unless --force, which replaces every run folder in it.

SIGINT or SIGTERM stops at once: the run in progress is written marked
"complete": false, later runs are skipped, and the exit status is 130.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.IntVar(&gpus, "gpus", 4, "simulated `GPUs`, in [2, 1024]; naive PD gets 1 prefill and gpus-1 decode workers, data-parallel gets gpus colocated workers")
	fs.StringVar(&pdPolicy, "pd-policy", "default", "routing `policies` for naive PD's decode workers, comma-separated (one run each): default, sticky, kv-aware")
	fs.StringVar(&dpPolicy, "dp-policy", "sticky", "routing `policies` for data-parallel workers, comma-separated (one run each): default, sticky, kv-aware (kv-aware without --floor-k piles sessions sharing a system prompt onto one worker; see docs/simulator.md)")
	fs.StringVar(&kvcPolicy, "kvc-policy", "kv-aware", "routing `policies` for KVC's decode workers, comma-separated (one run each): default, sticky, kv-aware; none = no KVC run")
	fs.StringVar(&peers, "peers", "none", "peer baselines to run too on the naive-PD cluster (1 prefill + gpus-1 decode workers, kv-aware routing, decoders with SGLang's decode radix cache), a comma-separated `list`: pd-conditional (Dynamo), pd-prefix-decider (llm-d), pd-decode-radix (SGLang), pd-ppd (PPD, arXiv 2603.13358), pd-deflect (prefill deflection, arXiv 2607.02043), or all; none = no peer run (docs/peer-baselines.md)")
	fs.StringVar(&out, "out", "", "write one run folder per mechanism, comparison.json and report/index.html to `dir` (default: none, only the table on stdout)")
	fs.StringVar(&format, "format", "text", "table `format` on stdout: text, csv, json")
	f.register(fs)
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		keepHeapHeadroom()
		ck := newChecks(c)
		ck.num("gpus", between(2, 1024).is("a number of GPUs (one prefill and at least one decode worker)"))
		ck.oneOf("format", "text", "csv", "json")
		ck.only("force", out != "", "with --out")
		if f.trace == "-" {
			ck.fail("--trace -: bench replays the trace once per run and standard input can be read only once; save it to a file")
		}
		type plan struct {
			mech     sim.Mechanism
			policies []kvc.Policy
			name     string
			flag     string
		}
		plans := []plan{
			{sim.PDDisaggregation, nil, fmt.Sprintf("naive-pd-1p%dd", gpus-1), "pd-policy"},
			{sim.PDColo, nil, fmt.Sprintf("dp-x%d", gpus), "dp-policy"},
			{sim.KVCacheCentric, nil, fmt.Sprintf("%s-1p%dd", kvcRunName(c, f.kvc.v3.preset), gpus-1), "kvc-policy"},
		}
		modes := runModes{pd: true, colo: true, kvc: kvcPolicy != "none"}
		peerList := splitList(peers)
		switch peers {
		case "none":
			peerList = nil
		case "all":
			peerList = []string{string(sim.PDConditional), string(sim.PDPrefixDecider), string(sim.PDDecodeRadix), string(sim.PDPPD), string(sim.PDDeflect)}
		}
		if peers != "none" && len(peerList) == 0 {
			ck.fail("--peers %q: give pd-conditional, pd-prefix-decider, pd-decode-radix, pd-ppd, pd-deflect, all or none", peers)
		}
		for _, pm := range peerList {
			m := sim.Mechanism(pm)
			switch m {
			case sim.PDConditional, sim.PDPrefixDecider, sim.PDDecodeRadix, sim.PDPPD, sim.PDDeflect:
			default:
				ck.fail("--peers %s: unknown peer %q; want pd-conditional, pd-prefix-decider, pd-decode-radix, pd-ppd, pd-deflect, all or none", peers, pm)
				continue
			}
			plans = append(plans, plan{m, []kvc.Policy{kvc.PolicyKVAware}, fmt.Sprintf("%s-1p%dd", pm, gpus-1), "peers"})
			modes.peer, modes.kvAware = true, true
			modes.conditional = modes.conditional || m == sim.PDConditional
			modes.decider = modes.decider || m == sim.PDPrefixDecider
			modes.rival = modes.rival || m == sim.PDPPD || m == sim.PDDeflect
			modes.ppd = modes.ppd || m == sim.PDPPD
		}
		for i, lst := range []string{pdPolicy, dpPolicy, kvcPolicy} { // the peers' plans are complete
			if lst == "none" && plans[i].mech == sim.KVCacheCentric {
				continue
			}
			names := splitList(lst)
			if len(names) == 0 {
				ck.fail("--%s %q: give at least one policy: default, sticky, kv-aware", plans[i].flag, lst)
			}
			for _, ps := range names {
				pol, err := kvc.ParsePolicy(ps)
				if err != nil {
					ck.fail("--%s %s: %v", plans[i].flag, lst, err)
					continue
				}
				modes.kvAware = modes.kvAware || pol == kvc.PolicyKVAware
				plans[i].policies = append(plans[i].policies, pol)
			}
		}
		f.check(ck, modes)
		if err := ck.err(); err != nil {
			return err
		}
		prof, err := f.loadProfile()
		if err != nil {
			return err
		}
		f.checkWithProfile(ck, prof, modes)
		if err := ck.err(); err != nil {
			return err
		}
		slo, _ := f.slo(ck)
		var runs []sim.Config
		for _, p := range plans {
			for _, pol := range p.policies {
				cfg := f.config(prof, slo, p.mech, pol)
				if p.mech == sim.PDColo {
					cfg.Colo = gpus
				} else {
					cfg.Prefill, cfg.Decode = 1, gpus-1
				}
				cfg.Name = p.name
				if len(p.policies) > 1 {
					cfg.Name += "-" + string(pol)
				}
				runs = append(runs, cfg)
			}
		}
		w, err := openWorkload(e, &f)
		if err != nil {
			return err
		}
		if out != "" {
			if _, err := prepareOut(out, f.force, outBench); err != nil {
				w.close()
				return err
			}
		}

		start := e.now()
		var names []string
		var sums []metrics.Summary
		var stopErr error
		for i, cfg := range runs {
			if i > 0 {
				if w, err = openWorkload(e, &f); err != nil {
					return err
				}
			}
			dir := ""
			if out != "" {
				dir = filepath.Join(out, cfg.Name)
			}
			label := fmt.Sprintf("run %d/%d: %s", i+1, len(runs), cfg.Name)
			res, err := simulate(ctx, e, cfg, w, dir, label)
			w.close()
			if res == nil {
				return fmt.Errorf("%s: %w", cfg.Name, err)
			}
			names = append(names, cfg.Name)
			sums = append(sums, res.Summary)
			if err != nil {
				stopErr = err
				break
			}
		}
		if stopErr == nil {
			fmt.Fprintf(e.stderr, "bench: %d runs on %d simulated %s GPUs (%s) in %.1f s\n",
				len(runs), gpus, prof.Hardware.Name, prof.Model.Name, e.now().Sub(start).Seconds())
		} else {
			fmt.Fprintf(e.stderr, "bench: stopped after %d of %d runs; the last is incomplete\n", len(names), len(runs))
		}
		if err := report.WriteTable(e.stdout, format, names, sums); err != nil {
			return err
		}
		// The workload's latency floor: what no mechanism can beat (a trace
		// on standard input cannot be read twice, so it has none).
		var floor *sim.FloorStats
		if f.trace != "-" && stopErr == nil {
			fmt.Fprintf(e.stderr, "bench: the workload's latency floor: timing every request alone on an idle GPU (pdhybrid floor)\n")
			floorStart := e.now()
			st, _, err := workloadFloor(e, &f, prof, runs[0].ChunkTokens, runs[0].MaxInputLen)
			if err == nil {
				fmt.Fprintf(e.stderr, "bench: latency floor in %.1f s\n", e.now().Sub(floorStart).Seconds())
				floor = &st
				if format == "text" {
					fmt.Fprintf(e.stdout, "\nlatency floor (pdhybrid floor: every request alone on an idle GPU, ideal prefix cache): TTFT p50 %.4g s, p90 %.4g s, p99 %.4g s; e2e p50 %.4g s, p99 %.4g s\n",
						st.TTFT.P50, st.TTFT.P90, st.TTFT.P99, st.E2E.P50, st.E2E.P99)
				}
			} else {
				fmt.Fprintf(e.stderr, "bench: no latency floor: %v\n", err)
			}
		}
		verdict := report.BuildVerdict(names, sums)
		if format == "text" {
			fmt.Fprintln(e.stdout)
			if err := report.WriteVerdict(e.stdout, verdict); err != nil {
				return err
			}
		}
		if out == "" {
			return stopErr
		}
		comparison := map[string]any{"runs": names, "summaries": sums, "complete": stopErr == nil, "verdict": verdict}
		if floor != nil {
			comparison["latency_floor"] = floor
		}
		b, err := json.MarshalIndent(comparison, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "comparison.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
		if stopErr != nil {
			fmt.Fprintf(e.stderr, "bench: wrote %s without the HTML report ('pdhybrid report %s' builds it from the runs there)\n", out, out)
			return stopErr
		}
		dirs := make([]string, len(names))
		for i, n := range names {
			dirs[i] = filepath.Join(out, n)
		}
		fmt.Fprintf(e.stderr, "bench: writing the HTML report from the %d run folders\n", len(dirs))
		loaded, err := report.LoadAll(dirs)
		if err != nil {
			return err
		}
		page := filepath.Join(out, "report")
		if err := report.WriteHTML(page, loaded); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "bench: wrote %s: one run folder per mechanism, comparison.json, and the HTML report %s\n",
			out, filepath.Join(page, "index.html"))
		return nil
	})
	return c
}

// kvcRunName names a KVC run by what ran: kvc-v2 or kvc-v3 by its preset,
// with -tuned when a v3 flag changed one of the preset's values, so runs
// of both versions never share a name.
func kvcRunName(c *cobra.Command, preset string) string {
	name := "kvc-" + preset
	for _, n := range kvcV3FlagNames {
		if n != "kvc-preset" && c.Flags().Changed(n) {
			return name + "-tuned"
		}
	}
	return name
}
