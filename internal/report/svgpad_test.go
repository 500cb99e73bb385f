package report

import (
	"regexp"
	"strings"
	"testing"
)

// A padded axis keeps a constant series off both edges of the frame: the
// sweep's failures chart, where every cell failing once drew its line on
// the frame's top edge and no failures on its bottom one.
func TestPaddedAxisKeepsConstantSeriesInsideTheFrame(t *testing.T) {
	for _, y := range []float64{0, 1, 3} {
		c := LineChart{
			Title: "failures",
			X:     Axis{Label: "knob"},
			Y:     Axis{Label: "failures", Pad: 0.04},
			Lines: []Line{{Name: "a", Color: "#123456", X: []float64{1, 2, 3}, Y: []float64{y, y, y}, Marks: true}},
		}
		svg := string(c.SVG())
		fr := regexp.MustCompile(`data-frame="([^ ]+) ([^ ]+) ([^ ]+) ([^"]+)"`).FindStringSubmatch(svg)
		pl := regexp.MustCompile(`points="([^"]+)"`).FindStringSubmatch(svg)
		if fr == nil || pl == nil {
			t.Fatalf("y=%v: no frame or no line:\n%s", y, svg)
		}
		top, bottom := svgNum(t, fr[2]), svgNum(t, fr[4])
		for _, p := range strings.Fields(pl[1]) {
			py := svgNum(t, strings.Split(p, ",")[1])
			if py <= top+2 || py >= bottom-2 {
				t.Errorf("y=%v: the line is drawn at %.1f px, on the frame (%.1f–%.1f)", y, py, top, bottom)
			}
		}
		if n := strings.Count(svg, `<circle cx=`); n != 3 {
			t.Errorf("y=%v: %d point marks, want 3 (Marks)", y, n)
		}
	}
}
