package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/replay"
	"github.com/pdhybrid/pdhybrid/internal/report"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

type replayFlags struct {
	url, trace, out, goodput string
	blockSize, concurrency   int
	timeScale, timeout       float64
	force                    bool
}

func replayCmd(e *env) *cobra.Command {
	var f replayFlags
	c := &cobra.Command{
		Use:   "replay --url URL --trace FILE [flags]",
		Short: "replay a trace against a live gateway (or any SGLang /generate endpoint) over HTTP",
		Long: `Send a canonical trace's requests to a live endpoint as the simulator would:
each session closed-loop (a turn goes when its trace time has come, its previous
turn has ended and its think time has passed), streamed /generate with the
session_id, prompts synthesised from the hash ids (shared blocks share tokens,
so the workers' prefix caches see what the trace says they share).

With --time-scale S, trace time runs S times faster and every measured time
is multiplied back by S: against workers emulated with the same --time-scale
(pdhybrid up, pdhybrid worker), the figures are in trace seconds and compare
with a simulated run of the same trace.

Writes DIR/metrics.jsonl (one line per request, failures with their cause)
and DIR/summary.json, which pdhybrid report reads as it reads a simulated run;
prints the summary table. SIGINT stops the replay and writes what ended,
marked "complete": false.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.url, "url", "", "base `url` of the gateway (required), e.g. http://127.0.0.1:8080")
	fs.StringVar(&f.trace, "trace", "", "canonical trace `file` to replay (required); - reads standard input")
	fs.IntVar(&f.blockSize, "block-size", 0, "`tokens` per hash id for a file without a header line; 0 = take it from the header")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "trace time is divided by this `factor` and measured times multiplied by it; match the workers' --time-scale")
	fs.IntVar(&f.concurrency, "max-concurrency", 0, "`requests` in flight at most; 0 = no limit")
	fs.Float64Var(&f.timeout, "request-timeout", 600, "per-request timeout in wall-clock `seconds`; 0 = none")
	fs.StringVar(&f.goodput, "goodput", defaultGoodput, "goodput `SLOs` in milliseconds (trace time), as for pdhybrid sim")
	fs.StringVar(&f.out, "out", "", "run `folder` to write metrics.jsonl and summary.json into (default: none, table only)")
	fs.BoolVar(&f.force, "force", false, "replace the run files a previous run left in --out")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.num("time-scale", timeScaleRange)
		ck.num("max-concurrency", between(0, 1e6).orZero("no limit").is("a number of requests"))
		ck.num("request-timeout", between(0, 86400).orZero("none").is("a number of seconds"))
		ck.num("block-size", between(0, 1<<20).orZero("the header's").is("a number of tokens"))
		if err := ck.err(); err != nil {
			return err
		}
		if f.url == "" || f.trace == "" {
			return usagef("replay needs --url and --trace")
		}
		if u, err := url.Parse(f.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--url %q: want http://HOST:PORT", f.url)
		}
		in, err := loadReplay(e, &f)
		if err != nil {
			return err
		}
		return runReplay(ctx, e, &f, in.hdr, in.reqs, in.slo)
	})
	return c
}

// replayInput is what a replay needs before it starts.
type replayInput struct {
	hdr  trace.Header
	reqs []trace.Request
	slo  metrics.SLO
}

// loadReplay checks the goodput, reads the trace and readies --out, before
// any request is sent (replay) or any process started (up).
func loadReplay(e *env, f *replayFlags) (*replayInput, error) {
	slo, err := parseGoodput(f.goodput)
	if err != nil {
		return nil, usagef("--goodput: %v", err)
	}
	hdr, reqs, err := readTraceFile(e, f.trace, f.blockSize)
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, usagef("--trace %s: holds no requests", f.trace)
	}
	if f.out != "" {
		if _, err := prepareOut(f.out, f.force, outRun); err != nil {
			return nil, err
		}
	}
	return &replayInput{hdr, reqs, slo}, nil
}

func readTraceFile(e *env, path string, blockSize int) (trace.Header, []trace.Request, error) {
	if path == "-" {
		return trace.ReadAllChecked(e.stdin, "standard input", blockSize)
	}
	fh, err := os.Open(path)
	if err != nil {
		return trace.Header{}, nil, err
	}
	defer fh.Close()
	return trace.ReadAllChecked(fh, path, blockSize)
}

func runReplay(ctx context.Context, e *env, f *replayFlags, hdr trace.Header, reqs []trace.Request, slo metrics.SLO) error {
	col := metrics.NewCollector(slo)
	var lines *os.File
	var enc *json.Encoder
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
		var err error
		if lines, err = os.Create(filepath.Join(f.out, "metrics.jsonl")); err != nil {
			return err
		}
		defer lines.Close()
		enc = json.NewEncoder(lines)
	}
	var mu sync.Mutex
	var werr error
	lastShown := e.now()
	start := e.now()
	cfg := replay.Config{URL: f.url, BlockSize: hdr.BlockSize, TimeScale: f.timeScale, Concurrency: f.concurrency, TimeoutS: f.timeout,
		Progress: func(done, total int) {
			if now := e.now(); now.Sub(lastShown) >= 2*time.Second || done == total {
				lastShown = now
				fmt.Fprintf(e.stderr, "replay: %d/%d requests ended, %.0f s\n", done, total, now.Sub(start).Seconds())
			}
		}}
	var line metrics.RecordLine
	err := replay.Run(ctx, cfg, reqs, func(r *metrics.Record) {
		mu.Lock()
		defer mu.Unlock()
		col.Add(r)
		if enc != nil && werr == nil {
			line.Set(r)
			werr = enc.Encode(&line)
		}
	})
	if werr != nil {
		return fmt.Errorf("--out %s: %w", f.out, werr)
	}
	sum := col.Summary(e.now().Sub(start).Seconds() * f.timeScale)
	sum.Complete = err == nil
	if err != nil {
		sum.StopReason = "interrupted"
	}
	sum.Date, sum.Version = start.Format(time.RFC3339), versionString()
	sum.Workload = "trace " + f.trace + " (live replay of " + f.url + ")"
	sum.TimeScale = f.timeScale
	if f.concurrency > 0 {
		sum.MaxConcurrency = &f.concurrency
	}
	if f.out != "" {
		b, merr := json.MarshalIndent(sum, "", "  ")
		if merr == nil {
			merr = os.WriteFile(filepath.Join(f.out, "summary.json"), append(b, '\n'), 0o644)
		}
		if merr != nil {
			return merr
		}
	}
	if terr := report.WriteTable(e.stdout, "text", []string{"live"}, []metrics.Summary{sum}); terr != nil {
		return terr
	}
	if err != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintf(e.stderr, "replay: stopped after %d of %d requests ended; summary marked \"complete\": false\n", sum.Requests, len(reqs))
	}
	if err == nil {
		err = noneCompleted(&sum)
	}
	return err
}
