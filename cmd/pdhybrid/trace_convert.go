package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
)

// maxListed caps how many skipped records or problems a command lists; the
// rest are counted.
const maxListed = 20

func traceCmd(e *env) *cobra.Command {
	return group("trace", "trace toolkit: convert, stats, sample, synth, validate",
		`The trace toolkit: convert public traces (WEKA Claude Code sessions,
Mooncake, Bailian/seed) to the canonical JSONL format, summarise, sample,
generate and validate them. docs/traces.md describes the format and every
conversion rule.`,
		gracefulStop(convertCmd(e)), gracefulStop(statsCmd(e)), sampleCmd(e), synthCmd(e), gracefulStop(validateCmd(e)))
}

// sourceFlags are the flags shared by the commands that read any source
// format (convert, and stats when given --from or a raw file).
type sourceFlags struct {
	from      string
	blockSize int
	arrival   string
	stagger   float64
	rate      float64
	seed      uint64
	shared    bool
	sort      bool
}

func (sf *sourceFlags) register(fs *pflag.FlagSet, fromHelp string) {
	fs.StringVar(&sf.from, "from", "", fromHelp)
	fs.IntVar(&sf.blockSize, "block-size", 0, "`tokens` per hash id; 0 = the format's own (weka: from the files, mooncake 512, bailian 16, seed 24, canonical: the header, realrun: the run's meta.json)")
	fs.StringVar(&sf.arrival, "arrival", "stagger", "weka: session arrival `process`: stagger (--stagger apart) or poisson (--rate)")
	fs.Float64Var(&sf.stagger, "stagger", 10, "weka with --arrival stagger: `seconds` between session starts")
	fs.Float64Var(&sf.rate, "rate", 0.1, "weka with --arrival poisson: session arrival rate in `sessions/s`")
	fs.Uint64Var(&sf.seed, "seed", 1, "weka with --arrival poisson: random `seed` of the arrival process")
	fs.BoolVar(&sf.shared, "shared-prefix", false, "weka: give the first floor((tool_tokens+system_tokens)/block) blocks of every session common ids, modelling one shared system/tool prompt")
	fs.BoolVar(&sf.sort, "sort", false, "bailian/seed/canonical: buffer the file in memory and sort it by timestamp if it is out of order (otherwise out-of-order input is an error)")
}

func formats() []string {
	var fs []string
	for f := range convert.DefaultBlockSize {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	return fs
}

// check validates the source flags for format from (already resolved).
func (sf *sourceFlags) check(ck *checks, from string) {
	if _, ok := convert.DefaultBlockSize[from]; !ok {
		ck.fail("--from %q: want one of %s", from, strings.Join(formats(), ", "))
		return
	}
	ck.num("block-size", between(1, 1<<20).orZero("the format's own").is("a number of tokens"))
	ck.oneOf("arrival", "stagger", "poisson")
	ck.num("stagger", between(0, 1e9).is("a number of seconds"))
	ck.num("rate", above(0).upTo(1e6).is("a rate in sessions/s"))
	weka := from == "weka"
	for _, n := range []string{"arrival", "shared-prefix"} {
		ck.only(n, weka, "to --from weka (the other formats carry their own timestamps)")
	}
	ck.only("stagger", weka && sf.arrival == "stagger", "to --from weka with --arrival stagger")
	ck.only("rate", weka && sf.arrival == "poisson", "to --from weka with --arrival poisson (the default arrival is stagger: sessions --stagger 10 s apart)")
	ck.only("seed", weka && sf.arrival == "poisson", "to --from weka with --arrival poisson")
	ck.only("sort", from == "bailian" || from == "seed" || from == "canonical", "to --from bailian, seed or canonical (weka and mooncake are sorted by the converter)")
}

func (sf *sourceFlags) options(strict bool) convert.Options {
	o := convert.Options{From: sf.from, BlockSize: sf.blockSize, Strict: strict, Sort: sf.sort}
	o.Weka.Arrival = sf.arrival
	o.Weka.Stagger = sf.stagger
	o.Weka.Rate = sf.rate
	o.Weka.Seed = sf.seed
	o.Weka.SharedPrefix = sf.shared
	return o
}

func convertCmd(e *env) *cobra.Command {
	var sf sourceFlags
	var out string
	var strict bool
	c := &cobra.Command{
		Use:   "convert --from FORMAT [flags] PATH",
		Short: "convert weka, mooncake, bailian, seed or realrun traces to the canonical format",
		Long: `Convert a trace to the canonical JSONL format (header line with the block
size, then one request per line in global timestamp order). FORMAT is weka
(a directory or file of kv-cache-tester session JSONs), mooncake (FAST'25
JSONL; sessions are inferred from prefix chains), bailian or seed (the
canonical schema with 16- or 24-token blocks: validated pass-through) or
realrun (a real vLLM run's per-request CSV beside its meta.json: arrivals and
lengths from the file, prompt identity rebuilt from the client's shared-prefix
workload, the assumptions in the header's note; docs/fidelity.md).
Skipped records are counted and listed on stderr, never dropped silently;
a conversion that yields no request at all is an error (and writes no file).
See docs/traces.md for every rule.`,
		Args: onePath,
	}
	fs := c.Flags()
	fs.SortFlags = false
	sf.register(fs, "source `format`: weka, mooncake, bailian, seed, canonical or realrun (required)")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	fs.BoolVar(&strict, "strict", false, "fail (and write nothing) if any record would be skipped")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, args []string) error {
		ck := newChecks(c)
		if sf.from == "" {
			return usagef("--from is required: one of %s", strings.Join(formats(), ", "))
		}
		sf.check(ck, sf.from)
		if err := ck.err(); err != nil {
			return err
		}
		st, err := convert.Open(args[0], sf.options(strict))
		if err != nil {
			return err
		}
		var n int
		err = writeOutput(e, out, func(w io.Writer) error {
			var werr error
			if n, werr = writeStream(ctx, st, w); werr == nil && n == 0 {
				werr = fmt.Errorf("%s: no request converted (%d records skipped): nothing written", args[0], len(st.Skips))
			}
			return werr
		})
		reportStream(e.stderr, st)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %d requests (block size %d) to %s\n", n, st.Header.BlockSize, out)
		return nil
	})
	return c
}

// writeStream writes st to w as a canonical trace. The header is written
// only with the first request, so an empty conversion writes nothing.
func writeStream(ctx context.Context, st *convert.Stream, w io.Writer) (int, error) {
	var tw *trace.Writer
	n := 0
	err := st.Run(func(r *trace.Request) error {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if tw == nil {
			var err error
			if tw, err = trace.NewWriter(w, st.Header); err != nil {
				return err
			}
		}
		n++
		return tw.Write(r)
	})
	if err != nil || tw == nil {
		return n, err
	}
	return n, tw.Flush()
}

// reportStream prints the conversion's notes and skipped records to w.
func reportStream(w io.Writer, st *convert.Stream) {
	for _, n := range st.Notes {
		fmt.Fprintln(w, n)
	}
	if len(st.Skips) == 0 {
		fmt.Fprintln(w, "skipped 0 records")
		return
	}
	fmt.Fprintf(w, "skipped %d records:\n", len(st.Skips))
	for i, s := range st.Skips {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more\n", len(st.Skips)-maxListed)
			break
		}
		fmt.Fprintf(w, "  %s: %s\n", s.Where, s.Reason)
	}
}
