// Command pdhybrid is the session-aware, KV-cache-aware control plane for
// serving multi-turn agentic LLM workloads on prefill/decode-disaggregated
// GPUs, with its simulator, trace toolkit and reports. Run `pdhybrid help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// command is one sub-command. run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env carries the process's streams so commands are testable.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

func topCommands() []command {
	return []command{
		{"bench", "replay an agentic workload through naive PD and data-parallel serving, side by side", runBench},
		{"sim", "one simulation run with every knob exposed", runSim},
		{"trace", "trace toolkit: convert, stats, sample, synth, validate", runTrace},
		{"report", "compare runs: HTML report with charts, terminal tables", runReport},
		{"calibrate", "fit engine-model timing coefficients to GPU measurements", runCalibrate},
	}
}

func traceCommands() []command {
	return []command{
		{"convert", "convert weka, mooncake, bailian or seed traces to the canonical format", runTraceConvert},
		{"stats", "requests, sessions, token and gap distributions, ideal cache hit ratio", runTraceStats},
		{"sample", "take a deterministic subset of sessions", runTraceSample},
		{"synth", "generate a synthetic workload (small-append microbenchmark or agentic coding)", runTraceSynth},
		{"validate", "check schema and invariants; report every bad line with its location", runTraceValidate},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	e := &env{stdout: os.Stdout, stderr: os.Stderr}
	if err := dispatch(ctx, e, "pdhybrid", topCommands(), os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pdhybrid:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError marks a bad command line (exit status 2).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

func dispatch(ctx context.Context, e *env, prog string, cmds []command, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 && args[0] == "help" {
			return dispatch(ctx, e, prog, cmds, []string{args[1], "--help"})
		}
		printUsage(e.stdout, prog, cmds)
		if len(args) == 0 {
			return usageError{"no command given"}
		}
		return nil
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	printUsage(e.stderr, prog, cmds)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func printUsage(w io.Writer, prog string, cmds []command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prog)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n", prog)
}

func runTrace(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "pdhybrid trace", traceCommands(), args)
}

// newFlags makes a flag set whose --help prints the synopsis, a description
// and every flag with its default.
func newFlags(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
	}
	return fs
}

// writeOutput runs write against stdout (path "-") or a new file at path.
// A failed write removes the partial file, so a broken run never leaves a
// truncated trace behind that looks whole.
func writeOutput(e *env, path string, write func(io.Writer) error) (err error) {
	if path == "-" || path == "" {
		return write(e.stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	return write(f)
}
