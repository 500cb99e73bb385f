package sweep

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/report"
)

// The sweep page plots each metric against each knob and marks the Pareto
// front of TTFT p50 against p99. It is one self-contained file (inline SVG
// from internal/report, inline style and script, a Content-Security-Policy
// that forbids every fetch), so it opens anywhere and can be mailed.

// metric is one figure the page plots against every knob.
type metric struct {
	label string // axis title with unit
	get   func(Row) float64
	share bool // a 0..1 share
}

var pageMetrics = []metric{
	{"TTFT p50 (ms)", func(r Row) float64 { return r.TTFTP50Ms }, false},
	{"TTFT p99 (ms)", func(r Row) float64 { return r.TTFTP99Ms }, false},
	{"TTFT mean (ms)", func(r Row) float64 { return r.TTFTMeanMs }, false},
	{"E2E p50 (ms)", func(r Row) float64 { return r.E2EP50Ms }, false},
	{"E2E p99 (ms)", func(r Row) float64 { return r.E2EP99Ms }, false},
	{"TPOT p99 (ms)", func(r Row) float64 { return r.TPOTP99Ms }, false},
	{"direct-to-D share", func(r Row) float64 { return r.DirectShare }, true},
	{"failures (requests)", func(r Row) float64 { return float64(r.Failures) }, false},
	{"goodput (requests/s)", func(r Row) float64 { return r.Goodput }, false},
}

type figure struct {
	ID, Caption string
	SVG         template.HTML
}

type knobSection struct {
	Name    string
	Note    string
	Figures []figure
}

type page struct {
	Title    string
	Axes     []string
	Fronts   []figure
	Knobs    []knobSection
	Rows     []Row
	KnobCols []string
	Failed   map[string]string
	Floors   []Floor
	Charts   int
}

// WriteHTML writes the sweep's page for t to w.
func WriteHTML(w io.Writer, title string, t Table) error {
	p := page{Title: title, Rows: t.Rows, KnobCols: KnobNames(t.Rows), Failed: t.Failed, Floors: t.Floors}
	g := t.Grid
	p.Axes = append(p.Axes, "mechanisms: "+strings.Join(g.Mechanisms, ", "))
	var tn, wn []string
	for _, x := range g.Topologies {
		tn = append(tn, x.String())
	}
	for _, x := range g.Workloads {
		wn = append(wn, x.Name)
	}
	p.Axes = append(p.Axes, "topologies: "+strings.Join(tn, ", ")+" (a colocated mechanism gets the same GPUs as colocated workers)", "workloads: "+strings.Join(wn, ", "))
	for _, k := range g.Knobs {
		p.Axes = append(p.Axes, "--"+k.Name+": "+strings.Join(k.Values, ", "))
	}
	if len(g.Base) > 0 {
		p.Axes = append(p.Axes, "every cell: "+strings.Join(g.Base, " "))
	}
	colors := mechColors(t.Rows)
	p.Fronts = frontFigures(t.Rows, colors)
	for i, k := range g.Knobs {
		p.Knobs = append(p.Knobs, knobFigures(k, i, t.Rows, colors))
	}
	p.Charts = len(p.Fronts)
	for _, k := range p.Knobs {
		p.Charts += len(k.Figures)
	}
	tpl, err := template.New("page").Funcs(template.FuncMap{"num": fmtNum}).Parse(pageHTML)
	if err != nil {
		return err
	}
	return tpl.Execute(w, p)
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return ""
	case v != 0 && math.Abs(v) < 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// mechColors gives each mechanism the report's colour for it.
func mechColors(rows []Row) map[string]string {
	var mechs []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Mechanism] {
			seen[r.Mechanism] = true
			mechs = append(mechs, r.Mechanism)
		}
	}
	out := map[string]string{}
	for i, c := range report.RunColors(mechs) {
		out[mechs[i]] = c
	}
	return out
}

// frontFigures draws, per workload and GPU count, every cell's TTFT p50
// against p99 and the front through the cells no other beats on both.
func frontFigures(rows []Row, colors map[string]string) []figure {
	var groups []string
	by := map[string][]Row{}
	for _, r := range rows {
		if _, ok := by[r.group()]; !ok {
			groups = append(groups, r.group())
		}
		by[r.group()] = append(by[r.group()], r)
	}
	var out []figure
	for gi, gk := range groups {
		rs := by[gk]
		competes := Competes(rs)
		var lines []report.Line
		var front []Row
		var legend []report.LegendItem
		inLegend := map[string]bool{}
		for i, r := range rs {
			if r.Completed == 0 {
				continue
			}
			// A cell out of the running (more failures, or stopped) is drawn
			// grey: it may sit below the front without beating it.
			color, label := colors[r.Mechanism], r.Mechanism
			if !competes[i] {
				color, label = outColor, "not competing: more failures than the best, or stopped"
			}
			lines = append(lines, report.Line{Name: r.Cell, Color: color, X: []float64{r.TTFTP50Ms}, Y: []float64{r.TTFTP99Ms}})
			if !inLegend[label] {
				inLegend[label] = true
				legend = append(legend, report.LegendItem{Label: label, Color: color})
			}
			if r.Pareto {
				front = append(front, r)
			}
		}
		sort.Slice(front, func(i, j int) bool { return front[i].TTFTP50Ms < front[j].TTFTP50Ms })
		fl := report.Line{Name: "Pareto front", Color: "#000000", Dash: "4 3"}
		var names []string
		for _, r := range front {
			fl.X, fl.Y = append(fl.X, r.TTFTP50Ms), append(fl.Y, r.TTFTP99Ms)
			names = append(names, r.Cell)
		}
		if len(front) > 0 {
			lines = append(lines, fl)
			legend = append(legend, report.LegendItem{Label: "Pareto front", Color: "#000000", Dash: "4 3"})
		}
		title := fmt.Sprintf("TTFT p50 vs p99: %s on %d GPUs", rs[0].Workload, rs[0].GPUs)
		var p50s, p99s []float64
		for _, r := range rs {
			if r.Completed > 0 {
				p50s, p99s = append(p50s, r.TTFTP50Ms), append(p99s, r.TTFTP99Ms)
			}
		}
		ch := report.LineChart{Title: title, X: report.Axis{Label: "TTFT p50 (ms)", Log: spansDecade(p50s)},
			Y: report.Axis{Label: "TTFT p99 (ms)", Log: spansDecade(p99s)}, Lines: lines, Legend: legend}
		cap := "One dot per cell. The front (dashed) joins the cells no other cell beats on both p50 and p99, among those that finished their workload with the fewest failures (the others are grey): "
		if len(names) == 0 {
			cap += "none."
		} else {
			cap += strings.Join(names, ", ") + "."
		}
		out = append(out, figure{ID: fmt.Sprintf("front-%d", gi), Caption: cap, SVG: ch.SVG()})
	}
	return out
}

// outColor draws the cells that do not compete for the front.
const outColor = "#bbbbbb"

// spansDecade: positive values spanning a factor of 10 or more read
// better on a logarithmic axis.
func spansDecade(vs []float64) bool {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vs {
		if v <= 0 {
			return false
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return len(vs) > 1 && hi >= 10*lo
}

// knobFigures draws each metric against knob k: one line per combination
// of the cell's other values (mechanism, topology, workload, other knobs).
// A numeric knob is a numeric axis (logarithmic when its values span a
// factor of 10 or more); any other is drawn at positions 1, 2, … in the
// order its values were given.
func knobFigures(k Knob, ki int, rows []Row, colors map[string]string) knobSection {
	sec := knobSection{Name: k.Label()}
	pos := map[string]float64{}
	numeric := true
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range k.Values {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			numeric = false
		}
		lo, hi = math.Min(lo, f), math.Max(hi, f)
		pos[v] = float64(i + 1)
	}
	if numeric {
		for _, v := range k.Values {
			pos[v], _ = strconv.ParseFloat(v, 64)
		}
	}
	xa := report.Axis{Label: "--" + k.Name, Log: numeric && lo > 0 && hi >= 10*lo}
	if !numeric {
		var parts []string
		for i, v := range k.Values {
			parts = append(parts, fmt.Sprintf("%d = %s", i+1, v))
		}
		xa.Label += " (" + strings.Join(parts, ", ") + ")"
		xa.Min, xa.Max = 1, float64(len(k.Values))
	}
	type series struct {
		key  string
		mech string
		rs   []Row
	}
	var ss []*series
	byKey := map[string]*series{}
	for _, r := range rows {
		if _, ok := r.Knobs[k.Name]; !ok || !k.For(r.Mechanism) {
			continue
		}
		key := seriesKey(r, k.Name)
		s := byKey[key]
		if s == nil {
			s = &series{key: key, mech: r.Mechanism}
			byKey[key] = s
			ss = append(ss, s)
		}
		s.rs = append(s.rs, r)
	}
	if len(ss) == 0 {
		sec.Note = "applies to none of the cells that finished"
		return sec
	}
	dashes := []string{"", "6 3", "2 2", "8 3 2 3", "1 3"}
	used := map[string]int{}
	style := make([]report.LegendItem, len(ss))
	for i, s := range ss {
		style[i] = report.LegendItem{Label: s.key, Color: colors[s.mech], Dash: dashes[used[s.mech]%len(dashes)]}
		used[s.mech]++
	}
	for mi, m := range pageMetrics {
		var lines []report.Line
		for i, s := range ss {
			sort.SliceStable(s.rs, func(a, b int) bool { return pos[s.rs[a].Knobs[k.Name]] < pos[s.rs[b].Knobs[k.Name]] })
			l := report.Line{Name: s.key, Color: style[i].Color, Dash: style[i].Dash, Marks: true}
			for _, r := range s.rs {
				if r.Completed == 0 && !strings.HasPrefix(m.label, "failures") {
					continue
				}
				l.X, l.Y = append(l.X, pos[r.Knobs[k.Name]]), append(l.Y, m.get(r))
			}
			lines = append(lines, l)
		}
		ya := report.Axis{Label: m.label, Percent: m.share}
		if strings.HasPrefix(m.label, "failures") {
			ya.Pad = 0.04 // a count that stays 0, or at its top tick, is a line inside the frame, not on it
		}
		ch := report.LineChart{Title: m.label + " against --" + k.Name, X: xa, Y: ya, Lines: lines, Legend: style}
		sec.Figures = append(sec.Figures, figure{ID: fmt.Sprintf("knob-%d-%d", ki, mi), SVG: ch.SVG()})
	}
	return sec
}

// seriesKey names a row's values other than knob.
func seriesKey(r Row, knob string) string {
	parts := []string{r.Mechanism, r.Topology, r.Workload}
	names := make([]string, 0, len(r.Knobs))
	for n := range r.Knobs {
		if n != knob {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		parts = append(parts, n+"="+r.Knobs[n])
	}
	return strings.Join(parts, " ")
}
