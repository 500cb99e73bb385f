package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

func synthGroupsCmd(e *env) *cobra.Command {
	d := synth.DefaultGroups()
	c := d
	var out string
	cmd := &cobra.Command{
		Use:   "groups [flags]",
		Short: "prefix groups of multi-round agentic sessions (BLIS's agentic spec)",
		Long: `Sessions in --groups prefix groups (tenants or agent types), each group's
sessions opening with the same --prefix-token system prompt; sessions arrive as
a Poisson process at --rate and run --rounds requests, each appending a normal
draw of tokens (--append-mean, --append-std) after the previous reply (outputs
--output-mean, --output-std), with --think seconds between reply and next turn.
The defaults are the agentic spec of BLIS, the Go simulator pdhybrid's speed is
compared with: 8 groups x 40K-token prefix, 0.5 sessions/s, 8 rounds, appends
~N(7000, 1500), outputs ~N(400, 150), 5 s think, 634 sessions = 5,072 requests.`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.Uint64Var(&c.Seed, "seed", d.Seed, "random `seed`")
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "`tokens` per hash id")
	fs.IntVar(&c.Groups, "groups", d.Groups, "number of prefix `groups`")
	fs.IntVar(&c.PrefixTokens, "prefix-tokens", d.PrefixTokens, "shared prefix of each group in `tokens`")
	fs.IntVar(&c.Sessions, "sessions", d.Sessions, "number of `sessions`")
	fs.Float64Var(&c.ArrivalRate, "rate", d.ArrivalRate, "session arrival `rate` in sessions/s (Poisson)")
	fs.IntVar(&c.Rounds, "rounds", d.Rounds, "`requests` per session")
	fs.Float64Var(&c.AppendMean, "append-mean", d.AppendMean, "mean new input per round in `tokens`")
	fs.Float64Var(&c.AppendStd, "append-std", d.AppendStd, "standard deviation of the new input in `tokens`")
	fs.Float64Var(&c.OutputMean, "output-mean", d.OutputMean, "mean output in `tokens`")
	fs.Float64Var(&c.OutputStd, "output-std", d.OutputStd, "standard deviation of the output in `tokens`")
	fs.Float64Var(&c.ThinkS, "think", d.ThinkS, "think time between a reply and the next round in `seconds` (think_time_s)")
	fs.Float64Var(&c.NominalResponseS, "nominal-response", d.NominalResponseS, "response time assumed when spacing the open-loop timestamps, in `seconds`")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	cmd.RunE = runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		ck := newChecks(cmd)
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		ck.num("groups", between(1, 1e6).is("a number of groups"))
		ck.num("prefix-tokens", between(0, 1<<30).is("a number of tokens"))
		ck.num("sessions", between(1, 1e9).is("a number of sessions"))
		ck.num("rate", above(0).upTo(1e6).is("a rate in sessions/s"))
		ck.num("rounds", between(1, 1e6).is("a number of rounds"))
		ck.num("append-mean", between(0, 1<<30).is("a number of tokens"))
		ck.num("append-std", between(0, 1<<30).is("a number of tokens"))
		ck.num("output-mean", between(0, 1<<30).is("a number of tokens"))
		ck.num("output-std", between(0, 1<<30).is("a number of tokens"))
		ck.num("think", between(0, 1e12).is("a number of seconds"))
		ck.num("nominal-response", between(0, 1e12).is("a number of seconds"))
		if err := ck.err(); err != nil {
			return err
		}
		g, err := synth.NewGroups(c)
		if err != nil {
			return usagef("%v", err)
		}
		return writeSynth(ctx, e, g, out, "groups")
	})
	return cmd
}

// synthSeedCmd writes one of the seed's two workload shapes (docs/workloads.md
// gives every number's source in the seed).
func synthSeedCmd(e *env, name string) *cobra.Command {
	d := synth.DefaultSeedSWE()
	short := "shaped like the seed's SWE workload: 52 sessions, 4,449 requests, 8–150 turns, real timing (gap p50 2.5 s), input p50 27K / p99 92K, no shared prefix"
	if name == "seed-inferact" {
		d = synth.DefaultSeedInferact()
		short = "shaped like the seed's Inferact workload: 50 sessions, 1,285 requests, mean input 67.6K, 1 s stagger, 2.5 s gaps, ~50 blocks of shared boilerplate"
	}
	c := d
	var out string
	cmd := &cobra.Command{
		Use:   name + " [flags]",
		Short: short,
		Long:  "A preset " + short + ". The counts are exact for any seed; docs/workloads.md gives the targets, their sources in the seed and the generated statistics.",
		Args:  noArgs,
	}
	fs := cmd.Flags()
	fs.Uint64Var(&c.Seed, "seed", d.Seed, "random `seed`")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	cmd.RunE = runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		g, err := synth.NewSeedWorkload(c)
		if err != nil {
			return usagef("%v", err)
		}
		return writeSynth(ctx, e, g, out, name)
	})
	return cmd
}
