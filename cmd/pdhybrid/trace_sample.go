package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/sample"
)

func runTraceSample(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sample", "pdhybrid trace sample [flags] PATH",
		`Take a deterministic subset of a canonical trace's sessions and write it as a
canonical trace. Sub-agent sessions travel with the session that spawned
them (one "family"). Filters apply in this order: --min-turns, --duration,
--max-input-len with --long drop, --rate, --first. PATH is read twice
(two streaming passes), so it must be a file, not a pipe.`)
	first := fs.Int("first", 0, "keep the first N session families in order of first appearance; 0 = all")
	rate := fs.Float64("rate", 1, "keep each session family with this probability (0..1), decided by hashing its session id with --seed")
	seed := fs.Uint64("seed", 1, "seed for --rate")
	minTurns := fs.Int("min-turns", 0, "keep families whose top-level session has at least this many turns")
	duration := fs.Float64("duration", 0, "keep families whose first request is within this many seconds of the trace's first request; 0 = no limit")
	maxIn := fs.Int("max-input-len", 0, "longest allowed input_length in tokens; 0 = no limit (see --long)")
	long := fs.String("long", "drop", "what to do with families that exceed --max-input-len: drop (the whole family) or truncate (cut input_length and hash_ids of the long requests)")
	blockSize := fs.Int("block-size", 0, "tokens per hash id for a file without header line")
	out := fs.String("out", "-", "output file; - for stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"sample: need exactly one PATH"}
	}
	if *long != "drop" && *long != "truncate" {
		return usageError{fmt.Sprintf("sample: --long %q: expected drop or truncate", *long)}
	}
	if *rate < 0 || *rate > 1 {
		return usageError{fmt.Sprintf("sample: --rate %v: expected a probability in [0,1]", *rate)}
	}
	opt := sample.Options{FirstN: *first, Rate: *rate, Seed: *seed, MinTurns: *minTurns,
		Duration: *duration, MaxInputLen: *maxIn, Long: *long}
	path := fs.Arg(0)
	open := func() (*trace.Reader, io.Closer, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		rd, err := trace.NewReader(f, path, *blockSize)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return rd, f, nil
	}
	rd, c, err := open()
	if err != nil {
		return err
	}
	plan, err := sample.NewPlan(rd, opt)
	c.Close()
	if err != nil {
		return err
	}
	if rd, c, err = open(); err != nil {
		return err
	}
	defer c.Close()
	h := rd.Header()
	if *blockSize > 0 {
		h.BlockSize = *blockSize
	}
	if h.Note != "" {
		h.Note += "; "
	}
	h.Note += fmt.Sprintf("sampled first=%d rate=%g seed=%d min_turns=%d duration=%g max_input_len=%d long=%s",
		*first, *rate, *seed, *minTurns, *duration, *maxIn, *long)
	var rep sample.Report
	err = writeOutput(e, *out, func(w io.Writer) error {
		tw, err := trace.NewWriter(w, h)
		if err != nil {
			return err
		}
		rep, err = plan.Apply(rd, tw)
		return err
	})
	if err != nil {
		return err
	}
	printSampleReport(e.stderr, rep)
	return ctx.Err()
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
