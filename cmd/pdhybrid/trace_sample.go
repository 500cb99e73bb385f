package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/sample"
)

func sampleCmd(e *env) *cobra.Command {
	var first, minTurns, maxIn, blockSize int
	var rate, duration float64
	var seed uint64
	var long, out string
	c := &cobra.Command{
		Use:   "sample [flags] PATH",
		Short: "take a deterministic subset of sessions",
		Long: `Take a deterministic subset of a canonical trace's sessions and write it as a
canonical trace. Sub-agent sessions travel with the session that spawned
them (one "family"). Filters apply in this order: --min-turns, --duration,
--max-input-len with --long drop, --rate, --first. PATH is read twice
(two streaming passes), so it must be a file, not a pipe. A sample that
keeps no request is an error (and writes no file).`,
		Args: onePath,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.IntVar(&first, "first", 0, "keep the first N session `families` in order of first appearance; 0 = all")
	fs.Float64Var(&rate, "rate", 1, "keep each session family with this `probability` in (0, 1], decided by hashing its session id with --seed")
	fs.Uint64Var(&seed, "seed", 1, "`seed` for --rate")
	fs.IntVar(&minTurns, "min-turns", 0, "keep families whose top-level session has at least this many `turns`; 0 = all")
	fs.Float64Var(&duration, "duration", 0, "keep families whose first request is within this many `seconds` of the trace's first request; 0 = no limit")
	fs.IntVar(&maxIn, "max-input-len", 0, "longest allowed input_length in `tokens`; 0 = no limit (see --long)")
	fs.StringVar(&long, "long", "drop", "with --max-input-len: what to do with families that exceed it: drop (the whole family) or truncate (cut input_length and hash_ids of the long requests)")
	fs.IntVar(&blockSize, "block-size", 0, "`tokens` per hash id for a file without header line; 0 = the header's")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, args []string) error {
		ck := newChecks(c)
		ck.num("first", between(1, 1e12).orZero("all").is("a number of families"))
		ck.num("rate", above(0).upTo(1).is("a probability"))
		ck.num("min-turns", between(1, 1e9).orZero("all").is("a number of turns"))
		ck.num("duration", above(0).upTo(1e12).orZero("no limit").is("a number of seconds"))
		ck.num("max-input-len", between(1, 1<<30).orZero("no limit").is("a number of tokens"))
		ck.num("block-size", between(1, 1<<20).orZero("the header's").is("a number of tokens"))
		ck.oneOf("long", "drop", "truncate")
		ck.only("long", maxIn > 0, "with --max-input-len")
		ck.only("seed", rate < 1, "with --rate below 1")
		if args[0] == "-" {
			ck.fail("PATH -: sample reads its input twice; give a file, not standard input")
		}
		if err := ck.err(); err != nil {
			return err
		}
		opt := sample.Options{FirstN: first, Rate: rate, Seed: seed, MinTurns: minTurns,
			Duration: duration, MaxInputLen: maxIn, Long: long}
		path := args[0]
		open := func() (*trace.Reader, io.Closer, error) {
			f, err := os.Open(path)
			if err != nil {
				return nil, nil, err
			}
			rd, err := trace.NewReader(f, path, blockSize)
			if err != nil {
				f.Close()
				return nil, nil, err
			}
			return rd, f, nil
		}
		rd, cl, err := open()
		if err != nil {
			return err
		}
		plan, err := sample.NewPlan(rd, opt)
		cl.Close()
		if err != nil {
			return err
		}
		if rd, cl, err = open(); err != nil {
			return err
		}
		defer cl.Close()
		h := rd.Header()
		if blockSize > 0 {
			h.BlockSize = blockSize
		}
		if h.Note != "" {
			h.Note += "; "
		}
		h.Note += fmt.Sprintf("sampled first=%d rate=%g seed=%d min_turns=%d duration=%g max_input_len=%d long=%s",
			first, rate, seed, minTurns, duration, maxIn, long)
		var rep sample.Report
		err = writeOutput(e, out, func(w io.Writer) error {
			tw, err := trace.NewWriter(w, h)
			if err != nil {
				return err
			}
			if rep, err = plan.Apply(rd, tw); err == nil && rep.RequestsOut == 0 {
				err = fmt.Errorf("%s: the sample keeps no request (of %d): nothing written", path, rep.RequestsIn)
			}
			return err
		})
		if rep.RequestsIn > 0 {
			printSampleReport(e.stderr, rep)
		}
		if err != nil {
			return err
		}
		return ctx.Err()
	})
	return c
}

func printSampleReport(w io.Writer, r sample.Report) {
	fmt.Fprintf(w, "kept %d of %d sessions (%d of %d families), %d of %d requests\n",
		r.SessionsOut, r.SessionsIn, r.FamiliesOut, r.FamiliesIn, r.RequestsOut, r.RequestsIn)
	fmt.Fprintf(w, "families dropped: %d by --min-turns, %d by --duration, %d by --max-input-len (drop; %d requests), %d by --rate, %d by --first\n",
		r.DroppedMinTurns, r.DroppedDuration, r.DroppedLong, r.DroppedLongReqs, r.DroppedRate, r.DroppedFirstN)
	if r.TruncatedRequests > 0 {
		fmt.Fprintf(w, "truncated %d requests in %d sessions to --max-input-len (%d hash ids cut)\n",
			r.TruncatedRequests, r.TruncatedSessions, r.TruncatedBlocksCut)
	}
}
