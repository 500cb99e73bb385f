// Command pdhybrid is the session-aware, KV-cache-aware control plane for
// serving multi-turn agentic LLM workloads on prefill/decode-disaggregated
// GPUs, with its simulator, trace toolkit and reports. Run `pdhybrid help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// Exit statuses.
const (
	exitOK          = 0
	exitError       = 1   // the command failed, or a run stopped at a limit
	exitUsage       = 2   // bad command line: nothing was done
	exitInternal    = 70  // a bug (EX_SOFTWARE): a panic caught at the top
	exitInterrupted = 130 // SIGINT or SIGTERM (128 + SIGINT, as shells report it)
)

// env carries the process's streams so commands are testable.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// tty: stderr is a terminal, so progress may redraw one line with \r.
	tty bool
	// now is the wall clock, for run dates and progress (tests fix it).
	now func() time.Time
}

func main() {
	if simulates(os.Args[1:]) {
		// Before the command tree is built: the huge-page block's collection
		// (hugeheap.go) then marks only what package init left, and the tree
		// lands in the huge pages too. The command's own call is a no-op after.
		keepHeapHeadroom()
	}
	stop := startCPUProfile(os.Stderr)
	status := mainStatus(os.Args[1:])
	stop()
	os.Exit(status)
}

// simulates is whether the command line runs one of the simulator's
// commands, which keep heap headroom (headroom.go): sim, bench, sweep.
func simulates(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "sim", "bench", "sweep":
		return true
	}
	return false
}

// mainStatus runs the command line and returns the exit status. It is
// main without os.Exit, so a test binary can run itself as pdhybrid.
func mainStatus(args []string) int {
	return guard(os.Stderr, func() int {
		out := &checkedWriter{w: os.Stdout}
		ctx, stop := interruptible()
		defer stop()
		e := &env{stdin: os.Stdin, stdout: out, stderr: os.Stderr, tty: isTerminal(os.Stderr), now: time.Now}
		path, err := execute(ctx, e, args)
		if err == nil && out.err != nil {
			err = fmt.Errorf("writing standard output: %w", out.err)
		}
		return reportError(e.stderr, path, err)
	})
}

// guard runs fn and turns a panic into one line on w and exit status 70:
// the last line of defence, so a bug never prints a Go stack trace at a
// user (PDHYBRID_TRACEBACK=1 prints it). Causes are fixed where found.
func guard(w io.Writer, fn func() int) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(w, "pdhybrid: internal error: %v\n(this is a bug in pdhybrid; please report it with the command line)\n", r)
			if os.Getenv("PDHYBRID_TRACEBACK") != "" {
				w.Write(debug.Stack())
			}
			status = exitInternal
		}
	}()
	return fn()
}

// checkedWriter remembers the first write error, so output that went
// nowhere (a full disk, a closed pipe) fails the command.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// interrupted is the cause of a context canceled by a signal.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string {
	switch i.sig {
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return "interrupted by " + i.sig.String()
}

// graceful is set while a command runs that stops cleanly when its context
// is canceled (it writes what it has, marked incomplete, or removes a
// partial output). Other commands exit at the first signal.
var graceful atomic.Bool

// interruptible returns a context that SIGINT or SIGTERM cancels with an
// interrupted cause when the running command is graceful; otherwise, and at
// a second signal, the process exits at once with status 130.
func interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		if graceful.Load() {
			cancel(interrupted{sig})
			sig = <-ch
			fmt.Fprintf(os.Stderr, "pdhybrid: %v again: exiting without cleaning up\n", interrupted{sig})
		} else {
			fmt.Fprintf(os.Stderr, "pdhybrid: %v\n", interrupted{sig})
		}
		os.Exit(exitInterrupted)
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// usageError marks a bad command line (exit status 2): the message names the
// flag or argument, the value and what would be valid.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// errShown is returned when the command already printed why it failed
// (trace validate lists the problems on stdout).
type errShown struct{ msg string }

func (e errShown) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	var in interrupted
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		return exitUsage
	case errors.As(err, &in), errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitError
}

// reportError prints err for the command at path (e.g. "pdhybrid sim") and
// returns the exit status: the offending line first, then a hint.
func reportError(w io.Writer, path string, err error) int {
	code := exitCode(err)
	if err == nil {
		return code
	}
	if path == "" {
		path = "pdhybrid"
	}
	var shown errShown
	var stop *sim.StopError
	switch {
	case errors.As(err, &shown):
		fmt.Fprintf(w, "%s: %s\n", path, shown.msg)
	case errors.As(err, &stop):
		fmt.Fprintf(w, "%s: run stopped: %s\n", path, stop.Reason)
	default:
		// Package errors often start with the package's name, which is the
		// command's ("report: ..." under "pdhybrid report"): say it once.
		msg := err.Error()
		if i := strings.LastIndexByte(path, ' '); i >= 0 {
			msg = strings.TrimPrefix(msg, path[i+1:]+": ")
		}
		fmt.Fprintf(w, "%s: %s\n", path, msg)
	}
	if code == exitUsage {
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", path)
	}
	return code
}
