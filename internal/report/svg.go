package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// This file draws charts as inline SVG strings. It knows nothing about
// runs: callers hand it axes and series. Every data mark carries class
// "mark" so the page's self-check (and the browser test) can tell a chart
// with data from an empty frame.

// Axis describes one axis. Min and Max bound the data; the drawn range is
// widened to nice tick values.
type Axis struct {
	Label   string // with unit, e.g. "TTFT (s)"
	Log     bool
	Percent bool // values are 0..1 shares, ticks print as %
	Min     float64
	Max     float64
	// Pad, on a linear axis, leaves this share of the range free below
	// the lowest tick and above the highest, so a series at either end of
	// its range (a count of failures that stays 0, or stays at its
	// maximum) is drawn inside the frame, not on it.
	Pad float64
}

// Line is one series of a line chart.
type Line struct {
	Name  string
	Color string
	Dash  string // SVG stroke-dasharray, "" for solid
	X, Y  []float64
	// Label, when set, is written next to point LabelAt of the line (a
	// direct label, so many lines read without the legend).
	Label   string
	LabelAt int
	// Marks draws a dot at every point: for lines through a few measured
	// values (a sweep's cells), where a bare line hides which x values
	// were run.
	Marks bool
}

// LineChart is an x–y chart of one or more lines.
type LineChart struct {
	Title  string
	X, Y   Axis
	Lines  []Line
	Legend []LegendItem // usually one per run; styles may add entries
}

// LegendItem is a swatch and a label.
type LegendItem struct {
	Label string
	Color string
	Dash  string
}

const (
	chartW          = 620
	chartH          = 340
	padL, padR      = 64, 16
	padT, padB      = 40, 52
	fontSize        = 11
	charW           = 6.4 // approximate advance of one 11 px sans character
	approxTickCount = 6
)

// scale maps data values to pixels on one axis.
type scale struct {
	lo, hi   float64 // drawn data range (log10 units for log axes)
	p0, p1   float64 // pixel range
	log      bool
	ticks    []float64 // data values
	labels   []string
	percent  bool
	hasValue bool
}

func newScale(a Axis, p0, p1 float64) scale {
	s := scale{p0: p0, p1: p1, log: a.Log, percent: a.Percent}
	lo, hi := a.Min, a.Max
	if a.Log {
		if lo <= 0 {
			lo = hi / 1e3
		}
		if hi <= 0 {
			lo, hi = 0.1, 1
		}
		s.lo, s.hi = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if s.hi <= s.lo {
			s.hi = s.lo + 1
		}
		for d := s.lo; d <= s.hi+1e-9; d++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, d)
				if (m == 1 || s.hi-s.lo <= 2) && math.Log10(v) <= s.hi+1e-9 {
					s.ticks = append(s.ticks, v)
				}
			}
		}
	} else {
		if hi <= lo {
			hi = lo + 1
		}
		step := niceStep((hi - lo) / (approxTickCount - 1))
		s.lo, s.hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
		for v := s.lo; v <= s.hi+step*1e-6; v += step {
			s.ticks = append(s.ticks, math.Round(v/step)*step)
		}
		pad := (s.hi - s.lo) * a.Pad
		s.lo, s.hi = s.lo-pad, s.hi+pad
	}
	for _, t := range s.ticks {
		s.labels = append(s.labels, tickLabel(t, a.Percent))
	}
	return s
}

// niceMax is where a linear axis from 0 with data up to v ends: v rounded
// up to the axis's last tick.
func niceMax(v float64) float64 { return newScale(Axis{Min: 0, Max: v}, 0, 1).hi }

// niceStep rounds x up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel prints a tick compactly: 0.01, 0.5, 20, 1.5k, 100k, 2M, 50%.
func tickLabel(v float64, percent bool) string {
	// Ticks are sums of float steps (0.1+0.2…); 9 significant digits
	// remove the representation noise before printing.
	v = roundSig(v)
	if percent {
		return strconv.FormatFloat(roundSig(v*100), 'f', -1, 64) + "%"
	}
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(roundSig(v/1e6), 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(roundSig(v/1e3), 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func roundSig(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 9, 64), 64)
	return r
}

// px maps a data value to a pixel; ok is false where it cannot be drawn
// (non-positive on a log axis, NaN).
func (s scale) px(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	if s.log {
		if v <= 0 {
			return 0, false
		}
		v = math.Log10(v)
	}
	return s.p0 + (v-s.lo)/(s.hi-s.lo)*(s.p1-s.p0), true
}

// esc escapes text for SVG inside HTML.
func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// svgOpen starts a chart's SVG element with its title.
func svgOpen(b *strings.Builder, w, h int, title string, attrs ...string) {
	extra := ""
	for _, a := range attrs {
		extra += " " + a
	}
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-size="%d"%s>`,
		w, h, w, h, esc(title), fontSize, extra)
	fmt.Fprintf(b, `<text x="%d" y="18" font-weight="600" font-size="13">%s</text>`, padL, esc(title))
}

// legend draws items in a row under the title, wrapping when needed.
func legend(b *strings.Builder, items []LegendItem, x0, y0, maxX float64) {
	x, y := x0, y0
	for _, it := range items {
		w := 28 + float64(len(it.Label))*charW
		if x+w > maxX && x > x0 {
			x, y = x0, y+14
		}
		dash := ""
		if it.Dash != "" {
			dash = ` stroke-dasharray="` + esc(it.Dash) + `"`
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"%s/>`,
			f1(x), f1(y-4), f1(x+18), f1(y-4), esc(it.Color), dash)
		fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`, f1(x+22), f1(y), esc(it.Label))
		x += w + 10
	}
}

// legendHeight is the space legend needs at width maxX−x0.
func legendHeight(items []LegendItem, width float64) float64 {
	rows, x := 1, 0.0
	for _, it := range items {
		w := 28 + float64(len(it.Label))*charW
		if x+w > width && x > 0 {
			rows, x = rows+1, 0
		}
		x += w + 10
	}
	return float64(rows) * 14
}

// axes draws the frame, grid, tick labels and axis titles.
func axes(b *strings.Builder, xs, ys scale, xl, yl string, left, top, right, bottom float64) {
	axesAt(b, xs, ys, xl, yl, left, top, right, bottom, 14)
}

// axesAt is axes with the y title's x position given.
func axesAt(b *strings.Builder, xs, ys scale, xl, yl string, left, top, right, bottom, ytx float64) {
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888"/>`,
		f1(left), f1(top), f1(right-left), f1(bottom-top))
	for i, t := range xs.ticks {
		x, _ := xs.px(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/>`, f1(x), f1(top), f1(x), f1(bottom))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, f1(x), f1(bottom+14), esc(xs.labels[i]))
	}
	for i, t := range ys.ticks {
		y, _ := ys.px(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/>`, f1(left), f1(y), f1(right), f1(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`, f1(left-4), f1(y+4), esc(ys.labels[i]))
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, f1((left+right)/2), f1(bottom+34), esc(xl))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>`, f1(ytx), f1((top+bottom)/2), esc(yl))
}

// dataRange returns the finite (and, for log axes, positive) extent of vs.
func dataRange(log bool, vss ...[]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, vs := range vss {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) || (log && v <= 0) {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	return lo, hi
}

// fillRanges sets unset axis bounds (Min == Max == 0) from the lines' data.
func fillRanges(x, y *Axis, lines []Line) {
	var xs, ys [][]float64
	for _, l := range lines {
		xs, ys = append(xs, l.X), append(ys, l.Y)
	}
	if x.Min == 0 && x.Max == 0 {
		x.Min, x.Max = dataRange(x.Log, xs...)
	}
	if y.Min == 0 && y.Max == 0 {
		y.Min, y.Max = dataRange(y.Log, ys...)
		if !y.Log && y.Min > 0 {
			y.Min = 0
		}
	}
}

// SVG renders the chart. Unset axis bounds (Min == Max == 0) come from the
// data.
func (c LineChart) SVG() template.HTML {
	fillRanges(&c.X, &c.Y, c.Lines)
	lh := legendHeight(c.Legend, chartW-padL-padR)
	top := padT + lh - 14
	left, right, bottom := float64(padL), float64(chartW-padR), float64(chartH-padB)+lh-14
	h := int(bottom) + padB
	sx := newScale(c.X, left, right)
	sy := newScale(c.Y, bottom, top)
	var b strings.Builder
	svgOpen(&b, chartW, h, c.Title, plotAttrs(sx, sy, left, top, right, bottom)...)
	legend(&b, c.Legend, left, 34, right)
	axes(&b, sx, sy, c.X.Label, c.Y.Label, left, top, right, bottom)
	drawLines(&b, c.Lines, sx, sy, left, top, right, bottom)
	return closeSVG(&b, (left+right)/2, (top+bottom)/2)
}

// drawLines draws lines inside the frame as one plot group, then their
// direct labels. A point outside the frame is not drawn: the line breaks
// there rather than spilling over the axes.
func drawLines(b *strings.Builder, lines []Line, sx, sy scale, left, top, right, bottom float64) {
	fmt.Fprintf(b, `<g class="plot" fill="none" stroke-width="1.8" stroke-linejoin="round">`)
	var anchors []labelAnchor
	for _, l := range lines {
		var pts []string
		flush := func() {
			if len(pts) == 1 {
				xy := strings.Split(pts[0], ",")
				fmt.Fprintf(b, `<circle class="mark" cx="%s" cy="%s" r="2.5" fill="%s"/>`, xy[0], xy[1], esc(l.Color))
			} else if len(pts) > 1 {
				dash := ""
				if l.Dash != "" {
					dash = ` stroke-dasharray="` + esc(l.Dash) + `"`
				}
				fmt.Fprintf(b, `<polyline class="mark" data-n="%d" data-line="%s" stroke="%s"%s points="%s"><title>%s</title></polyline>`,
					len(pts), esc(l.Name), esc(l.Color), dash, strings.Join(pts, " "), esc(l.Name))
				if l.Marks {
					for _, p := range pts {
						xy := strings.Split(p, ",")
						fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, xy[0], xy[1], esc(l.Color))
					}
				}
			}
			pts = pts[:0]
		}
		for i := range l.X {
			x, okx := sx.px(l.X[i])
			y, oky := sy.px(l.Y[i])
			if !okx || !oky || x < left-0.5 || x > right+0.5 || y < top-0.5 || y > bottom+0.5 {
				flush()
				continue
			}
			pts = append(pts, f1(x)+","+f2(y)) // 0.01 px in y keeps drawn areas within 0.1 pp
			if l.Label != "" && i == l.LabelAt {
				anchors = append(anchors, labelAnchor{x: x, y: y, text: l.Label, color: l.Color})
			}
		}
		flush()
	}
	b.WriteString(`</g>`)
	// A dot marks the point a label names; a label pushed away from its
	// point gets a leader line back to the dot.
	for _, p := range placeLabels(anchors, left, top, right, bottom) {
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.6" fill="%s" stroke="#fff" stroke-width="0.8"/>`, f1(p.px), f1(p.py), esc(p.color))
		if lx, ly, far := p.leader(); far {
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="0.8"/>`, f1(p.px), f1(p.py), f1(lx), f1(ly), esc(p.color))
		}
		fmt.Fprintf(b, `<text class="direct-label" x="%s" y="%s" text-anchor="%s" fill="%s" stroke="#fff" stroke-width="3" paint-order="stroke" font-weight="600">%s</text>`,
			f1(p.x), f1(p.y), p.anchor, esc(p.color), esc(p.text))
	}
}

// plotAttrs describe a line chart's plot area for the page's checks: the
// frame in pixels and each axis's drawn range in axis units (log10 of the
// value on log axes), so a script can map drawn points back to data.
func plotAttrs(sx, sy scale, left, top, right, bottom float64) []string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	return []string{
		fmt.Sprintf(`data-frame="%s %s %s %s"`, f1(left), f1(top), f1(right), f1(bottom)),
		fmt.Sprintf(`data-x="%s %s %t"`, g(sx.lo), g(sx.hi), sx.log),
		fmt.Sprintf(`data-y="%s %s %t"`, g(sy.lo), g(sy.hi), sy.log),
	}
}

// labelAnchor is a point a direct label belongs to.
type labelAnchor struct {
	x, y        float64
	text, color string
}

// placedLabel is a direct label's text position (x, y) and its point
// (px, py).
type placedLabel struct {
	labelAnchor
	px, py float64
	anchor string // SVG text-anchor
	box    [4]float64
}

// leader returns the point of the label's box nearest its anchor and
// whether the box is far enough from it to need a leader line.
func (p placedLabel) leader() (x, y float64, far bool) {
	x = math.Min(math.Max(p.px, p.box[0]), p.box[2])
	y = math.Min(math.Max(p.py, p.box[1]), p.box[3])
	return x, y, math.Hypot(x-p.px, y-p.py) > 8
}

// placeLabels puts each label beside its point, trying the four corners
// around it and then steps up and down, so that labels stay in the frame
// and do not cover each other; a label with no free place takes the
// least-covered one.
func placeLabels(as []labelAnchor, left, top, right, bottom float64) []placedLabel {
	var out []placedLabel
	overlap := func(a, b [4]float64) float64 {
		w := math.Min(a[2], b[2]) - math.Max(a[0], b[0])
		h := math.Min(a[3], b[3]) - math.Max(a[1], b[1])
		if w <= 0 || h <= 0 {
			return 0
		}
		return w * h
	}
	for _, a := range as {
		w := float64(len([]rune(a.text)))*charW + 2
		best, bestCost := placedLabel{}, math.Inf(1)
		for step := 0; step <= 8 && bestCost > 0; step++ {
			dy := float64((step+1)/2) * 12
			if step%2 == 1 {
				dy = -dy
			}
			for _, side := range []struct {
				dx, dy float64
				anchor string
			}{{5, -5, "start"}, {-5, -5, "end"}, {5, 13, "start"}, {-5, 13, "end"}} {
				x, y := a.x+side.dx, a.y+side.dy+dy
				x0 := x
				if side.anchor == "end" {
					x0 = x - w
				}
				box := [4]float64{x0, y - 10, x0 + w, y + 2}
				cost := 0.0
				if box[0] < left || box[2] > right || box[1] < top || box[3] > bottom {
					cost += 1e6
				}
				for _, p := range out {
					cost += overlap(box, p.box)
				}
				cost += math.Abs(dy) * 0.01 // prefer the label near its point
				if cost < bestCost {
					best, bestCost = placedLabel{labelAnchor: labelAnchor{x: x, y: y, text: a.text, color: a.color},
						px: a.x, py: a.y, anchor: side.anchor, box: box}, cost
				}
			}
			if bestCost < 1 {
				break
			}
		}
		out = append(out, best)
	}
	return out
}

// Panel is one small multiple: a title and its lines.
type Panel struct {
	Title string
	Lines []Line
}

// SmallMultiples draws one small chart per panel on shared axes, so
// series that would overlap in one frame (two lines per run, many runs)
// each get their own.
type SmallMultiples struct {
	Title  string
	X, Y   Axis
	Panels []Panel
	Legend []LegendItem
}

// SVG renders the panels one to a row for up to three, else two to a row.
func (c SmallMultiples) SVG() template.HTML {
	var all []Line
	for _, p := range c.Panels {
		all = append(all, p.Lines...)
	}
	fillRanges(&c.X, &c.Y, all)
	cols := 1
	if len(c.Panels) > 3 {
		cols = 2
	}
	rows := max(1, (len(c.Panels)+cols-1)/cols)
	lh := legendHeight(c.Legend, chartW-padL-padR)
	top0 := padT + lh - 14
	pw := float64(chartW-16) / float64(cols) // panel width
	const ph = 190.0                         // panel height
	h := int(top0 + ph*float64(rows) + 6)
	var b strings.Builder
	svgOpen(&b, chartW, h, c.Title)
	legend(&b, c.Legend, padL, 34, chartW-padR)
	for i, p := range c.Panels {
		ox := 8 + pw*float64(i%cols)
		oy := top0 + ph*float64(i/cols)
		left, right := ox+48, ox+pw-10
		top, bottom := oy+18, oy+ph-44
		sx := newScale(c.X, left, right)
		sy := newScale(c.Y, bottom, top)
		fmt.Fprintf(&b, `<g class="panel" data-frame="%s %s %s %s">`, f1(left), f1(top), f1(right), f1(bottom))
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-weight="600">%s</text>`, f1(left), f1(oy+12), esc(truncate(p.Title, int((right-left)/charW))))
		axesAt(&b, sx, sy, c.X.Label, c.Y.Label, left, top, right, bottom, ox+10)
		drawLines(&b, p.Lines, sx, sy, left, top, right, bottom)
		b.WriteString(`</g>`)
	}
	return closeSVG(&b, chartW/2, top0+ph*float64(rows)/2)
}
