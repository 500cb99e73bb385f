package report

// Bar charts, horizontal and vertical, as inline SVG (svg.go has the
// scales, axes and legends they share).

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// BarGroup is one run's bars across a bar chart's categories.
type BarGroup struct {
	Name   string
	Color  string
	Values []float64 // one per category; NaN for "this run has none"
	Labels []string  // optional text after each bar (counts, shares)
}

// BarChart draws grouped bars: for each category, one bar per group (run),
// so colours stay those of the runs. Horizontal charts suit long category
// names (execution modes); vertical ones suit many short ones (workers).
type BarChart struct {
	Title      string
	Categories []string
	Groups     []BarGroup
	Value      Axis
	Horizontal bool
	CatLabel   string // axis title for the categories
}

// SVG renders the chart.
func (c BarChart) SVG() template.HTML {
	var vs [][]float64
	for _, g := range c.Groups {
		vs = append(vs, g.Values)
	}
	if c.Value.Min == 0 && c.Value.Max == 0 {
		c.Value.Min, c.Value.Max = dataRange(c.Value.Log, vs...)
		if !c.Value.Log {
			c.Value.Min = math.Min(0, c.Value.Min)
		}
	}
	items := make([]LegendItem, len(c.Groups))
	for i, g := range c.Groups {
		items[i] = LegendItem{Label: g.Name, Color: g.Color}
	}
	if c.Horizontal {
		return c.horizontal(items)
	}
	return c.vertical(items)
}

func (c BarChart) horizontal(items []LegendItem) template.HTML {
	longest := 0
	for _, k := range c.Categories {
		longest = max(longest, len(k))
	}
	w := 760.0
	left := math.Min(8+float64(longest)*charW, w*0.55)
	right := w - 70 // room for value labels
	lh := legendHeight(items, right-left)
	top := padT + lh - 14
	barH := 10.0
	rowH := barH*float64(len(c.Groups)) + 8
	bottom := top + rowH*float64(len(c.Categories))
	h := bottom + 44
	sx := newScale(c.Value, left, right)
	var b strings.Builder
	svgOpen(&b, int(w), int(h), c.Title)
	legend(&b, items, left, 34, right)
	for i := 1; i < len(c.Categories); i += 2 { // bands under the grid keep rows apart
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f5f7"/>`,
			f1(left), f1(top+rowH*float64(i)), f1(right-left), f1(rowH))
	}
	ys := scale{lo: 0, hi: 1, p0: bottom, p1: top}
	axes(&b, sx, ys, c.Value.Label, "", left, top, right, bottom)
	base := left
	if v, ok := sx.px(0); ok && !c.Value.Log {
		base = v
	}
	for i, cat := range c.Categories {
		// The bars a category has are stacked around its row's middle,
		// where its label sits: a run with no bar there leaves no gap, so
		// no bar reads as belonging to the next row's label.
		y0 := top + rowH*float64(i)
		mid := y0 + rowH/2
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end">%s</text>`,
			f1(left-4), f1(mid+4), esc(truncate(cat, int((left-8)/charW))))
		type bar struct {
			g BarGroup
			x float64
		}
		var bars []bar
		for _, g := range c.Groups {
			if i >= len(g.Values) {
				continue
			}
			if x, ok := sx.px(g.Values[i]); ok {
				bars = append(bars, bar{g, x})
			}
		}
		y := mid - barH*float64(len(bars))/2
		for _, r := range bars {
			x0, x1 := math.Min(base, r.x), math.Max(base, r.x)
			fmt.Fprintf(&b, `<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s — %s</title></rect>`,
				f1(x0), f1(y), f1(math.Max(x1-x0, 1)), f1(barH-1), esc(r.g.Color), esc(r.g.Name), esc(cat))
			if i < len(r.g.Labels) && r.g.Labels[i] != "" {
				fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="9">%s</text>`, f1(x1+3), f1(y+barH-2), esc(r.g.Labels[i]))
			}
			y += barH
		}
	}
	return closeSVG(&b, (left+right)/2, (top+bottom)/2)
}

func (c BarChart) vertical(items []LegendItem) template.HTML {
	n := len(c.Categories)
	groupW := math.Max(12, 4*float64(len(c.Groups))+6)
	w := math.Max(chartW, padL+padR+groupW*float64(n)*1.6)
	left, right := float64(padL), w-padR
	lh := legendHeight(items, right-left)
	top := padT + lh - 14
	longest := 0
	for _, k := range c.Categories {
		longest = max(longest, len(k))
	}
	slot := (right - left) / float64(max(n, 1))
	rotate := float64(longest)*charW > slot-4
	labelH := 18.0
	if rotate {
		labelH = math.Min(float64(longest)*charW*0.7+10, 120)
	}
	bottom := top + 240
	h := bottom + labelH + 30
	sy := newScale(c.Value, bottom, top)
	var b strings.Builder
	svgOpen(&b, int(w), int(h), c.Title)
	legend(&b, items, left, 34, right)
	xs := scale{lo: 0, hi: 1, p0: left, p1: right}
	axes(&b, xs, sy, "", c.Value.Label, left, top, right, bottom)
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, f1((left+right)/2), f1(h-6), esc(c.CatLabel))
	base := bottom
	if v, ok := sy.px(0); ok && !c.Value.Log {
		base = v
	}
	barW := (slot * 0.8) / float64(max(len(c.Groups), 1))
	for i, cat := range c.Categories {
		cx := left + slot*(float64(i)+0.5)
		if rotate {
			fmt.Fprintf(&b, `<text transform="translate(%s %s) rotate(-40)" text-anchor="end">%s</text>`,
				f1(cx+3), f1(bottom+12), esc(truncate(cat, 24)))
		} else {
			fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, f1(cx), f1(bottom+14), esc(cat))
		}
		// As in horizontal charts, the bars a category has stand side by
		// side around its label, with no gap for the runs it lacks.
		var present []BarGroup
		var ys []float64
		for _, g := range c.Groups {
			if i >= len(g.Values) {
				continue
			}
			if y, ok := sy.px(g.Values[i]); ok {
				present, ys = append(present, g), append(ys, y)
			}
		}
		x := cx - barW*float64(len(present))/2
		for k, g := range present {
			y0, y1 := math.Min(base, ys[k]), math.Max(base, ys[k])
			tip := g.Name + " — " + cat
			if i < len(g.Labels) && g.Labels[i] != "" {
				tip += ": " + g.Labels[i]
			}
			fmt.Fprintf(&b, `<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`,
				f1(x), f1(y0), f1(math.Max(barW-1, 1)), f1(math.Max(y1-y0, 1)), esc(g.Color), esc(tip))
			x += barW
		}
	}
	return closeSVG(&b, (left+right)/2, (top+bottom)/2)
}

// closeSVG ends a chart. A chart that drew no data mark says so in its
// middle, so a reader sees "no data" rather than a blank frame (the page's
// self-check still lists it).
func closeSVG(b *strings.Builder, cx, cy float64) template.HTML {
	if !strings.Contains(b.String(), `class="mark"`) {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="14" fill="#999">no data in these runs</text>`, f1(cx), f1(cy))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// truncate shortens s to n characters with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if n < 4 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
