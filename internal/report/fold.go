package report

import (
	"fmt"
	"math"
	"strings"
)

// A chart folds away when the runs shown make it trivial: a share chart in
// which every run has all of its share (100%) in one category says nothing
// the headline does not, and hides the charts that do behind a wall of
// full-length bars. The page keeps it, closed, with a one-line note.

// bar reports whether v draws a bar: finite and not zero.
func bar(v float64) bool { return v != 0 && !math.IsNaN(v) && !math.IsInf(v, 0) }

// soleCategory returns the index of g's only bar, or -1 when it has none
// or several.
func soleCategory(g BarGroup) int {
	k := -1
	for i, v := range g.Values {
		if !bar(v) {
			continue
		}
		if k >= 0 {
			return -1
		}
		k = i
	}
	return k
}

// hasData reports whether g draws any bar.
func hasData(g BarGroup) bool {
	for _, v := range g.Values {
		if bar(v) {
			return true
		}
	}
	return false
}

// OneCategoryEach reports whether every run with data has a bar in exactly
// one category, and at least one run has data.
func OneCategoryEach(groups []BarGroup) bool {
	seen := false
	for _, g := range groups {
		if !hasData(g) {
			continue
		}
		if soleCategory(g) < 0 {
			return false
		}
		seen = true
	}
	return seen
}

// TrivialShares reports whether a share chart is 100% one category for
// every run with data.
func TrivialShares(groups []BarGroup) bool {
	if !OneCategoryEach(groups) {
		return false
	}
	for _, g := range groups {
		if k := soleCategory(g); k >= 0 && math.Abs(g.Values[k]-1) > 1e-9 {
			return false
		}
	}
	return true
}

// soleCategories says which category each run's bar is in, one clause
// per category: "x (a, b), y (4 runs)": runs are named while there are at
// most two, so the note stays one line for many runs.
func soleCategories(names []string, groups []BarGroup, cats []string) string {
	var order []string
	runs := map[string][]string{}
	for i, g := range groups {
		k := soleCategory(g)
		if k < 0 || k >= len(cats) || i >= len(names) {
			continue
		}
		if _, ok := runs[cats[k]]; !ok {
			order = append(order, cats[k])
		}
		runs[cats[k]] = append(runs[cats[k]], names[i])
	}
	parts := make([]string, len(order))
	for i, c := range order {
		rs := runs[c]
		if len(rs) <= 2 {
			parts[i] = c + " (" + strings.Join(rs, ", ") + ")"
		} else {
			parts[i] = fmt.Sprintf("%s (%d runs)", c, len(rs))
		}
	}
	return strings.Join(parts, "; ")
}
