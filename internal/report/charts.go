package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Chart is one figure on the page.
type Chart struct {
	ID       string
	Title    string
	Question string // what the chart answers, shown under it and in docs/reports.md
	Method   string // how the numbers were computed
	SVG      template.HTML
	// ClaimLead and Claims state, per run, what share of its requests the
	// curve's area stands for; the page's check integrates each drawn
	// curve and compares it with the number shown.
	ClaimLead string
	Claims    []Claim
	// Folded charts say nothing the runs' headline does not (every run
	// 100% in one category); the page folds them away with FoldNote.
	Folded   bool
	FoldNote string
}

// Claim is one run's "In of Total requests" statement under a chart.
type Claim struct {
	Run, Color string
	In, Total  int
}

// Percent is In/Total as the page prints it: 1 decimal, never rounded to
// 100% or 0% unless it is exactly that.
func (c Claim) Percent() string { return shareText(c.In, c.Total) }

func shareText(in, total int) string {
	switch {
	case total == 0:
		return "—"
	case in == total:
		return "100%"
	case in == 0:
		return "0%"
	}
	p := 100 * float64(in) / float64(total)
	p = math.Min(math.Max(p, 0.1), 99.9)
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// palette is the Okabe–Ito colour-blind-safe set. The three mechanisms own
// fixed colours (KVC blue, naive PD vermillion, DP green, as in the seed's
// figures) so a mechanism looks the same in every report; other runs take
// the remaining colours in run order.
func palette() []string {
	return []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999"}
}

func mechanismSlot(mech string) int {
	m := strings.ToLower(mech)
	switch {
	case strings.Contains(m, "kvc") || strings.Contains(m, "kvcache"):
		return 0
	case strings.Contains(m, "disagg") || strings.Contains(m, "naive"):
		return 1
	case strings.Contains(m, "colo") || m == "dp":
		return 2
	}
	return -1
}

// RunColors assigns each run a colour: the first run of a known mechanism
// gets the mechanism's colour; every other run takes the next unused colour
// in run order. The result depends only on the runs' order and mechanisms,
// so regenerating a report never repaints it.
func RunColors(mechanisms []string) []string {
	pal := palette()
	used := make([]bool, len(pal))
	out := make([]string, len(mechanisms))
	for i, m := range mechanisms {
		if s := mechanismSlot(m); s >= 0 && !used[s] {
			used[s], out[i] = true, pal[s]
		}
	}
	next := 0
	for i := range out {
		if out[i] != "" {
			continue
		}
		for next < len(pal) && used[next] {
			next++
		}
		if next < len(pal) {
			used[next], out[i] = true, pal[next]
		} else {
			out[i] = pal[(i+3)%len(pal)] // more runs than colours: reuse
		}
	}
	return out
}

// view is a run as the charts see it: its display name, colour and the
// sorted series several charts share.
type view struct {
	*Run
	name    string
	color   string
	dash    string // stroke-dasharray telling runs apart beyond colour; "" = solid
	direct  bool   // label lines directly (many runs)
	ttft    []float64
	latency []float64
}

func newViews(runs []*Run) []view {
	mechs := make([]string, len(runs))
	for i, r := range runs {
		mechs[i] = r.Mechanism
	}
	colors := RunColors(mechs)
	names, dirs := make([]string, len(runs)), make([]string, len(runs))
	for i, r := range runs {
		names[i], dirs[i] = r.Name, r.Dir
	}
	names = DistinctNames(names, dirs)
	vs := make([]view, len(runs))
	for i, r := range runs {
		vs[i] = view{Run: r, name: names[i], color: colors[i], direct: len(runs) >= minDirectRuns,
			ttft:    sortedCompleted(r.Requests, func(q *Request) float64 { return q.TTFTS }),
			latency: sortedCompleted(r.Requests, func(q *Request) float64 { return q.LatencyS })}
		if len(runs) >= minDashRuns {
			vs[i].dash = dashes[i%len(dashes)]
		}
	}
	return vs
}

// With this many runs, lines also differ by dash pattern (colour alone
// gets hard to follow) and carry direct labels.
const (
	minDashRuns   = 4
	minDirectRuns = 3
)

// dashes are stroke patterns for 1.8 px lines, the first solid.
var dashes = []string{"", "7 3", "2 2", "9 3 2 3", "4 4", "12 3 2 3 2 3"}

// line is one run's series; labelAt picks the point its direct label
// sits by (when the page labels lines directly).
func (v view) line(x, y []float64, labelAt int) Line {
	l := Line{Name: v.name, Color: v.color, Dash: v.dash, X: x, Y: y}
	if v.direct && labelAt >= 0 && labelAt < len(x) {
		l.Label, l.LabelAt = v.name, labelAt
	}
	return l
}

// argmax is the index of ys' largest value (-1 when empty).
func argmax(ys []float64) int {
	k := -1
	for i, y := range ys {
		if k < 0 || y > ys[k] {
			k = i
		}
	}
	return k
}

// firstAtLeast is the first index with ys[i] ≥ v (-1 when none).
func firstAtLeast(ys []float64, v float64) int {
	for i, y := range ys {
		if y >= v {
			return i
		}
	}
	return -1
}

func runLegend(vs []view, extra func(v view) string) []LegendItem {
	items := make([]LegendItem, len(vs))
	for i, v := range vs {
		label := v.name
		if extra != nil {
			label += " " + extra(v)
		}
		items[i] = LegendItem{Label: label, Color: v.color, Dash: v.dash}
	}
	return items
}

// buildCharts lays out every figure of the report, in page order.
func buildCharts(vs []view, opt Options) []Chart {
	var charts []Chart
	add := func(id, title, question, method string, svg template.HTML) {
		charts = append(charts, Chart{ID: id, Title: title, Question: question, Method: method, SVG: svg})
	}
	n := func(v view) string { return fmt.Sprintf("(n=%d)", len(v.ttft)) }

	// TTFT density: linear body and log full range. The body's window is
	// the pooled percentile rounded up to the axis's last tick, so the axis
	// ends where the curves do and nothing inside the frame is left out.
	cut, note := bodyCut(vs, opt.BodyQuantile)
	window := niceMax(cut)
	var body, logd []Line
	var bodyClaims, logClaims []Claim
	for _, v := range vs {
		d := BodyDensity(v.ttft, window, 200)
		if opt.plainKDE { // negative control for the browser test
			d.Y = KDE(v.ttft[:d.In], d.Total, d.H, d.X)
		}
		body = append(body, v.line(d.X, d.Y, argmax(d.Y)))
		bodyClaims = append(bodyClaims, Claim{Run: v.name, Color: v.color, In: d.In, Total: d.Total})
		l := LogDensity(v.ttft, 200)
		logd = append(logd, v.line(l.X, l.Y, argmax(l.Y)))
		logClaims = append(logClaims, Claim{Run: v.name, Color: v.color, In: l.In, Total: l.Total})
	}
	charts = append(charts, Chart{ID: "ttft-density-linear",
		Title:    fmt.Sprintf("TTFT density, body (0 ≤ TTFT ≤ %s s)", factNum(window)),
		Question: "Where do most requests' first tokens land, and does a mechanism have a fast path (a second, early peak)?",
		Method: fmt.Sprintf("Gaussian kernel density estimate (not a histogram) over completed requests with TTFT in the window 0–%s s "+
			"(%s, rounded up to the axis's last tick); bandwidth by Scott's rule on those samples; kernels reflected at 0 and at %s s "+
			"so no mass spills outside the frame; divided by all completed requests, so the area under a curve is its share of requests inside the window.",
			factNum(window), note, factNum(window)),
		ClaimLead: "Area under each curve = completed requests inside the window:",
		Claims:    bodyClaims,
		SVG: LineChart{Title: "TTFT density — linear body", X: Axis{Label: "TTFT (s)", Min: 0, Max: window},
			Y: Axis{Label: "density (1/s)"}, Lines: body, Legend: runLegend(vs, n)}.SVG()})
	charts = append(charts, ttftCDF(vs))
	charts = append(charts, Chart{ID: "ttft-density-log", Title: "TTFT density, full range (log scale)",
		Question:  "How far does the TTFT tail reach, and how are the fast body and the slow tail split?",
		Method:    "Gaussian KDE of log10(TTFT) over all completed requests, Scott bandwidth in log space, drawn to 4 bandwidths past the extremes; y is density per decade, so equal areas mean equal shares of requests. TTFTs under 0.1 ms are drawn at 0.1 ms.",
		ClaimLead: "Area under each curve (in decades) = completed requests drawn:",
		Claims:    logClaims,
		SVG: LineChart{Title: "TTFT density — log x, full range", X: Axis{Label: "TTFT (s, log scale)", Log: true},
			Y: Axis{Label: "density per decade of TTFT"}, Lines: logd, Legend: runLegend(vs, n)}.SVG()})

	// Latency CDF and log survival.
	var cdf, surv []Line
	minS := 1.0
	for _, v := range vs {
		x, F, S := ECDFPoints(v.latency, 500)
		cdf = append(cdf, v.line(x, F, firstAtLeast(F, 0.5)))
		surv = append(surv, v.line(x, S, len(x)-1))
		if len(v.latency) > 0 {
			minS = math.Min(minS, 1/float64(len(v.latency)))
		}
	}
	// A linear x squeezes a sub-second body into the first pixels when the
	// tail reaches minutes, so the CDF goes logarithmic when the pooled
	// latencies span more than two decades.
	xa := Axis{Label: "end-to-end latency (s)"}
	lo, hi := dataRange(true, cdfX(cdf)...)
	if hi > 100*lo {
		xa = Axis{Label: "end-to-end latency (s, log scale)", Log: true}
	}
	add("latency-cdf", "End-to-end latency CDF",
		"Which run finishes more requests by a given time; where do the curves cross?",
		"Empirical CDF of completed requests' e2e latency: the share of requests with latency ≤ x. The x axis turns logarithmic when latencies span more than two decades.",
		LineChart{Title: "E2E latency CDF", X: xa,
			Y: Axis{Label: "share of completed requests ≤ x", Percent: true, Min: 0, Max: 1}, Lines: cdf, Legend: runLegend(vs, nil)}.SVG())
	add("latency-survival", "End-to-end latency survival (log y)",
		"How heavy is each run's tail: how many requests are slower than x, down to the single slowest?",
		"P(latency ≥ x) of completed requests on a log axis; the slowest request sits at 1/n.",
		LineChart{Title: "E2E latency survival — log y", X: Axis{Label: "end-to-end latency (s)"},
			Y: Axis{Label: "P(latency ≥ x)", Log: true, Min: minS, Max: 1}, Lines: surv, Legend: runLegend(vs, nil)}.SVG())

	charts = append(charts, modeCharts(vs, opt)...)
	charts = append(charts, loadCharts(vs)...)
	return charts
}

// bodyCut is where the linear TTFT body ends, and how it was chosen. The
// pooled percentile serves runs of one scale; when one run's percentile
// is ten times another's (naive PD's 41 s against DP's and KVC's
// sub-second bodies), a pooled window crushes the fast runs into the first
// pixels, so the window serves the fastest runs and every run within 10×
// of them; the slower runs show only their share inside (each curve's
// area says it), and the log-scale density beside it draws every run whole.
func bodyCut(vs []view, q float64) (float64, string) {
	var pooled []float64
	var per []float64
	for _, v := range vs {
		pooled = append(pooled, v.ttft...)
		if len(v.ttft) > 0 {
			per = append(per, metrics.Percentile(v.ttft, q))
		}
	}
	sort.Float64s(pooled)
	cut := metrics.Percentile(pooled, q)
	note := fmt.Sprintf("the pooled p%g, %s s", q, factNum(cut))
	sort.Float64s(per)
	if len(per) > 1 && per[0] > 0 && per[len(per)-1] >= 10*per[0] {
		cut = per[0]
		for _, p := range per {
			if p <= 10*per[0] {
				cut = p
			}
		}
		note = fmt.Sprintf("the largest p%g of the runs within 10× of the fastest run's, %s s: the runs' p%gs span %s–%s s, and a pooled window would crush the fast ones into the first pixels; the log-scale density draws every run whole",
			q, factNum(cut), q, factNum(per[0]), factNum(per[len(per)-1]))
	}
	if !(cut > 0) {
		cut, note = 1, "no positive TTFT: 1 s"
	}
	return cut, note
}

// ttftCDF is the empirical CDF of TTFT: beside the density, it reads off
// any percentile of any run, whatever their scales (a log x when they
// span more than two decades).
func ttftCDF(vs []view) Chart {
	var cdf []Line
	for _, v := range vs {
		x, F, _ := ECDFPoints(v.ttft, 500)
		cdf = append(cdf, v.line(x, F, firstAtLeast(F, 0.5)))
	}
	xa := Axis{Label: "TTFT (s)"}
	if lo, hi := dataRange(true, cdfX(cdf)...); hi > 100*lo {
		xa = Axis{Label: "TTFT (s, log scale)", Log: true}
	}
	return Chart{ID: "ttft-cdf", Title: "TTFT CDF",
		Question: "What share of each run's requests got their first token by a given time; which run's p50, p90, p99 is lower?",
		Method:   "Empirical CDF of completed requests' TTFT: the share of requests with TTFT ≤ x. The x axis turns logarithmic when TTFTs span more than two decades.",
		SVG: LineChart{Title: "TTFT CDF", X: xa,
			Y: Axis{Label: "share of completed requests ≤ x", Percent: true, Min: 0, Max: 1}, Lines: cdf, Legend: runLegend(vs, nil)}.SVG()}
}

// modeCharts: execution-mode mix, per-mode TTFT and tail attribution.
func modeCharts(vs []view, opt Options) []Chart {
	var out []Chart
	stats := make([][]ModeStat, len(vs))
	totals := map[string]int{}
	for i, v := range vs {
		stats[i] = ModeStats(v.Requests)
		for _, m := range stats[i] {
			totals[m.Mode] += m.Requests
		}
	}
	modes := keysByCount(totals)
	mix := make([]BarGroup, len(vs))
	ttft := make([]BarGroup, len(vs))
	top := modes
	if len(top) > opt.MaxModes {
		top = top[:opt.MaxModes]
	}
	for i, v := range vs {
		by := map[string]ModeStat{}
		all := 0
		for _, m := range stats[i] {
			by[m.Mode] = m
			all += m.Requests
		}
		mix[i] = BarGroup{Name: v.name, Color: v.color}
		for _, m := range modes {
			s, ok := by[m]
			if !ok || all == 0 {
				mix[i].Values, mix[i].Labels = append(mix[i].Values, math.NaN()), append(mix[i].Labels, "")
				continue
			}
			mix[i].Values = append(mix[i].Values, float64(s.Requests)/float64(all))
			mix[i].Labels = append(mix[i].Labels, strconv.Itoa(s.Requests))
		}
		ttft[i] = BarGroup{Name: v.name, Color: v.color}
		for _, m := range top {
			s, ok := by[m]
			if !ok || s.Completed == 0 {
				ttft[i].Values, ttft[i].Labels = append(ttft[i].Values, math.NaN()), append(ttft[i].Labels, "")
				continue
			}
			ttft[i].Values = append(ttft[i].Values, s.TTFT.Mean)
			ttft[i].Labels = append(ttft[i].Labels, fmt.Sprintf("%ss n=%d", formatNum(s.TTFT.Mean), s.Completed))
		}
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	fold := func(c Chart, trivial bool, note string) Chart {
		if trivial {
			c.Folded, c.FoldNote = true, note
		}
		return c
	}
	out = append(out, fold(Chart{ID: "mode-mix", Title: "Execution-mode mix",
		Question: "Which paths did requests take: how often the fast path (direct-to-D) fired and which fallbacks dominate?",
		Method:   "Share of each run's requests (all statuses) by execution_mode; the number after a bar is the request count.",
		SVG:      BarChart{Title: "Execution-mode mix", Categories: modes, Groups: mix, Horizontal: true, Value: Axis{Label: "share of the run's requests", Percent: true}}.SVG()},
		TrivialShares(mix), "every run sent all its requests down one execution mode ("+soleCategories(names, mix, modes)+")."))
	out = append(out, fold(Chart{ID: "mode-ttft", Title: "Mean TTFT per execution mode",
		Question: "What does each path cost? A fast path only pays if its TTFT is far below the fallbacks'.",
		Method:   fmt.Sprintf("Mean TTFT of completed requests per execution mode, the %d most used modes, log axis; the table below adds p50/p90/p99.", opt.MaxModes),
		SVG:      BarChart{Title: "Mean TTFT per execution mode", Categories: top, Groups: ttft, Horizontal: true, Value: Axis{Label: "mean TTFT (s, log scale)", Log: true}}.SVG()},
		OneCategoryEach(ttft), "every run took one execution mode ("+soleCategories(names, ttft, top)+"), so each bar is the headline's TTFT mean."))

	// Tail attribution.
	tailTotals := map[string]int{}
	type tailRes struct {
		thr   float64
		n     int
		modes map[string]ModeCount
	}
	res := make([]tailRes, len(vs))
	for i, v := range vs {
		thr, n, ms := TailAttribution(v.Requests, opt.TailQuantile)
		res[i] = tailRes{thr, n, map[string]ModeCount{}}
		for _, m := range ms {
			res[i].modes[m.Mode] = m
			tailTotals[m.Mode] += m.Count
		}
	}
	tmodes := keysByCount(tailTotals)
	groups := make([]BarGroup, len(vs))
	for i, v := range vs {
		groups[i] = BarGroup{Name: fmt.Sprintf("%s (n=%d, TTFT ≥ %s s)", v.name, res[i].n, formatNum(res[i].thr)), Color: v.color}
		for _, m := range tmodes {
			c, ok := res[i].modes[m]
			if !ok {
				groups[i].Values, groups[i].Labels = append(groups[i].Values, math.NaN()), append(groups[i].Labels, "")
				continue
			}
			share := float64(c.Count) / float64(res[i].n)
			groups[i].Values = append(groups[i].Values, share)
			groups[i].Labels = append(groups[i].Labels, fmt.Sprintf("%d (%.0f%%)", c.Count, share*100))
		}
	}
	out = append(out, fold(Chart{ID: "tail-attribution", Title: fmt.Sprintf("p%g TTFT tail attribution by execution mode", opt.TailQuantile),
		Question: "Which paths make the tail? Improving a path that is absent from the tail cannot move p99.",
		Method:   fmt.Sprintf("Completed requests with TTFT at or above the run's own p%g (numpy linear interpolation), split by execution_mode; bar = share of the run's tail, label = count (share).", opt.TailQuantile),
		SVG:      BarChart{Title: fmt.Sprintf("TTFT ≥ p%g: share of the tail by execution mode", opt.TailQuantile), Categories: tmodes, Groups: groups, Horizontal: true, Value: Axis{Label: "share of the run's tail requests", Percent: true}}.SVG()},
		TrivialShares(groups), "every run's tail is all one execution mode ("+soleCategories(names, groups, tmodes)+")."))
	return out
}

func cdfX(ls []Line) [][]float64 {
	out := make([][]float64, len(ls))
	for i, l := range ls {
		out[i] = l.X
	}
	return out
}

// keysByCount orders map keys by descending count, then name.
func keysByCount(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	return ks
}
