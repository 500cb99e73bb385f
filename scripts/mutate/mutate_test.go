package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// sample holds one site of each kind, nested sites, a condition
// over two lines, and what must not be mutated: constants, an array length,
// string concatenation.
const sample = `package main

import (
	"fmt"
	"os"
)

const limit = 2 + 3

var table [limit * 2]int

func f(a, b int, s string) (int, bool, string) {
	n := 0
	for i := int8(0); i < int8(a); i++ {
		n += int(i) * b
	}
	n--
	ok := a+1 > b &&
		n != -b
	return n % 7, ok, s + "!"
}

func main() {
	for a := int8(-2); a <= 3; a++ { // int8: a mutated loop wraps, and ends
		for b := int8(-1); b <= 2; b++ {
			n, ok, s := f(int(a), int(b), "x")
			fmt.Fprintln(os.Stdout, a, b, n, ok, s, len(table))
		}
	}
}
`

func parseSample(t *testing.T, src string) (*token.FileSet, *ast.File, *types.Info) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "sample.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: fakeImporter{}}
	if _, err := conf.Check("main", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	return fset, f, info
}

// fakeImporter gives fmt and os as empty-enough packages for the sample.
type fakeImporter struct{}

func (fakeImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, path)
	switch path {
	case "fmt":
		sig := types.NewSignatureType(nil, nil, nil, types.NewTuple(types.NewVar(0, p, "w", types.NewInterfaceType(nil, nil)), types.NewVar(0, p, "a", types.NewSlice(types.NewInterfaceType(nil, nil)))), nil, true)
		p.Scope().Insert(types.NewFunc(0, p, "Fprintln", sig))
	case "os":
		p.Scope().Insert(types.NewVar(0, p, "Stdout", types.NewInterfaceType(nil, nil)))
	}
	p.MarkComplete()
	return p, nil
}

func mutantsOf(sites []*site) []*Mutant {
	var out []*Mutant
	id := 0
	for _, s := range sites {
		for _, m := range s.muts {
			id++
			m.ID = id
			out = append(out, m)
		}
	}
	return out
}

// TestFindSites: gremlins' families at the operator's position; nothing in
// a constant, an array length or a string concatenation.
func TestFindSites(t *testing.T) {
	fset, f, info := parseSample(t, sample)
	var got []string
	for _, m := range mutantsOf(findSites(fset, f, info)) {
		got = append(got, fmt.Sprintf("%d:%d %s %s → %s", m.Line, m.Col, m.Family, m.From, m.To))
	}
	want := []string{
		"14:22 CONDITIONALS_BOUNDARY < → <=", "14:22 CONDITIONALS_NEGATION < → >=",
		"14:34 INCREMENT_DECREMENT ++ → --",
		"15:15 ARITHMETIC_BASE * → /",
		"17:3 INCREMENT_DECREMENT -- → ++",
		"18:12 CONDITIONALS_BOUNDARY > → >=", "18:12 CONDITIONALS_NEGATION > → <=",
		"18:9 ARITHMETIC_BASE + → -", // inside the comparison: its site nests in the comparison's
		"19:5 CONDITIONALS_NEGATION != → ==",
		"19:8 INVERT_NEGATIVES - → +",
		"20:11 ARITHMETIC_BASE % → *", // not the string +: it has no -
		// int8(-2): a constant, left out
		"24:23 CONDITIONALS_BOUNDARY <= → <", "24:23 CONDITIONALS_NEGATION <= → >",
		"24:30 INCREMENT_DECREMENT ++ → --",
		"25:24 CONDITIONALS_BOUNDARY <= → <", "25:24 CONDITIONALS_NEGATION <= → >",
		"25:31 INCREMENT_DECREMENT ++ → --",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without types the constant and the string + are mutated too: the
	// type information is what leaves them out.
	f2, _ := parser.ParseFile(fset, "sample.go", sample, 0)
	if n, m := len(mutantsOf(findSites(fset, f2, nil))), len(want); n <= m {
		t.Fatalf("without types %d mutants, want more than %d", n, m)
	}
}

// TestSchemaBehavesAsEachMutant builds the sample's schema once and, for
// every mutant, the sample with that one operator changed by hand; the
// schema run with $PDMUT_ID set must print what the hand-mutated program
// prints, and with no id what the original prints. This is the property
// the whole tool rests on.
func TestSchemaBehavesAsEachMutant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program per mutant")
	}
	fset, f, info := parseSample(t, sample)
	sites := findSites(fset, f, info)
	muts := mutantsOf(sites)
	dir := t.TempDir()
	build := func(name, src string, extra ...string) string {
		d := filepath.Join(dir, name)
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "go.mod"), []byte("module sample\n\ngo 1.22\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "main.go"), []byte(src), 0o644))
		if len(extra) > 0 {
			must(t, os.WriteFile(filepath.Join(d, "zz.go"), []byte(extra[0]), 0o644))
		}
		bin := filepath.Join(d, "bin")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s\n%s", name, err, out, src)
		}
		return bin
	}
	runBin := func(bin string, id int) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envID, id))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "error: " + err.Error()
		}
		return string(out)
	}
	schemaSrc := renderSchema([]byte(sample), sites)
	if a, b := strings.Count(schemaSrc, "\n"), strings.Count(sample, "\n"); a != b {
		t.Errorf("schema has %d lines, the source %d: line numbers must stay the source's", a, b)
	}
	schema := build("schema", schemaSrc, schemaHelpers("main"))
	orig := build("orig", sample)
	if got, want := runBin(schema, 0), runBin(orig, 0); got != want {
		t.Fatalf("schema with no mutant prints\n%s\nthe original\n%s", got, want)
	}
	lines := strings.Split(sample, "\n")
	distinct := map[string]bool{}
	for _, m := range muts {
		mutated := slices.Clone(lines)
		l := mutated[m.Line-1]
		at := m.Col - 1
		if !strings.HasPrefix(l[at:], m.From) {
			t.Fatalf("%s: line %q has no %s at column %d", m, l, m.From, m.Col)
		}
		to := m.To
		if m.Family == opInvertNeg {
			to = ""
		}
		mutated[m.Line-1] = l[:at] + to + l[at+len(m.From):]
		want := runBin(build(fmt.Sprintf("m%d", m.ID), strings.Join(mutated, "\n")), 0)
		if got := runBin(schema, m.ID); got != want {
			t.Errorf("mutant %s: schema prints\n%s\nthe hand-mutated program\n%s", m, got, want)
		}
		distinct[want] = true
	}
	if len(distinct) < len(muts)/2 {
		t.Errorf("only %d distinct outputs over %d mutants: the sample does not tell mutants apart", len(distinct), len(muts))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCoverageSelection: a mutant's tests are those whose profile ran a
// block holding its position, blocks with count 0 and other packages'
// files left out; the block's end column is exclusive.
func TestCoverageSelection(t *testing.T) {
	c := newCoverage()
	profiles := map[string]string{
		"TestA": "mode: set\nex/pkg/a.go:10.2,12.10 2 1\nex/pkg/a.go:14.2,14.20 1 0\nex/other/a.go:10.2,12.10 2 1\n",
		"TestB": "mode: set\nex/pkg/a.go:10.2,12.10 2 0\nex/pkg/a.go:14.2,14.20 1 1\n",
		"TestC": "mode: set\nex/pkg/a.go:10.2,12.10 2 1\nex/pkg/b.go:1.1,3.2 1 1\n",
	}
	for _, name := range []string{"TestA", "TestB", "TestC"} {
		must(t, c.addProfile(name, "ex/pkg", strings.NewReader(profiles[name])))
	}
	c.duration = map[string]float64{"TestA": 1, "TestB": 2, "TestC": 4}
	for _, tc := range []struct {
		file      string
		line, col int
		want      []string
	}{
		{"a.go", 10, 2, []string{"TestA", "TestC"}},
		{"a.go", 10, 1, nil},
		{"a.go", 11, 80, []string{"TestA", "TestC"}},
		{"a.go", 12, 9, []string{"TestA", "TestC"}},
		{"a.go", 12, 10, nil},
		{"a.go", 14, 5, []string{"TestB"}},
		{"a.go", 13, 5, nil},
		{"b.go", 2, 1, []string{"TestC"}},
		{"c.go", 2, 1, nil},
	} {
		if got := c.testsFor(tc.file, tc.line, tc.col); !slices.Equal(got, tc.want) {
			t.Errorf("testsFor(%s:%d:%d) = %v, want %v", tc.file, tc.line, tc.col, got, tc.want)
		}
	}
	if got := c.budget([]string{"TestA", "TestC"}, 3, 2); got != 17 {
		t.Errorf("budget = %v, want 3*(1+4)+2 = 17", got)
	}
	if err := c.addProfile("TestD", "ex/pkg", strings.NewReader("mode: set\nex/pkg/a.go:10.2 12.10\n")); err == nil || !strings.Contains(err.Error(), "TestD, line 2") {
		t.Errorf("a bad profile line: %v, want an error naming the test and line", err)
	}
}

func TestRunPattern(t *testing.T) {
	p := runPattern([]string{"TestA", "TestA2", "Fuzz.X"})
	re := regexp.MustCompile(p)
	for name, want := range map[string]bool{"TestA": true, "TestA2": true, "Fuzz.X": true, "TestAB": false, "FuzzYX": false, "XTestA": false} {
		if re.MatchString(name) != want {
			t.Errorf("%s matches %s: %v, want %v", p, name, !want, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-lines", "a.go:3-9,b.go:1-1", "-only", "4,7", "./x"})
	if err != nil {
		t.Fatal(err)
	}
	if !inRanges(o.lines, "a.go", 3) || !inRanges(o.lines, "a.go", 9) || inRanges(o.lines, "a.go", 10) || inRanges(o.lines, "b.go", 2) || !o.only[7] || o.pkg != "./x" {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range [][]string{
		{"-lines", "a.go:9-3", "./x"}, {"-lines", "a.go", "./x"}, {"-only", "0", "./x"},
		{"-coef", "0", "./x"}, {"-workers", "0", "./x"}, {"-floor", "-1", "./x"}, {},
		{"-reuse", "./x"}, {"-mem-mb", "-1", "./x"}, {"-flaky-retries", "-1", "./x"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
}

func TestLineList(t *testing.T) {
	if got := lineList([]int{9, 3, 7, 8, 3, 12}); got != "3, 7–9, 12" {
		t.Errorf("lineList = %q", got)
	}
}

// TestCaseExpressionsCoveredBySwitch: a mutant in a case expression (which
// no block of Go's coverage profile holds) reads its coverage at the
// switch statement, so the tests that reached the switch run it; one in a
// case body keeps its own position.
func TestCaseExpressionsCoveredBySwitch(t *testing.T) {
	const src = `package p

func g(n int) int {
	switch {
	case n >= 4:
		return n - 1
	}
	return 0
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mutantsOf(findSites(fset, f, nil)) {
		l, c := m.coverPos()
		got = append(got, fmt.Sprintf("%d:%d %s→%s covered at %d:%d", m.Line, m.Col, m.From, m.To, l, c))
	}
	want := []string{"5:9 >=→> covered at 4:2", "5:9 >=→< covered at 4:2", "6:12 -→+ covered at 6:12"}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
