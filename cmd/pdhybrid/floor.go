package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// floorCmd prints a workload's latency floor: what no mechanism can beat
// on the engine model, so a target can be checked against physics before
// anyone tunes a router for it.
func floorCmd(e *env) *cobra.Command {
	var f simFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "floor [flags]",
		Short: "the latency floor of a workload: every request alone on an idle GPU with an ideal cache",
		Long: `Print the TTFT and end-to-end latency floor of a workload (mean, p50, p90,
p99 in seconds) on the engine model: each request served alone on an idle
GPU whose prefix cache holds everything it could (any block another session
sends anywhere in the workload, the session's earlier prompts, and its
previous turn's output where the prompt continues it). Its TTFT floor is
the chunked prefill of the rest; its e2e floor adds one decode step at
batch one per further output token. Queueing, cache misses, KV transfers
and shared batches only add to it, so no mechanism of 'sim' is below the
floor at any percentile (tests hold every mechanism to that). Prompts over
the context length are skipped, as the simulator fails them.

The workload and profile flags are sim's. The floor reads the workload
twice, so --trace takes a file, not standard input.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	f.registerWorkload(fs)
	fs.Uint64Var(&f.seed, "seed", synth.DefaultAgentic().Seed, "random `seed` of the built-in workload; only without --trace")
	f.registerProfile(fs)
	fs.IntVar(&f.chunk, "chunk-tokens", 0, "chunked-prefill budget per scheduler step, in `tokens`; 0 = the profile's (SGLang's default: 8192)")
	fs.IntVar(&f.maxInput, "max-input-len", 0, "context length in `tokens`: longer requests are skipped, as sim fails them; 0 = the model's max context")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		f.checkWorkload(ck)
		ck.num("chunk-tokens", between(1, 1<<22).is("a number of tokens").orZero("the profile's"))
		ck.num("max-input-len", atLeast(1).upTo(1<<30).orZero("the model's max context").is("a number of tokens"))
		if f.trace == "-" {
			ck.fail("--trace -: the floor reads the workload twice; give a file")
		}
		if ck.set("profile") {
			ck.only("model", false, "without --profile (the profile names its model)")
		}
		f.mc.check(ck)
		if err := ck.err(); err != nil {
			return err
		}
		prof, err := f.loadProfile()
		if err != nil {
			return err
		}
		if f.maxInput > prof.Model.MaxContext {
			return usagef("--max-input-len %d: longer than %s's context of %d tokens; want 0 (the context) or a number of tokens in [1, %d]", f.maxInput, prof.Model.Name, prof.Model.MaxContext, prof.Model.MaxContext)
		}
		st, desc, err := workloadFloor(e, &f, prof, f.chunk, f.maxInput)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Workload string `json:"workload"`
				Profile  string `json:"profile"`
				sim.FloorStats
			}{desc, prof.Name, st})
		}
		fmt.Fprintf(e.stdout, "latency floor of %s on %s: %d requests (%d skipped over the context), %.1f%% of prompt tokens uncached\n\n",
			desc, prof.Name, st.Requests, st.Skipped, 100*st.Uncached)
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tmean\tp50\tp90\tp99\t")
		for _, q := range []struct {
			name string
			v    sim.Quartet
		}{{"TTFT floor (s)", st.TTFT}, {"e2e floor (s)", st.E2E}} {
			fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%.4g\t%.4g\t\n", q.name, q.v.Mean, q.v.P50, q.v.P90, q.v.P99)
		}
		return tw.Flush()
	})
	return c
}

// workloadFloor is the latency floor of the flags' workload on prof (sim's
// chunk and context length; 0 = the profile's), opening the workload twice,
// and the workload's description.
func workloadFloor(e *env, f *simFlags, prof *model.Profile, chunk, maxInput int) (sim.FloorStats, string, error) {
	var closers []func() error
	defer func() {
		for _, cl := range closers {
			cl()
		}
	}()
	desc := ""
	fp := &floorProgress{e: e, start: e.now()}
	fp.last = fp.start
	open := func() (sim.Source, error) {
		w, err := openWorkload(e, f)
		if err != nil {
			return nil, err
		}
		closers = append(closers, w.close)
		desc = w.desc
		fp.pass++
		return &floorSource{watchSource: w.src, p: fp, chk: trace.NewChecker(w.src.Header().BlockSize)}, nil
	}
	st, err := sim.Floor(open, prof, chunk, maxInput)
	fp.finish()
	return st, desc, err
}

// floorProgress says how far the latency floor is (it reads the workload
// and times every request alone, which takes a while on a large trace):
// a line at the progress period, so a long floor is never silence.
type floorProgress struct {
	e           *env
	start, last time.Time
	pass        int
	n           int64
	printed     bool
}

func (p *floorProgress) request() {
	p.n++
	if p.n%256 != 0 {
		return
	}
	now := p.e.now()
	period := 10 * time.Second
	if p.e.tty {
		period = time.Second
	}
	if now.Sub(p.last) < period {
		return
	}
	p.last, p.printed = now, true
	line := fmt.Sprintf("latency floor: %d requests timed alone (pass %d over the workload), %s elapsed", p.n, p.pass, now.Sub(p.start).Round(time.Second))
	if p.e.tty {
		fmt.Fprintf(p.e.stderr, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.e.stderr, line)
	}
}

func (p *floorProgress) finish() {
	if p.printed && p.e.tty {
		fmt.Fprintln(p.e.stderr)
	}
}

// floorSource counts the requests the floor reads and holds each to the
// checks of trace validate and sim, so a floor is never computed from a
// trace sim would refuse (a timestamp of 1e308, a negative length).
type floorSource struct {
	*watchSource
	p   *floorProgress
	chk *trace.Checker
}

func (s *floorSource) Next(r *trace.Request) error {
	if err := s.watchSource.Next(r); err != nil {
		return err
	}
	if errs := s.chk.Check(r, s.Line()); len(errs) > 0 {
		e := *errs[0]
		e.File = s.File()
		return &e
	}
	s.chk.Accept(r, s.Line())
	s.p.request()
	return nil
}
