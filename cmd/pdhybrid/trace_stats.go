package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
	"github.com/pdhybrid/pdhybrid/internal/trace/stats"
)

func statsCmd(e *env) *cobra.Command {
	var sf sourceFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "stats [flags] PATH",
		Short: "requests, sessions, token and gap distributions, ideal cache hit ratio",
		Long: `Summarise a trace in one streaming pass: requests, sessions, block size,
turns per session, input/output token, inter-turn gap and think-time
distributions (mean, p50, p90, p99, max; numpy linear-interpolation
percentiles), the ideal prefix-cache hit ratio of an infinite radix cache
(a block hits only if its whole chain was requested before), and the share
of hits on blocks first seen in another session.

PATH is a canonical trace; - reads one from standard input. A headerless
canonical-schema file needs --block-size. A raw Mooncake file or a weka
directory is detected and converted on the fly (same flags as 'trace
convert'); --from forces a format. A trace without requests is an error.`,
		Args: onePath,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	sf.register(fs, "source `format` (weka, mooncake, bailian, seed, canonical); empty = detect from the file")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, args []string) error {
		path := args[0]
		ck := newChecks(c)
		from := sf.from
		if path == "-" {
			if from == "" {
				from = "canonical"
			}
			if from == "weka" || from == "mooncake" {
				return usagef("--from %s: reads a file or folder, not standard input", from)
			}
		}
		if from == "" {
			if blankFile(path) {
				return emptyTrace(path)
			}
			f, err := convert.Detect(path)
			if err != nil {
				return err
			}
			from = f
		}
		sf.check(ck, from)
		if err := ck.err(); err != nil {
			return err
		}
		sf.from = from
		var rep stats.Report
		var skipped error // lines left out: the figures are printed, the exit status is 1
		switch from {
		case "weka", "mooncake":
			st, err := convert.Open(path, sf.options(false))
			if err != nil {
				return err
			}
			col := stats.NewCollector(st.Header)
			n := 0
			err = st.Run(func(r *trace.Request) error {
				if n++; n%4096 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				col.Add(r)
				return nil
			})
			fmt.Fprintf(e.stderr, "read %s as %s\n", path, from)
			reportStream(e.stderr, st)
			if err != nil {
				return err
			}
			rep = col.Report()
		default:
			// Canonical-schema files are read directly, without the pass-through
			// checker, whose chat-id map would grow with the file.
			var err error
			if rep, err = statsCanonical(ctx, e, path, from, sf.blockSize); err != nil && !errors.As(err, new(skippedLines)) {
				return err
			}
			skipped = err
		}
		if rep.Requests == 0 {
			return emptyTrace(path)
		}
		if asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else if err := printStats(e.stdout, path, rep); err != nil {
			return err
		}
		return skipped
	})
	return c
}

// skippedLines is trace stats' error when it left bad lines out: its
// figures cover only the good ones, which a script must not mistake for
// the whole trace's.
type skippedLines struct{ n int }

func (s skippedLines) Error() string {
	return fmt.Sprintf("%d bad lines left out of these statistics (they cover only the valid requests); 'pdhybrid trace validate' lists every problem", s.n)
}

// emptyTrace is the error of stats and validate for a trace without any
// request (an empty file, blank lines, a header alone).
func emptyTrace(path string) error {
	return fmt.Errorf("%s: empty trace: no requests", displayName(path))
}

func displayName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// blankFile reports whether path is a regular file with nothing but white
// space in it; it stops at the first other byte.
func blankFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	br := bufio.NewReader(f)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return false
		}
	}
}

// openInput opens path for reading; - is standard input.
func openInput(e *env, path string) (io.Reader, func() error, error) {
	if path == "-" {
		return e.stdin, func() error { return nil }, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// statsCanonical streams a canonical-schema file into a stats collector.
// Malformed lines are counted, listed (up to maxListed) and left out.
func statsCanonical(ctx context.Context, e *env, path, from string, blockSize int) (stats.Report, error) {
	in, closeIn, err := openInput(e, path)
	if err != nil {
		return stats.Report{}, err
	}
	defer closeIn()
	bs := blockSize
	if bs <= 0 {
		bs = convert.DefaultBlockSize[from]
	}
	rd, err := trace.NewReader(in, displayName(path), bs)
	if err != nil {
		return stats.Report{}, err
	}
	if err := rd.NotJSON(); err != nil {
		return stats.Report{}, err
	}
	h := rd.Header()
	if blockSize > 0 {
		h.BlockSize = blockSize
	}
	if !rd.HasHeader() && h.BlockSize <= 0 {
		return stats.Report{}, usagef("%s: no header line: give --block-size (or --from bailian|seed)", displayName(path))
	}
	col := stats.NewCollector(h)
	var req trace.Request
	bad := 0
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return stats.Report{}, ctx.Err()
		}
		err := rd.Next(&req)
		if err == io.EOF {
			break
		}
		var te *trace.Error
		if errors.As(err, &te) {
			if bad++; bad <= maxListed {
				fmt.Fprintln(e.stderr, "skipped:", te)
			}
			continue
		}
		if err != nil {
			return stats.Report{}, err
		}
		// The numbers' range checks of trace validate and sim (the session
		// checks need a map that grows with the file; validate runs them).
		if errs := trace.CheckNumbers(&req, rd.Line(), h.BlockSize); len(errs) > 0 {
			if bad++; bad <= maxListed {
				ce := *errs[0]
				ce.File = rd.File()
				fmt.Fprintln(e.stderr, "skipped:", &ce)
			}
			continue
		}
		col.Add(&req)
	}
	if bad > 0 {
		fmt.Fprintf(e.stderr, "skipped %d bad lines (run 'pdhybrid trace validate' for the full list)\n", bad)
		return col.Report(), skippedLines{bad}
	}
	return col.Report(), nil
}

func printStats(w io.Writer, path string, r stats.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "trace\t%s (source %q)\n", displayName(path), r.Source)
	fmt.Fprintf(tw, "requests\t%d\n", r.Requests)
	fmt.Fprintf(tw, "sessions\t%d (%d sub-agent)\n", r.Sessions, r.SubagentSessions)
	fmt.Fprintf(tw, "block size\t%d tokens\n", r.BlockSize)
	fmt.Fprintf(tw, "duration\t%.1f s (global timestamp order: %v)\n", r.DurationS, r.GlobalTimeOrdered)
	fmt.Fprintf(tw, "total tokens\tinput %d, output %d\n", r.TotalInputTokens, r.TotalOutputTokens)
	fmt.Fprintf(tw, "ideal cache hit ratio\t%.4f (%d of %d blocks; %d unique)\n", r.IdealCacheHitRatio, r.BlocksHit, r.BlocksRequested, r.UniqueBlocks)
	fmt.Fprintf(tw, "cross-session share\t%.4f of hit blocks (%d) were first seen in another session\n", r.CrossSessionShare, r.CrossSessionHitBlocks)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "distribution\tcount\tmean\tp50\tp90\tp99\tmax")
	row := func(name string, s stats.Summary) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\n", name, s.Count, s.Mean, s.P50, s.P90, s.P99, s.Max)
	}
	row("turns per session", r.TurnsPerSession)
	row("input tokens", r.InputTokens)
	row("output tokens", r.OutputTokens)
	row("inter-turn gap (s)", r.InterTurnGapS)
	row("think time (s)", r.ThinkTimeS)
	return tw.Flush()
}
