package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/report"
)

func runReport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "report", "pdhybrid report [flags] RUN_DIR... (--out DIR | --compare)",
		`Compare runs written by 'pdhybrid sim --out' or 'pdhybrid bench --out'.
The first run is the baseline: every delta is against it.

Without --compare, write DIR/index.html: one self-contained page (inline
SVG charts, no network fetches) with the headline table, failures by cause,
TTFT density (linear body and log full range), latency CDF and log
survival, execution-mode mix, per-mode TTFT, TTFT tail attribution by
execution mode, per-worker load by requests and by token work, cache hit
rate by turn, uncached-token ECDF, decode-worker changes per session and
KV occupancy over time. Only completed requests enter latency figures.

With --compare, print the headline, failure-cause and execution-mode tables
(from summary.json alone) in --format text, csv or json.

A RUN_DIR holds metrics.jsonl and/or summary.json; a 'pdhybrid bench'
output folder stands for the run folders inside it. Flags may follow the
run directories. See docs/reports.md for what each chart answers.`)
	out := fs.String("out", "report", "write index.html into `dir` (created if missing)")
	compare := fs.Bool("compare", false, "print comparison tables to stdout instead of writing HTML")
	format := fs.String("format", "text", "table `format` for --compare: text (aligned), csv (one row per metric and run) or json")
	tailQ := fs.Float64("tail-quantile", 99, "tail attribution takes completed requests with TTFT ≥ this `percentile` of their run (0–100, exclusive)")
	bodyQ := fs.Float64("body-quantile", 95, "the linear TTFT density spans 0 to this pooled `percentile` of TTFT (0–100]")
	title := fs.String("title", "", "page `title` (default: \"pdhybrid report: A vs B\")")
	dirs, err := reportParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		fs.Usage()
		return usageError{"report: give at least one RUN_DIR"}
	}
	switch *format {
	case "text", "csv", "json":
	default:
		return usageError{fmt.Sprintf("report: --format %q: want text, csv or json", *format)}
	}
	if *tailQ <= 0 || *tailQ >= 100 {
		return usageError{fmt.Sprintf("report: --tail-quantile %g: want a percentile in (0, 100)", *tailQ)}
	}
	if *bodyQ <= 0 || *bodyQ > 100 {
		return usageError{fmt.Sprintf("report: --body-quantile %g: want a percentile in (0, 100]", *bodyQ)}
	}
	runDirs, err := report.Expand(dirs)
	if err != nil {
		return err
	}

	if *compare {
		names := make([]string, len(runDirs))
		sums := make([]metrics.Summary, len(runDirs))
		for i, d := range runDirs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if names[i], sums[i], err = report.LoadSummary(d); err != nil {
				return err
			}
		}
		return report.WriteTable(e.stdout, *format, report.UniqueNames(names), sums)
	}

	for _, d := range runDirs {
		fmt.Fprintf(e.stderr, "reading %s\n", d)
	}
	runs, err := report.LoadAll(runDirs)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	opt := report.Options{Title: *title, TailQuantile: *tailQ, BodyQuantile: *bodyQ}
	if err := report.WriteHTMLOptions(*out, runs, opt); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, filepath.Join(*out, "index.html"))
	return nil
}

// reportParseArgs lets flags follow positional arguments
// (`report A B --out DIR`), which the standard flag package stops at.
// Everything after a literal "--" is positional.
func reportParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse consumed a "--" iff the arguments it left are fewer than
		// what followed the last flag; detect it by looking just before rest.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
