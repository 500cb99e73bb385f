package report

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

// A category that only some runs have must draw their bars around its own
// label, not in the slots of the runs it lacks: otherwise a bar sits nearer
// the next row's label and reads as that row's (the execution-mode mix,
// where each mechanism has modes of its own).
func TestHorizontalBarsCentredOnTheirLabel(t *testing.T) {
	nan := math.NaN()
	c := BarChart{
		Title:      "mix",
		Categories: []string{"a", "b", "c"},
		Groups: []BarGroup{
			{Name: "r0", Color: "#111", Values: []float64{nan, 5, nan}},
			{Name: "r1", Color: "#222", Values: []float64{3, nan, nan}},
			{Name: "r2", Color: "#333", Values: []float64{nan, 4, 2}},
		},
		Value:      Axis{Label: "n", Min: 0, Max: 10},
		Horizontal: true,
	}
	svg := string(c.SVG())
	labels := map[string]float64{}
	for _, m := range regexp.MustCompile(`<text x="[^"]+" y="([^"]+)" text-anchor="end">([abc])</text>`).FindAllStringSubmatch(svg, -1) {
		labels[m[2]] = svgNum(t, m[1]) - 4 // the label's baseline sits 4 px under the row's middle
	}
	if len(labels) != 3 {
		t.Fatalf("found %d category labels, want 3:\n%s", len(labels), svg)
	}
	bars := map[string][]float64{}
	for _, m := range regexp.MustCompile(`<rect class="mark" x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" fill="[^"]+"><title>[^<]+ — ([abc])</title>`).FindAllStringSubmatch(svg, -1) {
		bars[m[3]] = append(bars[m[3]], svgNum(t, m[1])+(svgNum(t, m[2])+1)/2)
	}
	want := map[string]int{"a": 1, "b": 2, "c": 1}
	for cat, n := range want {
		if len(bars[cat]) != n {
			t.Fatalf("category %s: %d bars, want %d", cat, len(bars[cat]), n)
		}
		mean := 0.0
		for _, m := range bars[cat] {
			mean += m
		}
		mean /= float64(n)
		if d := math.Abs(mean - labels[cat]); d > 0.5 {
			t.Errorf("category %s: its bars centre at y=%.1f, its label at y=%.1f", cat, mean, labels[cat])
		}
	}
}

func svgNum(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number in the SVG: %q", s)
	}
	return v
}

// The same for vertical charts (per-worker load: a worker belongs to one
// run, so each category has one bar, which must stand under its label).
func TestVerticalBarsCentredOnTheirLabel(t *testing.T) {
	nan := math.NaN()
	c := BarChart{
		Title:      "load",
		Categories: []string{"a", "b"},
		Groups: []BarGroup{
			{Name: "r0", Color: "#111", Values: []float64{3, nan}},
			{Name: "r1", Color: "#222", Values: []float64{nan, 5}},
			{Name: "r2", Color: "#333", Values: []float64{nan, 4}},
		},
		Value: Axis{Label: "n", Min: 0, Max: 10},
	}
	svg := string(c.SVG())
	labels := map[string]float64{}
	for _, m := range regexp.MustCompile(`<text x="([^"]+)" y="[^"]+" text-anchor="middle">([ab])</text>`).FindAllStringSubmatch(svg, -1) {
		labels[m[2]] = svgNum(t, m[1])
	}
	bars := map[string][]float64{}
	for _, m := range regexp.MustCompile(`<rect class="mark" x="([^"]+)" y="[^"]+" width="([^"]+)" height="[^"]+" fill="[^"]+"><title>[^<]+ — ([ab])</title>`).FindAllStringSubmatch(svg, -1) {
		bars[m[3]] = append(bars[m[3]], svgNum(t, m[1])+(svgNum(t, m[2])+1)/2)
	}
	for cat, n := range map[string]int{"a": 1, "b": 2} {
		if len(bars[cat]) != n || len(labels) != 2 {
			t.Fatalf("category %s: %d bars (want %d), %d labels:\n%s", cat, len(bars[cat]), n, len(labels), svg)
		}
		mean := 0.0
		for _, m := range bars[cat] {
			mean += m
		}
		if d := math.Abs(mean/float64(n) - labels[cat]); d > 0.5 {
			t.Errorf("category %s: its bars centre at x=%.1f, its label at x=%.1f", cat, mean/float64(n), labels[cat])
		}
	}
}
