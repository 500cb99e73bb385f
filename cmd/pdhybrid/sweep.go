package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/sweep"
)

func sweepCmd(e *env) *cobra.Command {
	var mechs, workloads, traces, topos, out, gridFile string
	var sets []string
	var jobs int
	var force bool
	c := &cobra.Command{
		Use:   "sweep --out DIR [flags] [-- sim flags for every cell]",
		Short: "a grid of simulations: mechanisms × knob values × workloads × topologies, in parallel",
		Long: `Run a grid of simulations, one 'pdhybrid sim' per cell, on all cores, and
tabulate and plot them side by side:

  pdhybrid sweep --mechanism kvcache-centric,pd-disaggregation,pd-colo \
    --set direct-max-uncached-tokens=2048,8192,16384 --set migration-reject-threshold=1,3 \
    --workload seed-swe,groups --trace /tmp/weka-p005.jsonl --topology 1P3D,2P6D \
    --out sweeps/x -- --time-scale 1

Knobs (--set NAME=V1,V2,...) are sim's flag names, parsed and checked as
sim checks them: a bad value is refused before anything runs, naming the
cell and the flag. A knob that does not apply to a mechanism (the KVC knobs
to pd-colo) does not multiply that mechanism's cells. A topology NPMD is N
prefill and M decode workers; a mechanism without the split (pd-colo) gets
the same N+M GPUs as colocated workers. --set MECH:NAME=... sweeps a knob
in that mechanism's cells only (--set pd-colo:policy=sticky,kv-aware).
Flags after -- go to every cell they apply to.
--grid FILE reads the axes from a YAML or JSON file instead (see
docs/sweep.md).

--out DIR gets one run folder per cell, named from the cell's values
(the format 'pdhybrid sim --out' writes), sweep.csv and sweep.json (one row
per cell), index.html (each metric against each knob, the Pareto front of
TTFT p50 against p99), sweep-grid.json (what the folder holds) and
sweep.log (what the cells said). Running the same sweep again keeps the
finished cells and runs the rest; a different grid in the same folder is
refused unless --force. Results do not depend on --jobs.

SIGINT or SIGTERM stops the cells running (their folders are removed, so a
later run does them again), keeps the finished ones, writes the tables for
them, and exits with status 130.`,
		Args: func(c *cobra.Command, args []string) error {
			if d := c.ArgsLenAtDash(); (d < 0 && len(args) > 0) || d > 0 {
				return usagef("unexpected argument %q (sim flags for every cell go after --)", args[0])
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	simc, _ := simCommand(e)
	defMech := simc.Flags().Lookup("mechanism").DefValue
	defWorkload := simc.Flags().Lookup("workload").DefValue
	defTopo := fmt.Sprintf("%sP%sD", simc.Flags().Lookup("prefill").DefValue, simc.Flags().Lookup("decode").DefValue)
	fs.StringVar(&mechs, "mechanism", "", "serving `mechanisms`, comma-separated: any that 'pdhybrid sim --mechanism' takes (default: sim's, "+defMech+")")
	fs.StringArrayVar(&sets, "set", nil, "a knob and its values, `name=v1,v2,...`: any 'pdhybrid sim' flag, by its name without dashes (mech:name for one mechanism's cells only); repeat for more knobs, the grid is their product (default: none)")
	fs.StringVar(&workloads, "workload", "", "built-in `workloads`, comma-separated: agentic, groups, seed-swe, seed-inferact (default: sim's, "+defWorkload+", unless --trace is given)")
	fs.StringVar(&traces, "trace", "", "canonical trace `files`, comma-separated, each a workload of its own, named by its base name (default: none)")
	fs.StringVar(&topos, "topology", "", "cluster `shapes`, comma-separated: NPMD = N prefill + M decode workers; colocated mechanisms get N+M colocated workers (default: sim's, "+defTopo+")")
	fs.StringVar(&gridFile, "grid", "", "read mechanisms, knobs, workloads, traces, topologies and base sim flags from a YAML or JSON `file` instead of the flags above (default: none)")
	fs.IntVar(&jobs, "jobs", runtime.NumCPU(), "`cells` run at once, in [1, 1024] (default: the number of CPUs, here "+strconv.Itoa(runtime.NumCPU())+")")
	fs.StringVar(&out, "out", "", "the sweep's folder, `dir` (required)")
	fs.BoolVar(&force, "force", false, "replace a different sweep already in --out (cells the two grids share are kept when the base sim flags are the same)")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, args []string) error {
		keepHeapHeadroom()
		ck := newChecks(c)
		ck.num("jobs", between(1, 1024).is("a number of cells"))
		if out == "" {
			ck.fail("--out: the sweep needs a folder for its cells; give --out DIR")
		}
		if gridFile != "" {
			for _, n := range []string{"mechanism", "set", "workload", "trace", "topology"} {
				ck.only(n, false, "without --grid (the grid file gives the axes)")
			}
		}
		if err := ck.err(); err != nil {
			return err
		}
		var spec sweep.Spec
		if gridFile != "" {
			var err error
			if spec, err = sweep.LoadSpec(gridFile); err != nil {
				return usagef("--grid %s: %v", gridFile, err)
			}
		} else {
			spec.Mechanisms, spec.Workloads, spec.Traces, spec.Topologies = splitList(mechs), splitList(workloads), splitList(traces), splitList(topos)
			spec.Set = map[string]any{}
			for _, s := range sets {
				name, vals, ok := strings.Cut(s, "=")
				name = strings.TrimLeft(strings.TrimSpace(name), "-")
				if !ok || name == "" || len(splitList(vals)) == 0 {
					return usagef("--set %s: want name=v1,v2,... (a sim flag name and its values)", s)
				}
				if _, dup := spec.Set[name]; dup {
					return usagef("--set %s: knob %s given twice; give its values once, comma-separated", s, name)
				}
				var vs []any
				for _, v := range splitList(vals) {
					vs = append(vs, v)
				}
				spec.Set[name] = vs
			}
		}
		if len(spec.Workloads) == 0 && len(spec.Traces) == 0 {
			spec.Workloads = []string{defWorkload}
		}
		for _, t := range spec.Traces {
			if t == "-" {
				return usagef("--trace -: every cell reads the trace and standard input can be read only once; save it to a file")
			}
			if st, err := os.Stat(t); err != nil || st.IsDir() {
				return usagef("--trace %s: not a readable trace file", t)
			}
		}
		dt, _ := sweep.ParseTopology(defTopo)
		g, err := spec.Grid(defMech, dt)
		if err != nil {
			return usagef("%v", err)
		}
		if d := c.ArgsLenAtDash(); d >= 0 {
			g.Base = append(g.Base, normalizeArgs(simc, args[d:])...)
		}
		if err := g.Check(); err != nil {
			return usagef("%v", err)
		}
		if err := checkKnobs(e, &g); err != nil {
			return err
		}
		m := newMoot()
		cells, err := sweep.Expand(g, fitter(e, g, m))
		if err != nil {
			return err
		}
		for _, k := range g.Knobs {
			if !m.used[k.Name] {
				return usagef("--set %s: applies to none of the grid's cells (it applies only %s)", k.Name, m.when[k.Name])
			}
		}
		for _, b := range g.Base {
			if name, _, _ := strings.Cut(strings.TrimPrefix(b, "--"), "="); !m.used[name] {
				return usagef("sim flags after --: --%s applies to none of the grid's cells (it applies only %s)", name, m.when[name])
			}
		}
		for _, n := range m.notes() {
			fmt.Fprintln(e.stderr, n)
		}
		man := sweep.NewManifest(g, cells)
		if err := man.HashTraces(); err != nil {
			return err
		}
		resumed, err := openSweepOut(out, man, force)
		if err != nil {
			return err
		}
		var kept map[string]sweep.Floor
		if resumed {
			kept = keptFloors(out)
		}
		return runSweep(ctx, e, g, cells, out, jobs, kept)
	})
	return c
}

// runSweep runs the cells not finished yet, then writes the tables and
// the page for every finished cell. kept are the latency floors of the
// last run of the same sweep in out, by workload.
func runSweep(ctx context.Context, e *env, g sweep.Grid, cells []sweep.Cell, out string, jobs int, kept map[string]sweep.Floor) error {
	var todo []int
	for i, c := range cells {
		if st, _ := sweep.CellState(filepath.Join(out, c.Name())); st != sweep.Done {
			todo = append(todo, i)
		}
	}
	logf, err := os.OpenFile(filepath.Join(out, sweep.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var logMu sync.Mutex
	bar := &sweep.Bar{W: e.stderr, TTY: e.tty, Now: e.now, Total: len(todo), Kept: len(cells) - len(todo)}
	bar.Start()
	start := e.now()
	results := sweep.Run(ctx, len(todo), jobs, func(ctx context.Context, i int) sweep.Result {
		c := cells[todo[i]]
		bar.Began()
		var buf bytes.Buffer
		err := runCell(ctx, e, g, c, filepath.Join(out, c.Name()), &buf)
		if err != nil {
			fmt.Fprintf(&buf, "%s: %v\n", c.Name(), err)
		}
		logMu.Lock()
		logf.Write(buf.Bytes())
		logMu.Unlock()
		return sweep.Result{Err: err}
	}, func(i int, r sweep.Result) { bar.Ended(r.Err != nil) })
	bar.Finish()

	t := sweep.Table{Grid: g, Failed: map[string]string{}}
	var interrupted error
	failed := 0
	for i, r := range results {
		if r.Err == nil {
			continue
		}
		name := cells[todo[i]].Name()
		if ctx.Err() != nil && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.Cause(ctx))) {
			interrupted = r.Err
			t.Failed[name] = "interrupted"
			continue
		}
		failed++
		t.Failed[name] = r.Err.Error()
		fmt.Fprintf(e.stderr, "sweep: cell %s failed: %v\n", name, r.Err)
	}
	for _, c := range cells {
		if st, s := sweep.CellState(filepath.Join(out, c.Name())); st == sweep.Done {
			t.Rows = append(t.Rows, sweep.NewRow(c, s))
		}
	}
	warned := 0
	for _, r := range t.Rows {
		if len(r.Warnings) > 0 {
			warned++
		}
	}
	if warned > 0 {
		fmt.Fprintf(e.stderr, "sweep: %d cells warned while they ran (an overload building up, say): see their summary.json \"warnings\" and %s\n", warned, filepath.Join(out, sweep.LogFile))
	}
	sweep.MarkFront(t.Rows)
	if interrupted == nil && ctx.Err() == nil {
		t.Floors = sweepFloors(e, g, cells, kept)
	} else {
		// Stopped: no new latency floor (timing a large workload's every
		// request takes a while, and the user asked to stop); the ones a
		// finished sweep left are kept, the rest come with the next run.
		for _, c := range cells {
			if f, ok := kept[c.Workload.Name]; ok && !slices.ContainsFunc(t.Floors, func(x sweep.Floor) bool { return x.Workload == f.Workload }) {
				t.Floors = append(t.Floors, f)
			}
		}
	}
	if err := writeTables(out, t); err != nil {
		return err
	}
	writeSweepTable(e, t.Rows)
	for _, f := range t.Floors {
		fmt.Fprintf(e.stdout, "floor of %s (pdhybrid floor): TTFT p50 %.1f ms, p99 %.1f ms; E2E p50 %.1f ms, p99 %.1f ms\n", f.Workload, f.TTFTP50, f.TTFTP99, f.E2EP50, f.E2EP99)
	}
	fmt.Fprintf(e.stderr, "sweep: %d cells (%d run now, %d kept) in %.1f s with --jobs %d; wrote %s (sweep.csv, sweep.json, index.html)\n",
		len(cells), len(todo), len(cells)-len(todo), e.now().Sub(start).Seconds(), jobs, out)
	switch {
	case interrupted != nil:
		fmt.Fprintf(e.stderr, "sweep: stopped: %d of %d cells finished; run the same command again to do the rest\n", len(t.Rows), len(cells))
		return context.Cause(ctx)
	case failed > 0:
		return fmt.Errorf("%d of %d cells failed (see above and %s)", failed, len(cells), filepath.Join(out, sweep.LogFile))
	}
	return nil
}

// writeTables writes sweep.csv, sweep.json and index.html, each whole or
// not at all.
func writeTables(out string, t sweep.Table) error {
	var csv, js, page bytes.Buffer
	if err := sweep.WriteCSV(&csv, t.Rows); err != nil {
		return err
	}
	if err := sweep.WriteJSON(&js, t); err != nil {
		return err
	}
	if err := sweep.WriteHTML(&page, "pdhybrid sweep "+filepath.Base(out), t); err != nil {
		return err
	}
	for name, b := range map[string][]byte{sweep.CSVFile: csv.Bytes(), sweep.JSONFile: js.Bytes(), sweep.HTMLFile: page.Bytes()} {
		p := filepath.Join(out, name)
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return err
		}
	}
	return nil
}

// writeSweepTable prints the headline of each cell on stdout.
func writeSweepTable(e *env, rows []sweep.Row) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cell\tTTFT p50 ms\tTTFT p99 ms\tE2E p50 ms\tTPOT p99 ms\tfailures\tdirect share\tPareto\trun\t")
	for _, r := range rows {
		front := ""
		if r.Pareto {
			front = "*"
		}
		run := "complete"
		if !r.Complete {
			why, _, _ := strings.Cut(r.StopReason, ":")
			run = "stopped (" + why + ")"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.3f\t%s\t%s\t\n", r.Cell, r.TTFTP50Ms, r.TTFTP99Ms, r.E2EP50Ms, r.TPOTP99Ms, r.Failures, r.DirectShare, front, run)
	}
	tw.Flush()
}
