package main

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
)

// block is one statement block of a coverage profile, in one file.
type block struct {
	file                                 string // base name
	startLine, startCol, endLine, endCol int
}

// contains reports whether line:col lies in the block (a profile's end
// column points just past the block's last character).
func (b block) contains(line, col int) bool {
	if line < b.startLine || line > b.endLine {
		return false
	}
	if line == b.startLine && col < b.startCol {
		return false
	}
	if line == b.endLine && col >= b.endCol {
		return false
	}
	return true
}

// coverage maps each block some test ran to the tests that ran it, with
// each test's duration from its own run.
type coverage struct {
	blocks   map[block]map[string]bool
	duration map[string]float64 // seconds, the test's run alone
}

func newCoverage() *coverage {
	return &coverage{blocks: map[block]map[string]bool{}, duration: map[string]float64{}}
}

// addProfile files one test's profile (go test -coverprofile's text
// format): each block with a count above zero is ran by that test. Only
// files of pkgPath are kept.
func (c *coverage) addProfile(test, pkgPath string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if n == 1 && strings.HasPrefix(line, "mode:") {
			continue
		}
		if line == "" {
			continue
		}
		b, count, file, err := parseProfileLine(line)
		if err != nil {
			return fmt.Errorf("coverage profile of %s, line %d: %w", test, n, err)
		}
		if path.Dir(file) != pkgPath || count == 0 {
			continue
		}
		if c.blocks[b] == nil {
			c.blocks[b] = map[string]bool{}
		}
		c.blocks[b][test] = true
	}
	return sc.Err()
}

// parseProfileLine parses "import/path/file.go:12.3,15.2 4 1".
func parseProfileLine(line string) (block, int, string, error) {
	colon := strings.LastIndex(line, ":")
	if colon < 0 {
		return block{}, 0, "", fmt.Errorf("%q: want file:start,end statements count", line)
	}
	file := line[:colon]
	var b block
	var stmts, count int
	if _, err := fmt.Sscanf(line[colon+1:], "%d.%d,%d.%d %d %d", &b.startLine, &b.startCol, &b.endLine, &b.endCol, &stmts, &count); err != nil {
		return block{}, 0, "", fmt.Errorf("%q: want file:start,end statements count: %v", line, err)
	}
	b.file = path.Base(file)
	return b, count, file, nil
}

// testsFor returns the tests that ran line:col of file, sorted; none
// means the mutant there is not covered.
func (c *coverage) testsFor(file string, line, col int) []string {
	set := map[string]bool{}
	for b, tests := range c.blocks {
		if b.file == file && b.contains(line, col) {
			for t := range tests {
				set[t] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// budget is how long a mutant's selected tests may run: coef times their
// durations alone, plus a floor for the process start and a loaded machine.
func (c *coverage) budget(tests []string, coef, floorS float64) float64 {
	var sum float64
	for _, t := range tests {
		sum += c.duration[t]
	}
	return coef*sum + floorS
}

// runPattern is the -test.run pattern selecting exactly these top-level tests.
func runPattern(tests []string) string {
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}
