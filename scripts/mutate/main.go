// Command mutate is a mutation tester for one Go package that runs, per
// mutant, only the tests that cover the mutated line, against one test
// binary holding every mutant (a mutant schema, schema.go). It exists for
// packages whose whole suite is too slow to run once per mutant, as
// gremlins does (internal/gateway: about 75 s a run); docs/mutation.md has
// its usage and results.
//
//  1. Mutants: gremlins' default operator families (mutant.go), found with
//     go/ast and go/types in the chosen files, optionally only in line
//     ranges (-lines).
//  2. Coverage per test: one coverage-instrumented test binary, run once
//     per top-level test with -test.coverprofile; a mutant's tests are the
//     ones whose profile ran its line (cover.go). A mutant no test runs is
//     "not covered".
//  3. One schema binary, built once with go test -overlay; each mutant is
//     a run of it with $PDMUT_ID set and -test.run naming its tests, killed
//     after -coef times those tests' own durations plus -floor.
//  4. A report per file: killed, timed out, lived, not covered, and the
//     score, detected (killed or timed out) over all mutants.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Statuses, as gremlins names them.
const (
	stKilled     = "KILLED"
	stLived      = "LIVED"
	stTimedOut   = "TIMED OUT"
	stNotCovered = "NOT COVERED"
)

type options struct {
	pkg      string
	files    []string
	lines    []lineRange
	coef     float64
	floorS   float64
	workers  int
	logPath  string
	jsonPath string
	list     bool
	only     map[int]bool
	work     string
	testCPU  string
	// flakyRetries is how many more times a test failing alone in the
	// coverage pass, or the baseline, is run before giving up on it.
	flakyRetries int
	// memMB caps each test run's address space (ulimit -v): a mutant that
	// appends forever fails on allocation instead of taking the machine's
	// memory from everyone else.
	memMB int
	// reuse takes the coverage profiles, durations and schema binary of an
	// earlier run in -work (same sources), to run more mutants of it.
	reuse bool
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	o := &options{}
	files := fs.String("files", "", "comma-separated file names in the package to mutate (default: every non-test file)")
	lines := fs.String("lines", "", "only mutants in these ranges: file.go:FROM-TO[,file.go:FROM-TO…]")
	only := fs.String("only", "", "run only these mutant ids (comma-separated; ids from -list)")
	fs.Float64Var(&o.coef, "coef", 10, "timeout coefficient: a mutant's tests may run this many times their own durations (> 0)")
	fs.Float64Var(&o.floorS, "floor", 10, "seconds added to every mutant's timeout (>= 0)")
	fs.IntVar(&o.workers, "workers", 1, "mutants run at once (>= 1)")
	fs.StringVar(&o.logPath, "log", "", "progress log file (default: stderr)")
	fs.StringVar(&o.jsonPath, "json", "", "write every mutant with its status and tests to this file")
	fs.BoolVar(&o.list, "list", false, "list the mutants and their covering tests; run none")
	fs.StringVar(&o.work, "work", "", "work directory for binaries and profiles (default: a temporary one, removed after)")
	fs.StringVar(&o.testCPU, "test-cpu", "", "pass -test.cpu to every test run")
	fs.BoolVar(&o.reuse, "reuse", false, "reuse -work's coverage profiles, durations and schema binary from an earlier run of the same sources (no coverage pass, build or baseline)")
	fs.IntVar(&o.memMB, "mem-mb", 4096, "address-space cap per test run in MiB, through ulimit -v (0: none)")
	fs.IntVar(&o.flakyRetries, "flaky-retries", 2, "runs more of a test that fails alone with no mutant, before leaving it out (>= 0)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, errors.New("want one package argument, e.g. ./internal/gateway")
	}
	o.pkg = fs.Arg(0)
	if o.coef <= 0 {
		return nil, fmt.Errorf("-coef %v: want > 0", o.coef)
	}
	if o.floorS < 0 {
		return nil, fmt.Errorf("-floor %v: want >= 0", o.floorS)
	}
	if o.reuse && o.work == "" {
		return nil, errors.New("-reuse needs -work")
	}
	if o.memMB < 0 {
		return nil, fmt.Errorf("-mem-mb %d: want >= 0", o.memMB)
	}
	if o.flakyRetries < 0 {
		return nil, fmt.Errorf("-flaky-retries %d: want >= 0", o.flakyRetries)
	}
	if o.workers < 1 {
		return nil, fmt.Errorf("-workers %d: want >= 1", o.workers)
	}
	if *files != "" {
		o.files = strings.Split(*files, ",")
	}
	var err error
	if o.lines, err = parseLineRanges(*lines); err != nil {
		return nil, fmt.Errorf("-lines: %w", err)
	}
	if *only != "" {
		o.only = map[int]bool{}
		for _, f := range strings.Split(*only, ",") {
			id, err := strconv.Atoi(f)
			if err != nil || id < 1 {
				return nil, fmt.Errorf("-only %q: want mutant ids >= 1", f)
			}
			o.only[id] = true
		}
	}
	return o, nil
}

// lineRange is file.go:from-to, inclusive.
type lineRange struct {
	file     string
	from, to int
}

func parseLineRanges(s string) ([]lineRange, error) {
	if s == "" {
		return nil, nil
	}
	var out []lineRange
	for _, f := range strings.Split(s, ",") {
		file, span, ok := strings.Cut(f, ":")
		a, b, ok2 := strings.Cut(span, "-")
		from, err1 := strconv.Atoi(a)
		to, err2 := strconv.Atoi(b)
		if !ok || !ok2 || err1 != nil || err2 != nil || from < 1 || to < from {
			return nil, fmt.Errorf("%q: want file.go:FROM-TO with 1 <= FROM <= TO", f)
		}
		out = append(out, lineRange{file, from, to})
	}
	return out, nil
}

func inRanges(rs []lineRange, file string, line int) bool {
	if len(rs) == 0 {
		return true
	}
	for _, r := range rs {
		if r.file == file && line >= r.from && line <= r.to {
			return true
		}
	}
	return false
}

// pkgInfo is what go list says of the package.
type pkgInfo struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
}

func goList(pkg string) (*pkgInfo, error) {
	out, err := exec.Command("go", "list", "-json", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pkg, stderrOf(err))
	}
	var p pkgInfo
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("go list %s: %w", pkg, err)
	}
	return &p, nil
}

func stderrOf(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

// typeCheck parses the package's files and checks them against its
// dependencies' export data (from go list -export), for findSites.
func typeCheck(p *pkgInfo, fset *token.FileSet) (map[string]*ast.File, *types.Info, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", p.ImportPath).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list -export: %w", stderrOf(err))
	}
	exports := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if path, file, ok := strings.Cut(l, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	files := map[string]*ast.File{}
	var list []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		files[name] = f
		list = append(list, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(p.ImportPath, fset, list, info); err != nil {
		return nil, nil, fmt.Errorf("type-checking %s: %w", p.ImportPath, err)
	}
	return files, info, nil
}

// plan is the package's mutants and, per file, its sites and source.
type plan struct {
	mutants []*Mutant
	sites   map[string][]*site
	src     map[string][]byte
}

func makePlan(o *options, p *pkgInfo) (*plan, error) {
	fset := token.NewFileSet()
	files, info, err := typeCheck(p, fset)
	if err != nil {
		return nil, err
	}
	names := o.files
	if len(names) == 0 {
		names = p.GoFiles
	}
	pl := &plan{sites: map[string][]*site{}, src: map[string][]byte{}}
	id := 0
	for _, name := range names {
		f, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("-files: %s is not a non-test file of %s (have %s)", name, p.ImportPath, strings.Join(p.GoFiles, ", "))
		}
		src, err := os.ReadFile(filepath.Join(p.Dir, name))
		if err != nil {
			return nil, err
		}
		var kept []*site
		for _, s := range findSites(fset, f, info) {
			var ms []*Mutant
			for _, m := range s.muts {
				m.File = name
				if inRanges(o.lines, name, m.Line) {
					id++
					m.ID = id
					ms = append(ms, m)
				}
			}
			if len(ms) > 0 {
				s.muts = ms
				kept = append(kept, s)
				pl.mutants = append(pl.mutants, ms...)
			}
		}
		pl.sites[name] = kept
		pl.src[name] = src
	}
	return pl, nil
}

// logger writes progress lines, time-stamped, safe for the workers.
type logger struct {
	mu sync.Mutex
	w  io.Writer
	t0 time.Time
}

func (l *logger) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s +%s %s\n", time.Now().UTC().Format("15:04:05"), time.Since(l.t0).Round(time.Second), fmt.Sprintf(format, a...))
}

func run(o *options, stdout io.Writer) error {
	t0 := time.Now()
	logw := io.Writer(os.Stderr)
	if o.logPath != "" {
		f, err := os.Create(o.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		logw = f
	}
	log := &logger{w: logw, t0: t0}
	p, err := goList(o.pkg)
	if err != nil {
		return err
	}
	pl, err := makePlan(o, p)
	if err != nil {
		return err
	}
	log.printf("%d mutants in %s (%s)", len(pl.mutants), p.ImportPath, strings.Join(sortedKeys(pl.sites), ", "))
	work := o.work
	if work == "" {
		if work, err = os.MkdirTemp("", "mutate-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	work, _ = filepath.Abs(work)

	var cov *coverage
	if o.reuse {
		cov, err = loadCoverage(p, work)
	} else {
		cov, err = measureCoverage(o, p, work, log)
	}
	if err != nil {
		return err
	}
	for _, m := range pl.mutants {
		line, col := m.coverPos()
		m.Tests = cov.testsFor(m.File, line, col)
		if len(m.Tests) == 0 {
			m.Status = stNotCovered
		}
	}
	if o.list {
		for _, m := range pl.mutants {
			fmt.Fprintf(stdout, "%4d %s  [%s]\n", m.ID, m, strings.Join(m.Tests, " "))
		}
		return nil
	}
	bin := filepath.Join(work, "schema.test")
	if !o.reuse {
		if bin, err = buildSchema(p, pl, work, log); err != nil {
			return err
		}
		if err := baseline(o, p, pl, cov, bin, log); err != nil {
			return err
		}
	}
	runMutants(o, p, pl, cov, bin, log)
	log.printf("done in %s", time.Since(t0).Round(time.Second))
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(pl.mutants, "", " ")
		if err := os.WriteFile(o.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	report(stdout, pl, time.Since(t0))
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// measureCoverage builds the coverage binary and runs each top-level test
// alone under it; a test that fails alone is left out (logged).
func measureCoverage(o *options, p *pkgInfo, work string, log *logger) (*coverage, error) {
	bin := filepath.Join(work, "cover.test")
	log.printf("building the coverage binary")
	if out, err := exec.Command("go", "test", "-c", "-vet=off", "-cover", "-covermode=set", "-o", bin, p.ImportPath).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c -cover: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-test.list", ".")
	cmd.Dir = p.Dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing tests: %w", stderrOf(err))
	}
	var tests []string
	for _, t := range strings.Fields(string(out)) {
		if strings.HasPrefix(t, "Test") || strings.HasPrefix(t, "Fuzz") || strings.HasPrefix(t, "Example") {
			tests = append(tests, t)
		}
	}
	cov := newCoverage()
	dir := filepath.Join(work, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i, t := range tests {
		prof := filepath.Join(dir, t+".out")
		args := []string{"-test.run", runPattern([]string{t}), "-test.count", "1", "-test.coverprofile", prof}
		if o.testCPU != "" {
			args = append(args, "-test.cpu", o.testCPU)
		}
		var out []byte
		var err error
		var d float64
		// A test that fails alone is tried again (a loaded machine makes
		// some live tests flaky); left out only if it fails every time.
		for try := 1; try <= 1+o.flakyRetries; try++ {
			c := testCommand(context.Background(), o, bin, args)
			c.Dir = p.Dir
			start := time.Now()
			out, err = c.CombinedOutput()
			d = time.Since(start).Seconds()
			if err == nil {
				break
			}
			log.printf("coverage %d/%d %s FAILED alone (try %d): %v\n%s", i+1, len(tests), t, try, err, tail(out, 2000))
		}
		if err != nil {
			log.printf("coverage %d/%d %s left out: it fails alone", i+1, len(tests), t)
			continue
		}
		f, err := os.Open(prof)
		if err != nil {
			return nil, err
		}
		err = cov.addProfile(t, p.ImportPath, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		cov.duration[t] = d
		log.printf("coverage %d/%d %s %.1fs", i+1, len(tests), t, d)
	}
	b, _ := json.Marshal(cov.duration)
	return cov, os.WriteFile(filepath.Join(work, "durations.json"), b, 0o644)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// buildSchema writes the rewritten files and the helpers, and builds the
// schema test binary through an overlay (the worktree is not touched).
func buildSchema(p *pkgInfo, pl *plan, work string, log *logger) (string, error) {
	dir := filepath.Join(work, "schema")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	replace := map[string]string{}
	for name, sites := range pl.sites {
		out := filepath.Join(dir, name)
		if err := os.WriteFile(out, []byte(renderSchema(pl.src[name], sites)), 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(p.Dir, name)] = out
	}
	helpers := filepath.Join(dir, "zz_pdmut_schema.go")
	if err := os.WriteFile(helpers, []byte(schemaHelpers(p.Name)), 0o644); err != nil {
		return "", err
	}
	replace[filepath.Join(p.Dir, "zz_pdmut_schema.go")] = helpers
	ov, _ := json.Marshal(map[string]any{"Replace": replace})
	ovPath := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(work, "schema.test")
	log.printf("building the schema binary")
	if out, err := exec.Command("go", "test", "-c", "-vet=off", "-overlay", ovPath, "-o", bin, p.ImportPath).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the mutant schema (rewritten files in %s): %v\n%s", dir, err, out)
	}
	return bin, nil
}

// selectedTests is every test some mutant to run needs.
func selectedTests(o *options, pl *plan) []string {
	set := map[string]bool{}
	for _, m := range pl.mutants {
		if m.Status == "" && (o.only == nil || o.only[m.ID]) {
			for _, t := range m.Tests {
				set[t] = true
			}
		}
	}
	return sortedKeys(set)
}

// baseline runs the mutants' tests on the schema binary with no mutant
// on: they must pass, or every "killed" would mean nothing.
func baseline(o *options, p *pkgInfo, pl *plan, cov *coverage, bin string, log *logger) error {
	tests := selectedTests(o, pl)
	if len(tests) == 0 {
		return nil
	}
	budget := cov.budget(tests, o.coef, o.floorS)
	log.printf("baseline: %d tests, no mutant", len(tests))
	st, out, d := runTests(o, p, bin, 0, tests, budget)
	for try := 0; st != stLived && try < o.flakyRetries; try++ {
		log.printf("baseline %s after %.1fs, again:\n%s", st, d, tail(out, 2000))
		st, out, d = runTests(o, p, bin, 0, tests, budget)
	}
	if st != stLived {
		return fmt.Errorf("the schema binary fails its tests with no mutant on (%s after %.1fs); is a test flaky?\n%s", st, d, tail(out, 4000))
	}
	log.printf("baseline passed in %.1fs", d)
	return nil
}

// runTests runs the schema binary with mutant id on and the given tests;
// LIVED is a pass. The whole process group is killed at the budget, so no
// test binary of an endless mutant is left spinning.
func runTests(o *options, p *pkgInfo, bin string, id int, tests []string, budgetS float64) (string, []byte, float64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(budgetS*float64(time.Second)))
	defer cancel()
	args := []string{"-test.run", runPattern(tests), "-test.count", "1", "-test.failfast"}
	if o.testCPU != "" {
		args = append(args, "-test.cpu", o.testCPU)
	}
	c := testCommand(ctx, o, bin, args)
	c.Dir = p.Dir
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envID, id))
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	var buf bytes.Buffer
	c.Stdout, c.Stderr = &buf, &buf
	start := time.Now()
	err := c.Run()
	d := time.Since(start).Seconds()
	switch {
	case ctx.Err() != nil:
		return stTimedOut, buf.Bytes(), d
	case err != nil:
		return stKilled, buf.Bytes(), d
	}
	return stLived, buf.Bytes(), d
}

func runMutants(o *options, p *pkgInfo, pl *plan, cov *coverage, bin string, log *logger) {
	var todo []*Mutant
	for _, m := range pl.mutants {
		if m.Status == "" && (o.only == nil || o.only[m.ID]) {
			todo = append(todo, m)
		}
	}
	ch := make(chan *Mutant)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range o.workers {
		wg.Go(func() {
			for m := range ch {
				st, _, d := runTests(o, p, bin, m.ID, m.Tests, cov.budget(m.Tests, o.coef, o.floorS))
				mu.Lock()
				m.Status, m.DurationS = st, d
				done++
				n := done
				mu.Unlock()
				log.printf("%d/%d #%d %s %s (%d tests, %.1fs)", n, len(todo), m.ID, m, st, len(m.Tests), d)
			}
		})
	}
	for _, m := range todo {
		ch <- m
	}
	close(ch)
	wg.Wait()
}

// testCommand runs a test binary, under ulimit -v when -mem-mb is set.
func testCommand(ctx context.Context, o *options, bin string, args []string) *exec.Cmd {
	if o.memMB > 0 {
		return exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, o.memMB*1024), bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// loadCoverage reads what measureCoverage left in work: durations.json
// (test → seconds) and one profile per test that passed.
func loadCoverage(p *pkgInfo, work string) (*coverage, error) {
	cov := newCoverage()
	b, err := os.ReadFile(filepath.Join(work, "durations.json"))
	if err != nil {
		return nil, fmt.Errorf("-reuse: %w", err)
	}
	if err := json.Unmarshal(b, &cov.duration); err != nil {
		return nil, fmt.Errorf("-reuse: durations.json: %w", err)
	}
	for t := range cov.duration {
		f, err := os.Open(filepath.Join(work, "profiles", t+".out"))
		if err != nil {
			return nil, fmt.Errorf("-reuse: %w", err)
		}
		err = cov.addProfile(t, p.ImportPath, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return cov, nil
}
