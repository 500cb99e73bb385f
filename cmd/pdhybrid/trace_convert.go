package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
)

// maxListed caps how many skipped records or problems a command lists; the
// rest are counted.
const maxListed = 20

// sourceFlags are the flags shared by the commands that read any source
// format (convert, and stats/validate when given --from).
type sourceFlags struct {
	from      *string
	blockSize *int
	arrival   *string
	stagger   *float64
	rate      *float64
	seed      *uint64
	shared    *bool
	sort      *bool
}

func addSourceFlags(fs interface {
	String(string, string, string) *string
	Int(string, int, string) *int
	Float64(string, float64, string) *float64
	Uint64(string, uint64, string) *uint64
	Bool(string, bool, string) *bool
}, fromDefault, fromHelp string) *sourceFlags {
	return &sourceFlags{
		from:      fs.String("from", fromDefault, fromHelp),
		blockSize: fs.Int("block-size", 0, "tokens per hash id; 0 = the format's own (weka: from the files, mooncake 512, bailian 16, seed 24, canonical: header)"),
		arrival:   fs.String("arrival", "stagger", "weka session arrival process: stagger (fixed gap) or poisson"),
		stagger:   fs.Float64("stagger", 10, "weka: seconds between session starts with --arrival stagger"),
		rate:      fs.Float64("rate", 0.1, "weka: session arrival rate in sessions/s with --arrival poisson"),
		seed:      fs.Uint64("seed", 1, "weka: random seed of the poisson arrival process"),
		shared:    fs.Bool("shared-prefix", false, "weka: give the first floor((tool_tokens+system_tokens)/block) blocks of every session common ids, modelling one shared system/tool prompt"),
		sort:      fs.Bool("sort", false, "bailian/seed/canonical: buffer the file in memory and sort it by timestamp if it is out of order (otherwise out-of-order input is an error)"),
	}
}

func (sf *sourceFlags) options(strict bool) convert.Options {
	o := convert.Options{From: *sf.from, BlockSize: *sf.blockSize, Strict: strict, Sort: *sf.sort}
	o.Weka.Arrival = *sf.arrival
	o.Weka.Stagger = *sf.stagger
	o.Weka.Rate = *sf.rate
	o.Weka.Seed = *sf.seed
	o.Weka.SharedPrefix = *sf.shared
	return o
}

func runTraceConvert(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "convert", "pdhybrid trace convert --from FORMAT [flags] PATH",
		`Convert a trace to the canonical JSONL format (header line with the block
size, then one request per line in global timestamp order). FORMAT is weka
(a directory or file of kv-cache-tester session JSONs), mooncake (FAST'25
JSONL; sessions are inferred from prefix chains), bailian or seed (the
canonical schema with 16- or 24-token blocks: validated pass-through).
Skipped records are counted and listed on stderr, never dropped silently.
See docs/traces.md for every rule.`)
	sf := addSourceFlags(fs, "", "source format: weka, mooncake, bailian, seed or canonical (required)")
	out := fs.String("out", "-", "output file; - for stdout")
	strict := fs.Bool("strict", false, "fail (and write nothing) if any record would be skipped")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"convert: need exactly one PATH"}
	}
	if *sf.from == "" {
		return usageError{"convert: --from is required (weka, mooncake, bailian, seed)"}
	}
	if _, ok := convert.DefaultBlockSize[*sf.from]; !ok {
		return usageError{fmt.Sprintf("convert: unknown --from %q (weka, mooncake, bailian, seed, canonical)", *sf.from)}
	}
	if *sf.arrival != "stagger" && *sf.arrival != "poisson" {
		return usageError{fmt.Sprintf("convert: --arrival %q: expected stagger or poisson", *sf.arrival)}
	}
	st, err := convert.Open(fs.Arg(0), sf.options(*strict))
	if err != nil {
		return err
	}
	var n int
	err = writeOutput(e, *out, func(w io.Writer) error {
		var werr error
		n, werr = writeStream(ctx, st, w)
		return werr
	})
	reportStream(e.stderr, st)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %d requests (block size %d) to %s\n", n, st.Header.BlockSize, *out)
	return nil
}

func writeStream(ctx context.Context, st *convert.Stream, w io.Writer) (int, error) {
	tw, err := trace.NewWriter(w, st.Header)
	if err != nil {
		return 0, err
	}
	n := 0
	err = st.Run(func(r *trace.Request) error {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		n++
		return tw.Write(r)
	})
	if err != nil {
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
