package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestMain lets the test binary run as pdhybrid itself (PDHYBRID_AS_MAIN=1),
// so tests can send signals to a real process and give it real files as
// stdout without building the binary.
func TestMain(m *testing.M) {
	if os.Getenv("PDHYBRID_AS_MAIN") == "1" {
		os.Exit(mainStatus(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// pdhybrid returns a command running this test binary as pdhybrid.
func pdhybrid(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, args...)
	c.Env = append(os.Environ(), "PDHYBRID_AS_MAIN=1")
	return c
}

// smallTrace writes a canonical trace of 2 sessions × 3 turns.
func smallTrace(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if _, se, err := runCLI("trace", "synth", "small-append", "--sessions", "2", "--turns", "3", "--out", p); err != nil {
		t.Fatalf("synth: %v\n%s", err, se)
	}
	return p
}

// leafCommands lists every runnable command of the tree with the
// positional arguments that get it past argument checking.
func leafCommands(t *testing.T) map[string][]string {
	tr := smallTrace(t)
	return map[string][]string{
		"bench":                     nil,
		"sim":                       nil,
		"floor":                     nil,
		"sweep":                     {"--out", t.TempDir()},
		"trace convert":             {"--from", "weka", tr},
		"trace stats":               {tr},
		"trace sample":              {tr},
		"trace synth agentic":       nil,
		"trace synth small-append":  nil,
		"trace synth groups":        nil,
		"trace synth seed-swe":      nil,
		"trace synth seed-inferact": nil,
		"trace validate":            {tr},
		"report":                    {t.TempDir()},
		"calibrate fit":             nil,
		"calibrate check":           nil,
		"worker":                    nil,
		"serve":                     nil,
		"up":                        nil,
		"replay":                    nil,
	}
}

// TestEveryNumericFlagRejectsBadValues: for every command and every numeric
// flag, NaN, ±Inf, a negative number and a huge one are usage errors (exit
// 2) whose first line names the flag, before any work starts.
func TestEveryNumericFlagRejectsBadValues(t *testing.T) {
	root := newRoot(&env{})
	for path, pos := range leafCommands(t) {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.CommandPath() != "pdhybrid "+path {
			t.Fatalf("%s: %v", path, err)
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			switch f.Value.Type() {
			case "int", "int64", "uint64", "float64":
			default:
				return
			}
			for _, v := range []string{"NaN", "Inf", "-Inf", "-1", "1e300"} {
				args := append(strings.Fields(path), pos...)
				args = append(args, "--"+f.Name, v)
				_, stderr, err := runCLI(args...)
				first, _, _ := strings.Cut(stderr, "\n")
				if exitCode(err) != exitUsage || !strings.Contains(first, "--"+f.Name) {
					t.Errorf("%v: exit %d, first line %q; want 2 naming --%s", args, exitCode(err), first, f.Name)
				}
			}
		})
	}
}

// TestBadValueClasses: zero where meaningless, out of range, and flags that
// do not apply to the mode chosen, on every command that has them.
func TestBadValueClasses(t *testing.T) {
	tr := smallTrace(t)
	prof := filepath.Join(t.TempDir(), "p.json")
	if _, se, err := runCLI("sim", "--dump-profile", prof); err != nil {
		t.Fatalf("dump: %v %s", err, se)
	}
	b, _ := os.ReadFile(prof)
	bad := filepath.Join(t.TempDir(), "topk.json")
	os.WriteFile(bad, bytes.Replace(b, []byte(`"top_k": 8`), []byte(`"top_k": 500`), 1), 0o644)
	run := t.TempDir()
	for _, c := range []struct {
		flag string
		args []string
	}{
		// zero where meaningless
		{"--time-scale", []string{"sim", "--time-scale", "0"}},
		{"--chunk-tokens", []string{"sim", "--chunk-tokens", "5000000"}}, // 0 takes the profile's: out of range instead
		{"--max-running", []string{"bench", "--max-running", "100000"}},
		{"--alpha", []string{"sim", "--policy", "kv-aware", "--alpha", "0"}},
		{"--sample-interval", []string{"sim", "--sample-interval", "0"}},
		{"--decode", []string{"sim", "--decode", "0"}},
		{"--gpus", []string{"bench", "--gpus", "0"}},
		{"--rate", []string{"trace", "convert", "--from", "weka", "--arrival", "poisson", "--rate", "0", tr}},
		{"--rate", []string{"trace", "sample", "--rate", "0", tr}},
		{"--rate", []string{"trace", "synth", "agentic", "--rate", "0"}},
		{"--block-size", []string{"trace", "synth", "agentic", "--block-size", "0"}},
		{"--turns", []string{"trace", "synth", "small-append", "--turns", "0"}},
		{"--tail-quantile", []string{"report", run, "--tail-quantile", "0"}},
		{"--body-quantile", []string{"report", run, "--body-quantile", "0"}},
		{"--holdout", []string{"calibrate", "fit", "--holdout", "0"}},
		{"--backpressure-high-water", []string{"sim", "--mechanism", "kvcache-centric", "--backpressure-high-water", "0"}},
		{"--backpressure-high-water", []string{"worker", "--role", "decode", "--session-cache", "--backpressure-high-water", "0"}},
		// out of range
		{"--mem-fraction-decode", []string{"sim", "--mem-fraction-decode", "1.5"}},
		{"--mem-fraction-prefill", []string{"bench", "--mem-fraction-prefill", "0.3"}}, // too small for the weights
		{"--mem-fraction-colo", []string{"sim", "--mechanism", "pd-colo", "--mem-fraction-colo", "0.2"}},
		{"--time-scale", []string{"sim", "--time-scale", "1e-300"}},
		{"--profile", []string{"sim", "--profile", bad}}, // top_k 500 of 128 experts
		{"--max-input-len", []string{"sim", "--max-input-len", "300000"}},
		{"--goodput", []string{"sim", "--goodput", "ttft:-3"}},
		{"--goodput", []string{"bench", "--goodput", "itl:50"}},
		{"--rate", []string{"trace", "sample", "--rate", "1.5", tr}},
		{"--subagent-prob", []string{"trace", "synth", "agentic", "--subagent-prob", "2"}},
		{"--shared-prefix", []string{"trace", "synth", "small-append", "--initial", "100", "--shared-prefix", "200"}},
		{"--tail-quantile", []string{"report", run, "--tail-quantile", "100"}},
		{"--body-quantile", []string{"report", run, "--body-quantile", "NaN"}},
		{"--format", []string{"bench", "--format", "yaml"}},
		{"--link", []string{"sim", "--link", "carrier-pigeon"}},
		{"--link", []string{"worker", "--role", "prefill", "--link", "carrier-pigeon"}},
		{"--role", []string{"worker", "--role", "router"}},
		{"--time-scale", []string{"worker", "--time-scale", "0"}},
		{"--fault-slow-transfer", []string{"worker", "--role", "prefill", "--fault-slow-transfer", "0.5"}},
		{"--snapshot-buf", []string{"worker", "--role", "prefill", "--snapshot-buf", "0"}},
		{"--backpressure-high-water", []string{"bench", "--backpressure-high-water", "1.5"}},
		// flags that do not apply to the mode chosen
		{"--rate", []string{"trace", "convert", "--from", "weka", "--rate", "0.005", tr}},
		{"--rate", []string{"trace", "stats", "--rate", "0.005", tr}},
		{"--sort", []string{"trace", "convert", "--from", "weka", "--sort", tr}},
		{"--alpha", []string{"sim", "--policy", "sticky", "--alpha", "2"}},
		{"--alpha", []string{"bench", "--alpha", "2", "--kvc-policy", "none"}},
		{"--floor-k", []string{"sim", "--floor-k", "1"}},
		{"--colo", []string{"sim", "--colo", "3"}},
		{"--prefill", []string{"sim", "--mechanism", "pd-colo", "--prefill", "2"}},
		{"--link", []string{"sim", "--mechanism", "pd-colo", "--link", "nvlink"}},
		{"--block-size", []string{"sim", "--block-size", "16"}},
		{"--synth-requests", []string{"sim", "--trace", tr, "--synth-requests", "10"}},
		{"--seed", []string{"bench", "--trace", tr, "--seed", "3"}},
		{"--force", []string{"sim", "--force"}},
		{"--format", []string{"report", run, "--format", "csv"}},
		{"--title", []string{"report", run, "--compare", "--title", "x"}},
		{"--long", []string{"trace", "sample", "--long", "truncate", tr}},
		{"--seed", []string{"trace", "sample", "--seed", "4", tr}},
		{"--rate", []string{"trace", "synth", "agentic", "--stagger", "5", "--rate", "1"}},
		{"--model", []string{"calibrate", "check", "--profile", prof, "--model", "x"}},
		{"--slo-ttft", []string{"sim", "--goodput", "ttft:300", "--slo-ttft", "1"}},
		{"--waiting-timeout", []string{"worker", "--waiting-timeout", "5"}},
		{"--bootstrap-port", []string{"worker", "--role", "decode", "--bootstrap-port", "9000"}},
		{"--session-cache", []string{"worker", "--role", "prefill", "--session-cache"}},
		{"--snapshot-buf", []string{"worker", "--role", "decode", "--snapshot-buf", "2"}},
		{"--prefill-priority-eviction", []string{"worker", "--role", "decode", "--prefill-priority-eviction"}},
		{"--session-cap", []string{"worker", "--role", "decode", "--session-cap", "4"}},
		{"--fault-seed", []string{"worker", "--fault-seed", "3"}},
		{"--backpressure", []string{"sim", "--backpressure=false"}},
		{"--backpressure-max-pause-ms", []string{"sim", "--mechanism", "kvcache-centric", "--backpressure=false", "--backpressure-max-pause-ms", "100"}},
		{"--backpressure-transfer-queue", []string{"bench", "--backpressure=false", "--backpressure-transfer-queue"}},
		{"--backpressure-high-water", []string{"worker", "--role", "decode", "--backpressure-high-water", "0.5"}},
		{"--backpressure-transfer-queue", []string{"worker", "--role", "decode", "--session-cache", "--backpressure=false", "--backpressure-transfer-queue"}},
		{"--conditional-strategy", []string{"sim", "--conditional-strategy", "isl_or_load"}},
		{"--conditional-strategy", []string{"sim", "--mechanism", "pd-conditional", "--conditional-strategy", "round_robin"}},
		{"--conditional-prefill-busy", []string{"sim", "--mechanism", "pd-conditional", "--conditional-prefill-busy", "2"}},
		{"--conditional-eff-isl-ratio", []string{"sim", "--mechanism", "pd-conditional", "--conditional-eff-isl-ratio", "0"}},
		{"--decider-non-cached-tokens", []string{"sim", "--mechanism", "pd-conditional", "--decider-non-cached-tokens", "16"}},
		{"--direct-max-uncached-tokens", []string{"sim", "--mechanism", "pd-decode-radix", "--direct-max-uncached-tokens", "16"}},
		{"--colo", []string{"sim", "--mechanism", "pd-decode-radix", "--colo", "2"}},
		{"--peers", []string{"bench", "--peers", "pd-magic"}},
		{"--peers", []string{"bench", "--peers", ","}},
		{"--decider-prompt-tokens", []string{"bench", "--peers", "pd-conditional", "--decider-prompt-tokens", "5"}},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.flag) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args, exitCode(err), first, c.flag)
		}
	}
}

// TestHelpUnitsAndDefaults: every flag's help states its default (or says
// it is off unless given), and every numeric flag names its unit.
func TestHelpUnitsAndDefaults(t *testing.T) {
	walk(newRoot(&env{}), func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" || f.Name == "help" {
				return
			}
			name, usage := pflag.UnquoteUsage(f)
			switch f.Value.Type() {
			case "int", "int64", "uint64", "float64":
				if name == "" || name == "int" || name == "uint" || name == "float" {
					t.Errorf("%s --%s: no unit in %q", c.CommandPath(), f.Name, f.Usage)
				}
			case "bool":
				return // off unless given
			}
			if formatDefault(f, usage) == "" && !strings.Contains(usage, "(default") && !strings.Contains(usage, "(required)") {
				t.Errorf("%s --%s: no default stated", c.CommandPath(), f.Name)
			}
		})
	})
	out, _, _ := runCLI("sim", "--help")
	for _, want := range []string{"--time-scale factor", "(default 1)", "--timeout seconds", "--goodput SLOs", `(default "ttft:2000,tpot:100")`} {
		if !strings.Contains(out, want) {
			t.Errorf("sim --help lacks %q", want)
		}
	}
}

// TestConventions: help on stdout with exit 0, --version, help for a
// nested command, "did you mean", completion, usage errors on stderr.
func TestConventions(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"sim", "-h"}, {"trace", "convert", "--help"}, {"help", "trace", "convert"}, {"trace", "convert", "-help"}} {
		out, stderr, err := runCLI(args...)
		if err != nil || stderr != "" || !strings.HasPrefix(out, "usage: pdhybrid") {
			t.Errorf("%v: err %v, stderr %q, stdout %.60q", args, err, stderr, out)
		}
		if args[len(args)-1] == "convert" && !strings.Contains(out, "usage: pdhybrid trace convert --from FORMAT") {
			t.Errorf("%v: not the convert page:\n%s", args, out)
		}
	}
	if out, _, err := runCLI("--version"); err != nil || !strings.HasPrefix(out, "pdhybrid ") {
		t.Errorf("--version: %v %q", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bnech"}, "did you mean bench?"},
		{[]string{"trace", "stast"}, "did you mean stats?"},
		{[]string{"help", "trace", "convret"}, "did you mean convert?"},
		{[]string{"trace", "synth", "agentc"}, "did you mean agentic?"},
		{[]string{}, "name a command"},
		{[]string{"trace"}, "name a command: convert"},
		{[]string{"sim", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"sim", "--time-scal", "2"}, "did you mean --time-scale?"},
		{[]string{"sim", "stray"}, `unexpected argument "stray"`},
		{[]string{"trace", "stats"}, "need a PATH"},
	} {
		out, stderr, err := runCLI(c.args...)
		if exitCode(err) != exitUsage || out != "" || !strings.Contains(strings.SplitN(stderr, "\n", 2)[0], c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q first", c.args, exitCode(err), out, stderr, c.want)
		}
	}
	out, _, err := runCLI("completion", "bash")
	if err != nil || !strings.Contains(out, "pdhybrid") {
		t.Errorf("completion bash: %v", err)
	}
}

// TestNormalizeArgs: single-dash long flags still work (the docs used them
// for years), and vLLM's space-separated --goodput values are joined.
func TestNormalizeArgs(t *testing.T) {
	root := newRoot(&env{})
	for _, c := range []struct{ in, want string }{
		{"sim -out d -synth-sessions=6", "sim --out d --synth-sessions=6"},
		{"bench -h", "bench -h"},
		{"sim -help", "sim --help"},
		{"trace convert -from weka DIR -out x", "trace convert --from weka DIR --out x"},
		{"report A -title -x -compare", "report A --title -x --compare"}, // a flag's value is left alone
		{"sim --goodput ttft:300 tpot:50 --out d", "sim --goodput ttft:300,tpot:50 --out d"},
		{"sim --goodput=ttft:300 tpot:50", "sim --goodput=ttft:300,tpot:50"},
		{"report -- -out", "report -- -out"},
		{"sim -nonsense", "sim -nonsense"},
	} {
		got := strings.Join(normalizeArgs(root, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("%q → %q, want %q", c.in, got, c.want)
		}
	}
	if _, se, err := runCLI("sim", "-synth-sessions", "2", "-goodput", "ttft:300", "tpot:50"); err != nil {
		t.Fatalf("single-dash flags: %v\n%s", err, se)
	}
}

// TestFlagsAfterPositionals: flags may follow the positional arguments.
func TestFlagsAfterPositionals(t *testing.T) {
	tr := smallTrace(t)
	out, _, err := runCLI("trace", "stats", tr, "--json")
	if err != nil || !json.Valid([]byte(out)) {
		t.Fatalf("stats FILE --json: %v\n%s", err, out)
	}
	conv := filepath.Join(t.TempDir(), "c.jsonl")
	if _, se, err := runCLI("trace", "convert", "--from", "canonical", tr, "--out", conv); err != nil {
		t.Fatalf("convert PATH --out: %v\n%s", err, se)
	}
	if _, err := os.Stat(conv); err != nil {
		t.Fatal("convert wrote nothing where --out said")
	}
	if o, _, err := runCLI("trace", "validate", conv, "--max-listed", "3"); err != nil || !strings.Contains(o, "valid") {
		t.Fatalf("validate PATH --max-listed: %v\n%s", err, o)
	}
}

// TestStdin: - reads standard input for stats, validate and sim --trace.
func TestStdin(t *testing.T) {
	b, _ := os.ReadFile(smallTrace(t))
	if out, se, err := runCLIIn(string(b), "trace", "stats", "--json", "-"); err != nil || !strings.Contains(out, `"requests": 6`) {
		t.Errorf("stats -: %v\n%s%s", err, out, se)
	}
	if out, se, err := runCLIIn(string(b), "trace", "validate", "-"); err != nil || !strings.Contains(out, "standard input: valid") {
		t.Errorf("validate -: %v\n%s%s", err, out, se)
	}
	if out, se, err := runCLIIn(string(b), "sim", "--trace", "-", "--mechanism", "pd-colo", "--colo", "2"); err != nil || !strings.Contains(se, "6 requests from standard input") {
		t.Errorf("sim --trace -: %v\n%s%s", err, out, se)
	}
	if _, _, err := runCLIIn(string(b), "bench", "--trace", "-"); exitCode(err) != exitUsage {
		t.Errorf("bench --trace - (read once per run): %v", err)
	}
}

// TestEmptyInputsAreErrors: nothing to convert, simulate or report is an
// error, never a table of zeros; stats and validate agree on empty files.
func TestEmptyInputsAreErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	header := filepath.Join(dir, "header.jsonl")
	os.WriteFile(header, []byte(`{"pdhybrid_trace":1,"block_size":64}`+"\n"), 0o644)
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("garbage\n"), 0o644)
	emptyDir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "convert", "--from", "weka", "--out", out, emptyDir}, "no request converted"},
		{[]string{"trace", "convert", "--from", "mooncake", "--out", out, garbage}, "no request converted"},
		{[]string{"trace", "convert", "--from", "weka", "--block-size", "100", "--out", out, wekaDir(t)}, "no request converted"},
		{[]string{"trace", "stats", empty}, "empty trace: no requests"},
		{[]string{"trace", "validate", empty}, "empty trace: no requests"},
		{[]string{"trace", "stats", header}, "empty trace: no requests"},
		{[]string{"trace", "validate", header}, "empty trace: no requests"},
		{[]string{"sim", "--trace", header}, "holds no requests"},
		{[]string{"bench", "--trace", header}, "holds no requests"},
		{[]string{"trace", "sample", "--min-turns", "99", "--out", out, smallTrace(t)}, "keeps no request"},
	} {
		_, stderr, err := runCLI(c.args...)
		if exitCode(err) != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, exitCode(err), stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v left %s behind", c.args, out)
			os.Remove(out)
		}
	}
	run := t.TempDir()
	os.WriteFile(filepath.Join(run, "summary.json"), []byte(`{"requests":0}`), 0o644)
	if _, stderr, err := runCLI("report", "--compare", run); exitCode(err) != exitError || !strings.Contains(stderr, "no requests") {
		t.Errorf("report on an empty summary: %v %q", err, stderr)
	}
}

// TestOutRefusesAndForceReplaces: --out into a folder holding a run
// refuses; --force replaces only pdhybrid's files; a folder that is not a
// run is never cleared.
func TestOutRefusesAndForceReplaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, se, err := runCLI("sim", "--synth-sessions", "2", "--out", dir); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	_, se, err := runCLI("sim", "--synth-sessions", "3", "--out", dir)
	if exitCode(err) != exitUsage || !strings.Contains(se, "already holds a run") || !strings.Contains(se, "--force") {
		t.Fatalf("second run into the folder: %v\n%s", err, se)
	}
	mine := filepath.Join(dir, "notes.txt")
	os.WriteFile(mine, []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "structural", "stale.jsonl"), []byte("x"), 0o644)
	if _, se, err := runCLI("sim", "--synth-sessions", "3", "--out", dir, "--force"); err != nil {
		t.Fatalf("--force: %v\n%s", err, se)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Error("--force removed a file pdhybrid did not write")
	}
	var sum struct{ Requests int }
	json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum)
	if n := bytes.Count(mustRead(t, filepath.Join(dir, "metrics.jsonl")), []byte("\n")); n != sum.Requests {
		t.Errorf("metrics.jsonl has %d lines for %d requests: runs mixed", n, sum.Requests)
	}

	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "thesis.tex"), []byte("x"), 0o644)
	for _, cmd := range []string{"sim", "bench"} {
		if _, se, err := runCLI(cmd, "--synth-sessions", "2", "--out", other, "--force"); exitCode(err) != exitUsage || !strings.Contains(se, "holds no pdhybrid") {
			t.Errorf("%s --force into a foreign folder: %v\n%s", cmd, err, se)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "thesis.tex")); err != nil {
		t.Fatal("a foreign folder was cleared")
	}

	// bench --force removes every run folder of the old bench output, so a
	// report on the folder never mixes in a stale run.
	bdir := filepath.Join(t.TempDir(), "b")
	if _, se, err := runCLI("bench", "--synth-sessions", "2", "--dp-policy", "sticky,kv-aware", "--out", bdir); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	if _, _, err := runCLI("bench", "--synth-sessions", "2", "--out", bdir); exitCode(err) != exitUsage {
		t.Fatalf("bench into a bench folder: %v", err)
	}
	if _, se, err := runCLI("bench", "--synth-sessions", "2", "--out", bdir, "--force"); err != nil {
		t.Fatalf("bench --force: %v\n%s", err, se)
	}
	ents, _ := os.ReadDir(bdir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"comparison.json", "dp-x4", "kvc-1p3d", "naive-pd-1p3d", "report"}; !reflect.DeepEqual(names, want) {
		t.Errorf("bench folder after --force holds %v, want %v", names, want)
	}
}

// TestInterruptMarksRunIncomplete runs pdhybrid as a process on a long
// run, sends SIGINT once it has started, and expects a prompt exit 130 with
// a run folder marked incomplete that report labels.
func TestInterruptMarksRunIncomplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	c := pdhybrid(t, "sim", "--synth-requests", "1000000", "--out", dir)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("the run never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	interruptAndWait(t, c, &stderr)
	t.Logf("stopped %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	var sum struct {
		Complete   *bool  `json:"complete"`
		StopReason string `json:"stop_reason"`
		Requests   int    `json:"requests"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Complete == nil || *sum.Complete || sum.StopReason != "interrupted by SIGINT" {
		t.Fatalf("summary complete=%v stop_reason=%q", sum.Complete, sum.StopReason)
	}
	if !strings.Contains(stderr.String(), "interrupted by SIGINT") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
	if sum.Requests > 0 {
		out, _, err := runCLI("report", "--compare", dir)
		if err != nil || !strings.Contains(out, "INCOMPLETE") {
			t.Errorf("report does not label the run: %v\n%s", err, out)
		}
	}
}

// TestWriteErrorsFail: output that cannot be written (a full disk) is a
// failure, not a silent success.
func TestWriteErrorsFail(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	tr := smallTrace(t)
	for _, args := range [][]string{
		{"trace", "stats", tr},
		{"trace", "validate", tr},
		{"trace", "synth", "small-append"},
		{"sim", "--trace", tr, "--mechanism", "pd-colo"},
		{"--help"},
	} {
		c := pdhybrid(t, args...)
		c.Stdout = full
		var stderr bytes.Buffer
		c.Stderr = &stderr
		c.Run()
		if code := c.ProcessState.ExitCode(); code != exitError || !strings.Contains(stderr.String(), "no space left") {
			t.Errorf("%v > /dev/full: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestSummaryDescribesTheRun: summary.json carries what users compare with
// other tools; failed requests have null latencies; no ITL without gaps.
func TestSummaryDescribesTheRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, se, err := runCLI("sim", "--synth-sessions", "3", "--concurrency", "4", "--time-scale", "2", "--max-input-len", "100000",
		"--goodput", "ttft:300", "tpot:50", "--out", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	var sum map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, sum["date"].(string)); err != nil {
		t.Errorf("date %v: %v", sum["date"], err)
	}
	for k, want := range map[string]any{
		"complete": true, "model_id": "qwen3-30b-a3b", "hardware": "h200-141g", "max_concurrency": 4.0, "time_scale": 2.0,
		"slo": map[string]any{"ttft_s": 0.3, "tpot_s": 0.05},
	} {
		if !reflect.DeepEqual(sum[k], want) {
			t.Errorf("%s = %v, want %v", k, sum[k], want)
		}
	}
	if r, _ := sum["request_rate"].(float64); r <= 0 {
		t.Errorf("request_rate %v", sum["request_rate"])
	}
	if w, _ := sum["workload"].(string); !strings.Contains(w, "built-in agentic workload") {
		t.Errorf("workload %q", w)
	}
	if _, ok := sum["sim_duration_s"]; ok {
		t.Error("summary has sim_duration_s besides duration")
	}
	// ITL comes from the engine's inter-token gaps, not from TPOT.
	same := 0
	for _, q := range []string{"mean", "p50", "p90", "p99"} {
		itl, ok := sum[q+"_itl_ms"].(float64)
		if !ok || itl <= 0 {
			t.Errorf("%s_itl_ms = %v, want a positive gap", q, sum[q+"_itl_ms"])
		}
		if itl == sum[q+"_tpot_ms"] {
			same++
		}
	}
	if same == 4 {
		t.Error("ITL equals TPOT at every statistic: a copy, not inter-token gaps")
	}
	if strings.Count(string(mustRead(t, filepath.Join(dir, "summary.json"))), "duration") != 1 {
		t.Error("summary.json has more than one duration")
	}
	failed := 0
	for _, line := range bytes.Split(mustRead(t, filepath.Join(dir, "metrics.jsonl")), []byte("\n")) {
		if bytes.Contains(line, []byte(`"status":"failed"`)) {
			failed++
			if !bytes.Contains(line, []byte(`"ttft_s":null`)) || !bytes.Contains(line, []byte(`"latency_s":null`)) {
				t.Fatalf("failed request with latencies: %s", line)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failed request to check (--max-input-len 100000 should fail the long prompts)")
	}
}

// TestInterruptRemovesPartialOutput: an interrupted trace writer exits 130
// and leaves no truncated file that looks whole (SIGTERM this time).
func TestInterruptRemovesPartialOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "big.jsonl")
	c := pdhybrid(t, "trace", "synth", "agentic", "--requests", "100000000", "--out", out)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(out); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("nothing written")
		}
	}
	signalAndWait(t, c, syscall.SIGTERM, &stderr)
	if !strings.Contains(stderr.String(), "interrupted by SIGTERM") {
		t.Fatalf("stderr %q", stderr.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("partial output left behind")
	}
}

// interruptAndWait sends c SIGINT and waits (up to 20 s) for it to exit
// with the interrupted status, 130.
func interruptAndWait(t *testing.T, c *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	signalAndWait(t, c, syscall.SIGINT, stderr)
}

// signalAndWait sends c sig and waits (up to 20 s) for it to exit with the
// interrupted status, 130.
func signalAndWait(t *testing.T, c *exec.Cmd, sig os.Signal, stderr *bytes.Buffer) {
	t.Helper()
	c.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		t.Fatalf("no exit within 20 s of %v", sig)
	}
	if code := c.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\n%s", code, stderr.String())
	}
}
