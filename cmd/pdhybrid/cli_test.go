package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
				if v == "-1" && strings.Contains(f.Usage, "in [-") {
					continue // its help gives a range with negatives (--local-prefill-margin)
				}
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
		{"--hicache-ratio", []string{"sim", "--enable-hierarchical-cache", "--hicache-ratio", "1"}},
		{"--hicache-write-policy", []string{"bench", "--enable-hierarchical-cache", "--hicache-write-policy", "write_around"}},
		{"--hicache-size", []string{"sim", "--enable-hierarchical-cache", "--hicache-size", "10"}},    // smaller than the HBM pool
		{"--hicache-size", []string{"worker", "--enable-hierarchical-cache", "--hicache-size", "10"}}, // likewise
		{"--hicache-ratio", []string{"bench", "--enable-hierarchical-cache", "--hicache-ratio", "3", "--hicache-size", "500"}},
		{"--hicache-storage-backend", []string{"sim", "--enable-hierarchical-cache", "--hicache-storage-backend", "nfs"}},
		{"--hicache-storage-prefetch-policy", []string{"bench", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-prefetch-policy", "eager"}},
		{"--hicache-storage-size", []string{"sim", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-size", "-1"}},
		{"--hicache-storage-backend", []string{"serve", "--hicache-storage-backend", "nfs"}},
		{"--hicache-storage-shared-url", []string{"worker", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-shared-url", "localhost:9"}},
		{"--hicache-storage-shared-url", []string{"worker", "--hicache-storage-shared-url", "http://127.0.0.1:9"}},     // without a storage tier
		{"--hicache-storage-shared", []string{"up", "--hicache-storage-shared", "--port", "0"}},                        // no worker has a storage tier
		{"--hicache-storage-setup-ms", []string{"serve", "--hicache-storage-setup-ms", "1"}},                           // without a bandwidth
		{"--hicache-storage-prefetch-policy", []string{"serve", "--hicache-storage-prefetch-policy", "wait_complete"}}, // without a link
		{"--hicache-storage-bandwidth", []string{"serve", "--mechanism", "pd-disaggregation", "--hicache-storage-bandwidth", "10"}},
		{"--hicache-storage-shared-bandwidth", []string{"serve", "--hicache-storage-shared-bandwidth", "10"}}, // without a storage link
		{"--hicache-storage-shared-bandwidth", []string{"serve", "--hicache-storage-backend", "mooncake", "--hicache-storage-shared-bandwidth", "-1"}},
		// flags that do not apply to the mode chosen
		{"--hicache-ratio", []string{"sim", "--hicache-ratio", "3"}},
		{"--hicache-storage-backend", []string{"sim", "--hicache-storage-backend", "mooncake"}},
		{"--hicache-storage-shared", []string{"sim", "--enable-hierarchical-cache", "--hicache-storage-shared"}},
		{"--hicache-storage-shared", []string{"worker", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-shared"}},
		{"--hicache-storage-shared-bandwidth", []string{"sim", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-shared-bandwidth", "40"}},
		{"--hicache-storage-shared-bandwidth", []string{"sim", "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake", "--hicache-storage-shared", "--hicache-storage-shared-bandwidth", "-1"}},
		{"--hicache-storage-prefetch-policy", []string{"worker", "--enable-hierarchical-cache", "--hicache-storage-prefetch-policy", "wait_complete"}},
		{"--hicache-write-policy", []string{"worker", "--hicache-write-policy", "write_back"}},
		{"--enable-hierarchical-cache", []string{"worker", "--role", "decode", "--enable-hierarchical-cache"}},
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
