package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// tally is one file's (or the total's) counts.
type tally struct {
	mutants, killed, timedOut, lived, notCovered, notRun int
}

func (t *tally) add(m *Mutant) {
	t.mutants++
	switch m.Status {
	case stKilled:
		t.killed++
	case stTimedOut:
		t.timedOut++
	case stLived:
		t.lived++
	case stNotCovered:
		t.notCovered++
	default:
		t.notRun++
	}
}

// score is detected (killed or timed out) over every mutant, the not
// covered included, as docs/mutation.md defines it.
func (t tally) score() float64 {
	if t.mutants == 0 {
		return 0
	}
	return 100 * float64(t.killed+t.timedOut) / float64(t.mutants)
}

// report writes the per-file table, then the mutants that lived and the
// lines not covered, in markdown.
func report(w io.Writer, pl *plan, took time.Duration) {
	byFile := map[string]*tally{}
	var total tally
	for _, m := range pl.mutants {
		if byFile[m.File] == nil {
			byFile[m.File] = &tally{}
		}
		byFile[m.File].add(m)
		total.add(m)
	}
	fmt.Fprintln(w, "| file | mutants | killed | timed out | lived | not covered | not run | score |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	row := func(name string, t tally) {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %.1f %% |\n", name, t.mutants, t.killed, t.timedOut, t.lived, t.notCovered, t.notRun, t.score())
	}
	for _, f := range sortedKeys(byFile) {
		row("`"+f+"`", *byFile[f])
	}
	row("**all**", total)
	fmt.Fprintf(w, "\n%s in all.\n", took.Round(time.Second))
	var lived []*Mutant
	notCovered := map[string][]int{}
	for _, m := range pl.mutants {
		switch m.Status {
		case stLived:
			lived = append(lived, m)
		case stNotCovered:
			notCovered[m.File] = append(notCovered[m.File], m.Line)
		}
	}
	if len(lived) > 0 {
		fmt.Fprintln(w, "\nLived:")
		for _, m := range lived {
			fmt.Fprintf(w, "- #%d `%s` (tests: %s)\n", m.ID, m, strings.Join(m.Tests, ", "))
		}
	}
	if len(notCovered) > 0 {
		fmt.Fprintln(w, "\nNot covered (lines):")
		for _, f := range sortedKeys(notCovered) {
			fmt.Fprintf(w, "- `%s`: %s\n", f, lineList(notCovered[f]))
		}
	}
}

// lineList writes sorted, deduplicated line numbers with runs joined: 3, 7–9.
func lineList(lines []int) string {
	sort.Ints(lines)
	var parts []string
	for i := 0; i < len(lines); {
		j := i
		for j+1 < len(lines) && lines[j+1] <= lines[j]+1 {
			j++
		}
		if lines[i] == lines[j] {
			parts = append(parts, fmt.Sprint(lines[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", lines[i], lines[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
