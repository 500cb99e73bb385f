package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report"
)

func reportCmd(e *env) *cobra.Command {
	var out, format, title string
	var compare bool
	var tailQ, bodyQ float64
	c := &cobra.Command{
		Use:   "report [flags] RUN_DIR... (--out DIR | --compare)",
		Short: "compare runs: HTML report with charts, terminal tables",
		Long: `Compare runs written by 'pdhybrid sim --out' or 'pdhybrid bench --out'.
The first run is the baseline: every delta is against it.

Without --compare, write DIR/index.html: one self-contained page (inline
SVG charts, no network fetches) with the headline table, failures by cause,
TTFT density (linear body and log full range), latency CDF and log
survival, execution-mode mix, per-mode TTFT, TTFT tail attribution by
execution mode, per-worker load by requests and by token work, cache hit
rate by turn, uncached-token ECDF, decode-worker changes per session and
KV occupancy over time. Only completed requests enter latency figures.

With --compare, print the headline, failure-cause and execution-mode tables
(from summary.json alone) in --format text, csv or json. A run that stopped
early (interrupted) is labelled incomplete with its stop reason; a run
without any request is an error.

A RUN_DIR holds metrics.jsonl and/or summary.json; a 'pdhybrid bench'
output folder stands for the run folders inside it. Flags may follow the
run directories; everything after -- is a run directory. See
docs/reports.md for what each chart answers.`,
		Args: cobra.ArbitraryArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&out, "out", "report", "write index.html into `dir` (created if missing)")
	fs.BoolVar(&compare, "compare", false, "print comparison tables to stdout instead of writing HTML")
	fs.StringVar(&format, "format", "text", "with --compare: table `format`: text (aligned), csv (one row per metric and run) or json")
	fs.Float64Var(&tailQ, "tail-quantile", 99, "tail attribution takes completed requests with TTFT ≥ this `percentile` of their run, in (0, 100)")
	fs.Float64Var(&bodyQ, "body-quantile", 95, "the linear TTFT density spans 0 to this pooled `percentile` of TTFT, in (0, 100]")
	fs.StringVar(&title, "title", "", "page `title` (default: \"pdhybrid report: A vs B\")")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, dirs []string) error {
		ck := newChecks(c)
		if len(dirs) == 0 {
			ck.fail("give at least one RUN_DIR")
		}
		ck.oneOf("format", "text", "csv", "json")
		ck.num("tail-quantile", above(0).upTo(100).openTop().is("a percentile"))
		ck.num("body-quantile", above(0).upTo(100).is("a percentile"))
		for _, n := range []string{"out", "tail-quantile", "body-quantile", "title"} {
			ck.only(n, !compare, "to the HTML report, not with --compare")
		}
		ck.only("format", compare, "with --compare (the HTML report has one format)")
		if err := ck.err(); err != nil {
			return err
		}
		runDirs, err := report.Expand(dirs)
		if err != nil {
			return err
		}
		if compare {
			names := make([]string, len(runDirs))
			sums := make([]metrics.Summary, len(runDirs))
			for i, d := range runDirs {
				if err := ctx.Err(); err != nil {
					return err
				}
				if names[i], sums[i], err = report.LoadSummary(d); err != nil {
					return err
				}
				if sums[i].Requests == 0 {
					return emptyRun(d, sums[i])
				}
			}
			return report.WriteTable(e.stdout, format, report.DistinctNames(names, runDirs), sums)
		}
		for _, d := range runDirs {
			fmt.Fprintf(e.stderr, "reading %s\n", d)
		}
		runs, err := report.LoadAll(runDirs)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Summary.Requests == 0 {
				return emptyRun(r.Dir, r.Summary)
			}
			if r.Summary.Stopped() {
				fmt.Fprintf(e.stderr, "note: %s is incomplete (%s): its figures cover only the requests that ended before the stop\n", r.Name, r.Summary.StopReason)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		opt := report.Options{Title: title, TailQuantile: tailQ, BodyQuantile: bodyQ}
		if err := report.WriteHTMLOptions(out, runs, opt); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, filepath.Join(out, "index.html"))
		return nil
	})
	return c
}

// emptyRun is the error for a run folder whose summary counts no request.
func emptyRun(dir string, s metrics.Summary) error {
	if s.Stopped() {
		return fmt.Errorf("%s: the run stopped (%s) before any request ended: nothing to report", dir, s.StopReason)
	}
	return fmt.Errorf("%s: the run has no requests: nothing to report", dir)
}
