package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// newRoot builds the command tree. Every command is a cobra.Command whose
// RunE gets its context from ExecuteContext; flags are pflag, so they may
// come before or after positional arguments, as --flag value or
// --flag=value. Single-dash long flags (-out) still work: normalizeArgs
// rewrites them before parsing.
func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "pdhybrid",
		Short: "session-aware, KV-cache-aware serving of agentic LLM workloads on prefill/decode-disaggregated GPUs",
		Long: `pdhybrid is the measuring instrument for a KV-cache-aware control plane on
prefill/decode-disaggregated GPUs: a discrete-event simulator over a
calibrated engine model, a trace toolkit and a benchmark/report toolchain.

Start with 'pdhybrid bench'. Exit status: 0 success, 1 failure (or a run
stopped at a limit), 2 bad command line (nothing was done), 130 interrupted
(SIGINT/SIGTERM; the run folder is kept, marked "complete": false).`,
		// The version itself is found only when asked for (--version, a
		// run folder, a report page): finding it may run git, which costs
		// a run that writes neither tens of milliseconds of start-up.
		Version:       "(see versionString)",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
	}
	cobra.AddTemplateFunc("pdhybridVersion", versionString)
	root.SetVersionTemplate("pdhybrid {{pdhybridVersion}}\n")
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { writeHelp(c.OutOrStdout(), c) })
	root.SetFlagErrorFunc(flagError)
	root.SetHelpCommand(helpCmd())
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(gracefulStop(benchCmd(e)), gracefulStop(simCmd(e)), gracefulStop(sweepCmd(e)), traceCmd(e), floorCmd(e), conformanceCmd(e), reportCmd(e), calibrateCmd(e), gracefulStop(validateRunsCmd(e)), gracefulStop(workerCmd(e)), gracefulStop(serveCmd(e)), gracefulStop(upCmd(e)), gracefulStop(replayCmd(e)))
	root.Flags().BoolP("version", "v", false, "print the version and exit")
	root.InitDefaultCompletionCmd()
	walk(root, func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = 2
		c.Flags().BoolP("help", "h", false, "print this page and exit")
	})
	return root
}

// flagError makes a flag parse error a usage error, suggesting the nearest
// flag name for an unknown one.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if best := nearestFlag(c, name); best != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", best)
		}
	}
	return usageError{msg}
}

// nearestFlag is the visible flag of c nearest to name (edit distance
// under 3), or "".
func nearestFlag(c *cobra.Command, name string) string {
	best, bestD := "", 3
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if d := editDistance(name, f.Name); d < bestD && !f.Hidden {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// walk calls fn on c and every command below it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// execute runs args against a fresh command tree and returns the path of
// the command that ran (for messages) and its error.
func execute(ctx context.Context, e *env, args []string) (string, error) {
	root := newRoot(e)
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	path := "pdhybrid"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	return path, err
}

// group makes a command that only holds sub-commands.
func group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ArbitraryArgs, RunE: groupRun}
	c.AddCommand(subs...)
	return c
}

// groupRun runs when a group is named without a known sub-command: a usage
// error that lists the sub-commands, with "did you mean" suggestions.
func groupRun(c *cobra.Command, args []string) error {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	if len(args) == 0 {
		return usagef("name a command: %s", strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if sug := c.SuggestionsFor(args[0]); len(sug) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(sug, " or "))
	} else {
		msg += " (commands: " + strings.Join(names, ", ") + ")"
	}
	return usageError{msg}
}

// helpCmd is `pdhybrid help [command...]`: the command's help page on
// stdout; an unknown topic is a usage error with suggestions.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command...]",
		Short: "show a command's help page (same as COMMAND --help)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			target, rest, err := root.Find(args)
			if err != nil {
				return usageError{err.Error()}
			}
			if len(rest) > 0 {
				var flags []string
				for _, a := range rest {
					if !strings.HasPrefix(a, "-") {
						flags = append(flags, a)
					}
				}
				if len(flags) > 0 {
					return groupRun(target, flags[:1])
				}
			}
			target.InitDefaultHelpFlag()
			target.InitDefaultVersionFlag()
			writeHelp(c.OutOrStdout(), target)
			return nil
		},
	}
}

// writeHelp prints a command's page: synopsis, description, sub-commands,
// and every flag with its unit (the back-quoted name in its usage) and
// default.
func writeHelp(w io.Writer, c *cobra.Command) {
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "usage: %s <command> [flags]\n", c.CommandPath())
	} else {
		fmt.Fprintf(w, "usage: %s\n", c.UseLine())
	}
	about := c.Long
	if about == "" {
		about = c.Short
	}
	fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(about))
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\ncommands:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() || s.Name() == "help" {
				fmt.Fprintf(tw, "  %s\t%s\n", s.Name(), s.Short)
			}
		}
		tw.Flush()
	}
	if fs := c.LocalFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(w, "\nflags:\n%s", flagUsages(fs))
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(w, "\nglobal flags:\n%s", flagUsages(fs))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's page.\n", c.CommandPath())
	}
}

// flagUsages lists fs's flags one per line: "--name unit   what it does
// (default X)". Numeric flags name their unit as the back-quoted word of
// their usage; the default is shown for every flag whose usage does not
// already explain it.
func flagUsages(fs *pflag.FlagSet) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		left := "  "
		if f.Shorthand != "" {
			left += "-" + f.Shorthand + ", "
		}
		left += "--" + f.Name
		if name != "" {
			left += " " + name
		}
		if d := formatDefault(f, usage); d != "" {
			usage += " (default " + d + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\n", left, usage)
	})
	tw.Flush()
	return b.String()
}

// formatDefault is the default to show after a flag's usage, or "" when
// the usage explains it already, or for a flag that is off unless given
// (booleans, --help).
func formatDefault(f *pflag.Flag, usage string) string {
	low := strings.ToLower(usage)
	switch {
	case strings.Contains(low, "(default") || strings.Contains(low, "(required)"):
		return ""
	case f.Value.Type() == "bool" && f.DefValue == "false":
		return ""
	case f.Value.Type() == "string" && f.DefValue == "":
		return "none"
	case f.Value.Type() == "string":
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

// multiValue flags take vLLM-style space-separated values
// (--goodput ttft:300 tpot:50): normalizeArgs joins the values that follow
// them with commas.
var multiValue = map[string]*regexp.Regexp{
	"goodput": regexp.MustCompile(`^[a-z0-9_]+:[^/]*$`),
}

// normalizeArgs rewrites a command line for pflag: single-dash long flags
// that name a flag of the command (-out, -synth-sessions=6, -help) become
// double-dash, and a multi-value flag's values are joined. Everything after
// "--" and the values of flags are left alone, as are completion requests.
func normalizeArgs(root *cobra.Command, args []string) []string {
	if len(args) > 0 && strings.HasPrefix(args[0], "__complete") {
		return args
	}
	out := make([]string, 0, len(args))
	cmd := root
	positional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			name, _, hasValue := strings.Cut(a[1:], "=")
			if f := lookupFlag(cmd, name); f != nil {
				a = "-" + a
				out = append(out, a)
				i = takeValues(cmd, f, hasValue, args, i, &out)
				continue
			}
		case strings.HasPrefix(a, "--") && len(a) > 2:
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f := lookupFlag(cmd, name); f != nil {
				out = append(out, a)
				i = takeValues(cmd, f, hasValue, args, i, &out)
				continue
			}
		case !strings.HasPrefix(a, "-") && !positional:
			if sub := findSub(cmd, a); sub != nil {
				cmd = sub
			} else {
				positional = true
			}
		}
		out = append(out, a)
	}
	return out
}

// takeValues copies the value tokens of flag f (given at args[i]) to out and
// returns the index of the last token consumed.
func takeValues(cmd *cobra.Command, f *pflag.Flag, hasValue bool, args []string, i int, out *[]string) int {
	if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
		i++
		*out = append(*out, args[i])
		hasValue = true
	}
	if re, ok := multiValue[f.Name]; ok && hasValue {
		last := &(*out)[len(*out)-1]
		for i+1 < len(args) && re.MatchString(args[i+1]) {
			i++
			*last += "," + args[i]
		}
	}
	return i
}

// lookupFlag finds a long flag of cmd by name, its own or inherited,
// including the help and version flags cobra adds when it runs.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	for c := cmd; c != nil; c = c.Parent() {
		if f := c.Flags().Lookup(name); f != nil {
			return f
		}
		if f := c.PersistentFlags().Lookup(name); f != nil {
			return f
		}
	}
	switch name {
	case "help":
		return &pflag.Flag{Name: "help", NoOptDefVal: "true"}
	case "version":
		if !cmd.HasParent() {
			return &pflag.Flag{Name: "version", NoOptDefVal: "true"}
		}
	}
	return nil
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, s := range cmd.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

// noArgs is a cobra.Args for commands that take no positional arguments.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (this command takes only flags)", args[0])
	}
	return nil
}

// onePath is a cobra.Args for commands that take exactly one PATH.
func onePath(c *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("need a PATH")
	case len(args) > 1:
		return usagef("need exactly one PATH, got %d (%q ...)", len(args), args[1])
	}
	return nil
}

// runE adapts a command body to cobra, passing the context. An error caused
// by an interrupt becomes the interrupt itself ("interrupted by SIGINT",
// exit 130), unless it is a sim.StopError, which says more.
func runE(fn func(ctx context.Context, c *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		graceful.Store(c.Annotations[annInterrupt] == "graceful")
		defer graceful.Store(false)
		err := fn(ctx, c, args)
		var stop *sim.StopError
		if err != nil && errors.Is(err, context.Canceled) && !errors.As(err, &stop) {
			var in interrupted
			if errors.As(context.Cause(ctx), &in) {
				return in
			}
		}
		return err
	}
}

// annInterrupt marks commands that stop cleanly on SIGINT (they watch their
// context); the others are stopped at once.
const annInterrupt = "interrupt"

// gracefulStop marks c as one that handles an interrupt itself.
func gracefulStop(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annInterrupt] = "graceful"
	return c
}
