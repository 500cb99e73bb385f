package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

const synthAbout = `Generate a synthetic canonical trace (header line + JSONL requests) on
stdout or --out FILE, and a one-line summary on stderr. Generators:

  agentic       Claude-Code-like agentic coding sessions, calibrated on the
                145 weka sessions (context growth, compaction, outputs, think
                times, turns per session, shared system/tool prefix,
                sub-agents). The defaults are the workload 'pdhybrid bench'
                replays. Use --requests N for large streams (e.g. 1000000).
  small-append  the seed's microbenchmark: sessions x turns, a long initial
                prompt, a small append per turn, fixed output, fixed gaps.
  groups        prefix groups of multi-round sessions: BLIS's agentic spec
                (8 groups x 40K-token prefix, 8 rounds of ~7K appends).
  seed-swe      shaped like the seed's SWE workload (52 sessions, 4,449
                requests, real timing, input p50 27K).
  seed-inferact shaped like the seed's Inferact workload (50 sessions,
                1,285 requests, mean input 67.6K, shared boilerplate).

Output is deterministic: the same flags give byte-identical files.
docs/workloads.md documents every default and how it was derived.
Run 'pdhybrid trace synth GENERATOR --help' for a generator's flags.`

func synthCmd(e *env) *cobra.Command {
	return group("synth", "generate a synthetic workload (small-append microbenchmark or agentic coding)",
		synthAbout, gracefulStop(synthAgenticCmd(e)), gracefulStop(synthSmallAppendCmd(e)), gracefulStop(synthGroupsCmd(e)),
		gracefulStop(synthSeedCmd(e, "seed-swe")), gracefulStop(synthSeedCmd(e, "seed-inferact")))
}

func synthAgenticCmd(e *env) *cobra.Command {
	d := synth.DefaultAgentic()
	c := d
	var policy, out string
	var noCompact bool
	cmd := &cobra.Command{
		Use:   "agentic [flags]",
		Short: "Claude-Code-like agentic coding sessions (the bench workload)",
		Long: `Agentic coding sessions calibrated on the weka Claude Code traces: first-turn
size and session length drawn jointly, context growing by the previous output
plus a measured append each turn, compaction (measured per-turn hazard, and
at --max-input), measured output lengths and think times, a system/tool
prefix whose blocks are shared by every session, occasional sub-agents.
With no flags: the built-in 'pdhybrid bench' workload (40 sessions, 1,282
requests). Sessions arrive as a Poisson process (--rate) or --stagger apart;
the stream ends when --sessions have finished, after --requests requests, or
at --duration seconds, whichever comes first.`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.Uint64Var(&c.Seed, "seed", d.Seed, "random `seed`; each session draws from its own stream derived from it")
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "`tokens` per hash id")
	fs.IntVar(&c.Sessions, "sessions", d.Sessions, "top-level `sessions` to start; 0 = unbounded (needs --requests or --duration; the default when --requests or --duration is given)")
	fs.Int64Var(&c.Requests, "requests", 0, "stop after this many `requests` (sessions still active are cut off); 0 = no limit")
	fs.Float64Var(&c.DurationS, "duration", 0, "stop at this trace time in `seconds`; no session starts later; 0 = no limit")
	fs.Float64Var(&c.ArrivalRate, "rate", d.ArrivalRate, "Poisson session arrival rate in `sessions/s`")
	fs.Float64Var(&c.StaggerS, "stagger", 0, "start sessions this many `seconds` apart instead of Poisson arrivals; 0 = use --rate")
	fs.IntVar(&c.MaxInputTokens, "max-input", d.MaxInputTokens, "largest input in `tokens` (the context window); see --cap-policy")
	fs.StringVar(&policy, "cap-policy", string(d.CapPolicy), "what a session does when its next input would exceed --max-input: compact (keep the shared prefix, shrink the rest by a measured compaction ratio) or end (the session stops)")
	fs.IntVar(&c.SharedPrefixTokens, "shared-prefix", d.SharedPrefixTokens, "system prompt + tool definitions in `tokens`, the same blocks in every session (weka median tool_tokens+system_tokens)")
	fs.Float64Var(&c.SubagentProb, "subagent-prob", d.SubagentProb, "`probability` in [0, 1] that a main-agent turn spawns a sub-agent session (weka: 7 in 4,945 turns); 0 = none")
	fs.IntVar(&c.SubagentPrefixTokens, "subagent-prefix", d.SubagentPrefixTokens, "sub-agents' own shared system+tool prefix in `tokens`")
	fs.Float64Var(&c.MaxThinkS, "max-think", d.MaxThinkS, "truncate think times at this many `seconds` (the measured tail reaches 21 h); 0 = no truncation")
	fs.BoolVar(&noCompact, "no-compaction", false, "disable spontaneous compaction (the measured per-turn hazard); the --max-input cap still applies")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	cmd.RunE = runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		ck := newChecks(cmd)
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		ck.num("sessions", between(1, 1e9).orZero("unbounded").is("a number of sessions"))
		ck.num("requests", between(1, 1e12).orZero("no limit").is("a number of requests"))
		ck.num("duration", above(0).upTo(1e12).orZero("no limit").is("a number of seconds"))
		ck.num("rate", above(0).upTo(1e6).is("a rate in sessions/s"))
		ck.num("stagger", above(0).upTo(1e9).orZero("Poisson arrivals at --rate").is("a number of seconds"))
		ck.num("max-input", between(1, 1<<30).is("a number of tokens"))
		ck.oneOf("cap-policy", string(synth.CapCompact), string(synth.CapEnd))
		ck.num("shared-prefix", between(0, 1<<30).is("a number of tokens"))
		ck.num("subagent-prob", between(0, 1).is("a probability"))
		ck.num("subagent-prefix", between(0, 1<<30).is("a number of tokens"))
		ck.num("max-think", above(0).upTo(1e12).orZero("no truncation").is("a number of seconds"))
		ck.only("rate", c.StaggerS == 0, "without --stagger (sessions arrive either --stagger apart or as a Poisson process at --rate)")
		ck.only("subagent-prefix", c.SubagentProb > 0, "with --subagent-prob above 0")
		if ck.set("sessions") && c.Sessions == 0 && c.Requests == 0 && c.DurationS == 0 {
			ck.fail("--sessions 0: an unbounded stream needs --requests or --duration")
		}
		if err := ck.err(); err != nil {
			return err
		}
		if (c.Requests > 0 || c.DurationS > 0) && !ck.set("sessions") {
			c.Sessions = 0 // a request or time budget replaces the session count
		}
		c.CapPolicy = synth.CapPolicy(policy)
		if noCompact {
			c.CompactHazard = nil
		}
		g, err := synth.NewAgentic(c)
		if err != nil {
			return usagef("%v", err)
		}
		return writeSynth(ctx, e, g, out, "agentic")
	})
	return cmd
}

func synthSmallAppendCmd(e *env) *cobra.Command {
	d := synth.DefaultSmallAppend()
	c := d
	var out string
	cmd := &cobra.Command{
		Use:   "small-append [flags]",
		Short: "the seed's small-append microbenchmark",
		Long: `The seed's small-append microbenchmark: every session opens with --initial
tokens, then each turn's input is the previous input + --output + --append,
so a session-resident decoder only ever needs the small append. Timestamps:
session i turn k at i*--stagger + (k-1)*--gap; turns 2+ carry
think_time_s = --gap. No randomness.`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "`tokens` per hash id")
	fs.IntVar(&c.Sessions, "sessions", d.Sessions, "number of `sessions`")
	fs.IntVar(&c.Turns, "turns", d.Turns, "`requests` per session")
	fs.IntVar(&c.InitialTokens, "initial", d.InitialTokens, "turn 1 input in `tokens`")
	fs.IntVar(&c.AppendTokens, "append", d.AppendTokens, "new input per turn beyond the previous prompt and output, in `tokens`")
	fs.IntVar(&c.OutputTokens, "output", d.OutputTokens, "output of every request in `tokens`")
	fs.Float64Var(&c.GapS, "gap", d.GapS, "time between a session's turns in `seconds` (also its think_time_s)")
	fs.Float64Var(&c.StaggerS, "stagger", d.StaggerS, "time between session starts in `seconds`")
	fs.IntVar(&c.SharedPrefixTokens, "shared-prefix", d.SharedPrefixTokens, "leading `tokens` of every prompt that are the same blocks in all sessions; 0 = sessions fully disjoint")
	fs.StringVar(&out, "out", "-", "output `file`; - for stdout")
	cmd.RunE = runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		ck := newChecks(cmd)
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		ck.num("sessions", between(1, 1e9).is("a number of sessions"))
		ck.num("turns", between(1, 1e9).is("a number of turns"))
		ck.num("initial", between(1, 1<<30).is("a number of tokens"))
		ck.num("append", between(0, 1<<30).is("a number of tokens"))
		ck.num("output", between(1, 1<<30).is("a number of tokens"))
		ck.num("gap", between(0, 1e12).is("a number of seconds"))
		ck.num("stagger", between(0, 1e12).is("a number of seconds"))
		ck.num("shared-prefix", between(0, float64(c.InitialTokens)).is("a number of tokens (at most --initial)"))
		if err := ck.err(); err != nil {
			return err
		}
		g, err := synth.NewSmallAppend(c)
		if err != nil {
			return usagef("%v", err)
		}
		return writeSynth(ctx, e, g, out, "small-append")
	})
	return cmd
}

// synthSummary accumulates the one-line report printed on stderr.
type synthSummary struct {
	requests, roots, subs int64
	inSum, outSum, blocks int64
	maxIn                 int
	last                  float64
}

func (s *synthSummary) add(r *trace.Request) {
	s.requests++
	if r.Turn == 1 {
		if r.ParentSessionID != "" {
			s.subs++
		} else {
			s.roots++
		}
	}
	s.inSum += int64(r.InputLength)
	s.outSum += int64(r.OutputLength)
	s.blocks += int64(len(r.HashIDs))
	s.maxIn = max(s.maxIn, r.InputLength)
	s.last = r.Timestamp
}

func (s *synthSummary) String() string {
	n := max(s.requests, 1)
	return fmt.Sprintf("%d requests, %d sessions (+%d sub-agents), span %.0f s, input mean %d max %d tokens, output mean %d tokens, %d hash ids",
		s.requests, s.roots, s.subs, s.last, s.inSum/n, s.maxIn, s.outSum/n, s.blocks)
}

// writeSynth streams g into the output; memory stays constant however long
// the stream is. A failed or interrupted run removes a partial --out file.
func writeSynth(ctx context.Context, e *env, g synth.Stream, out, name string) error {
	dest := "stdout"
	if out != "-" {
		dest = out
	}
	return writeOutput(e, out, func(w io.Writer) error { return streamSynth(ctx, e, g, w, name, dest) })
}

// streamSynth writes g to w as a canonical trace.
func streamSynth(ctx context.Context, e *env, g synth.Stream, w io.Writer, name, dest string) error {
	tw, err := trace.NewWriter(w, g.Header())
	if err != nil {
		return err
	}
	var sum synthSummary
	var r trace.Request
	for {
		if sum.requests%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := g.Next(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if err := tw.Write(&r); err != nil {
			return err
		}
		sum.add(&r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "synth %s: %s -> %s\n", name, sum.String(), strings.TrimSpace(dest))
	return nil
}
