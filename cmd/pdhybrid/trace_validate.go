package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
)

func validateCmd(e *env) *cobra.Command {
	var blockSize, listed int
	c := &cobra.Command{
		Use:   "validate [flags] PATH",
		Short: "check schema and invariants; report every bad line with its location",
		Long: `Check a canonical-schema trace line by line: the schema (required fields
and their JSON types), unique chat_id, parent_chat_id -1 or an earlier
request of the same session, turns increasing within a session (1 at the
root), timestamps finite, non-negative and not going backwards within a
session, non-negative lengths, len(hash_ids) == ceil(input_length /
block_size), non-negative think_time_s. Every problem is reported as
file:line: field: what was expected (the first --max-listed are listed, the
rest counted); the exit status is 1 when any was found, and for a trace
without requests. Also reports whether the file is in global timestamp
order, which the simulator requires. PATH - reads standard input.`,
		Args: onePath,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.IntVar(&blockSize, "block-size", 0, "`tokens` per hash id for a file without header line; 0 = the header's (a headerless file then skips the hash-length check)")
	fs.IntVar(&listed, "max-listed", maxListed, "`problems` to list before only counting them")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, args []string) error {
		ck := newChecks(c)
		ck.num("block-size", between(1, 1<<20).orZero("the header's").is("a number of tokens"))
		ck.num("max-listed", between(0, 1e9).is("a number of problems"))
		if err := ck.err(); err != nil {
			return err
		}
		return validate(ctx, e, args[0], blockSize, listed)
	})
	return c
}

func validate(ctx context.Context, e *env, path string, blockSize, listed int) error {
	name := displayName(path)
	if path != "-" {
		if blankFile(path) {
			fmt.Fprintf(e.stdout, "%s: 0 requests\n", name)
			return emptyTrace(path)
		}
		if f, err := convert.Detect(path); err == nil && f != "canonical" {
			return fmt.Errorf("%s looks like a %s trace, not the canonical schema: run 'pdhybrid trace convert --from %s' first", path, f, f)
		}
	}
	in, closeIn, err := openInput(e, path)
	if err != nil {
		return err
	}
	defer closeIn()
	rd, err := trace.NewReader(in, name, blockSize)
	if err != nil {
		fmt.Fprintln(e.stdout, err)
		return errShown{"trace is invalid"}
	}
	bs := rd.Header().BlockSize
	if blockSize > 0 {
		bs = blockSize
	}
	chk := trace.NewChecker(bs)
	problems, requests := 0, 0
	report := func(p *trace.Error) {
		if problems++; problems <= listed {
			fmt.Fprintln(e.stdout, p)
		}
	}
	var req trace.Request
	for {
		if requests%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		err := rd.Next(&req)
		if err == io.EOF {
			break
		}
		var te *trace.Error
		if errors.As(err, &te) {
			report(te)
			continue
		}
		if err != nil {
			return err
		}
		requests++
		line := rd.Line()
		probs := chk.Check(&req, line)
		for _, p := range probs {
			p.File = name
			report(p)
		}
		// A request with a duplicate chat id is not recorded, so its
		// children are checked against the first holder of the id.
		chk.Accept(&req, line)
	}
	if problems > listed {
		fmt.Fprintf(e.stdout, "... and %d more problems\n", problems-listed)
	}
	ordered, back, first := chk.Order()
	order := "in global timestamp order"
	if !ordered {
		order = fmt.Sprintf("NOT in global timestamp order: %d requests step back in time, the first on line %d (the simulator needs sorted input: 'pdhybrid trace convert --from canonical --sort')", back, first)
	}
	if bs <= 0 {
		fmt.Fprintln(e.stdout, "note: no block size known, len(hash_ids) not checked (give --block-size)")
	}
	fmt.Fprintf(e.stdout, "%s: %d requests, %d sessions, block size %d; %s\n", name, requests, chk.Sessions(), bs, order)
	if problems > 0 {
		fmt.Fprintf(e.stdout, "%s: INVALID: %d problems\n", name, problems)
		return errShown{fmt.Sprintf("trace is invalid: %d problems", problems)}
	}
	if requests == 0 {
		return emptyTrace(path)
	}
	fmt.Fprintf(e.stdout, "%s: valid\n", name)
	return nil
}
