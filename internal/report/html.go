package report

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Options tune the HTML report. Zero values mean the defaults.
type Options struct {
	Title        string  // page title; default "pdhybrid report: A vs B"
	TailQuantile float64 // tail attribution takes TTFT ≥ this percentile; default 99
	BodyQuantile float64 // the linear TTFT density shows TTFT ≤ this pooled percentile; default 95
	MaxModes     int     // per-mode TTFT chart shows this many most used modes; default 14

	plainKDE bool // tests: draw the body density without boundary reflection (the old bug)
}

func (o Options) withDefaults(names []string) Options {
	if o.TailQuantile <= 0 || o.TailQuantile >= 100 {
		o.TailQuantile = 99
	}
	if o.BodyQuantile <= 0 || o.BodyQuantile > 100 {
		o.BodyQuantile = 95
	}
	if o.MaxModes <= 0 {
		o.MaxModes = 14
	}
	if o.Title == "" {
		o.Title = "pdhybrid report"
		for i, n := range names {
			sep := ": "
			if i > 0 {
				sep = " vs "
			}
			o.Title += sep + n
		}
	}
	return o
}

// WriteHTML writes outDir/index.html comparing runs (the first is the
// baseline for deltas) with default options.
func WriteHTML(outDir string, runs []*Run) error {
	return WriteHTMLOptions(outDir, runs, Options{})
}

// WriteHTMLOptions is WriteHTML with options.
func WriteHTMLOptions(outDir string, runs []*Run, opt Options) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	path := filepath.Join(outDir, "index.html")
	tmp, err := os.CreateTemp(outDir, ".index-*.html")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriter(tmp)
	if err := Render(bw, runs, opt); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// page is what the template sees.
type page struct {
	Title      string
	Version    string
	TailQ      float64
	Facts      []factView
	Incomplete []runInfo
	// VerdictStats, VerdictKVC: the verdict block (BuildVerdict), as bench
	// prints it.
	VerdictStats, VerdictKVC []string
	Runs                     []runInfo
	Names                    []string
	Headline                 []htmlRow
	Failures                 []CountRow
	ModeLegend               []modeWord // every execution mode the runs took, in plain words
	Charts                   []Chart    // drawn in the grid
	Folded                   []Chart    // trivially 100% for these runs: folded away
	Modes                    []modeTable
	// OneModeEach: every run took at most one execution mode, so the
	// per-mode and tail tables repeat the headline and are folded away.
	OneModeEach bool
	Tails       []tailTable
	Events      []CountRow
}

// modeWord is a legend row: a mode label, what it means, requests per run.
type modeWord struct {
	Mode, Words string
	Counts      []int
}

type runInfo struct {
	Name, Color, Dir, Mechanism, Policy string
	Requests, Completed                 int
	GPUs                                string
	Incomplete                          bool
	StopReason                          string
}

// factView is a FactRow with each run's value next to its name and colour.
type factView struct {
	Key, Label string
	Same       bool
	Value      string
	PerRun     []runValue
}

type runValue struct{ Name, Color, Value string }

type htmlCell struct {
	Value, Delta, Class string
}

type htmlRow struct {
	Label, Unit string
	Cells       []htmlCell
}

type modeTable struct {
	Run, Color string
	Rows       []ModeStat
}

type tailTable struct {
	Run, Color string
	Threshold  float64
	Tail       int
	Rows       []ModeCount
}

// Render writes the whole report page to w.
func Render(w io.Writer, runs []*Run, opt Options) error {
	if len(runs) == 0 {
		return fmt.Errorf("report: no runs to render")
	}
	vs := newViews(runs)
	names := make([]string, len(vs))
	sums := make([]metrics.Summary, len(vs))
	for i, v := range vs {
		names[i], sums[i] = v.name, v.Summary
	}
	opt = opt.withDefaults(names)
	p := page{Title: opt.Title, Version: BuildVersion(), TailQ: opt.TailQuantile, Names: names, Failures: FailureRows(sums)}
	p.VerdictStats, p.VerdictKVC = BuildVerdict(names, sums).Lines()
	for _, r := range ModeRows(sums) {
		w := ModeWords(r.Name)
		if w == "" {
			w = "(no description: a label this version does not know)"
		}
		p.ModeLegend = append(p.ModeLegend, modeWord{r.Name, w, r.Counts})
	}
	facts := make([]Facts, len(vs))
	for i, v := range vs {
		facts[i] = v.Facts
	}
	for _, r := range FactRows(facts) {
		fv := factView{Key: r.Key, Label: r.Label, Same: r.Same, Value: r.Value}
		for i, v := range vs {
			fv.PerRun = append(fv.PerRun, runValue{v.name, v.color, r.PerRun[i]})
		}
		p.Facts = append(p.Facts, fv)
	}
	for _, v := range vs {
		ri := runInfo{Name: v.name, Color: v.color, Dir: v.Dir, Mechanism: v.Mechanism, Policy: v.Policy,
			Requests: len(v.Requests), Completed: len(v.ttft), GPUs: v.Facts.GPUs,
			Incomplete: v.Facts.Incomplete, StopReason: v.Facts.StopReason}
		if ri.Incomplete && ri.StopReason == "" {
			ri.StopReason = "reason not recorded"
		}
		p.Runs = append(p.Runs, ri)
		if ri.Incomplete {
			p.Incomplete = append(p.Incomplete, ri)
		}
		p.Modes = append(p.Modes, modeTable{v.name, v.color, ModeStats(v.Requests)})
		thr, n, ms := TailAttribution(v.Requests, opt.TailQuantile)
		p.Tails = append(p.Tails, tailTable{v.name, v.color, thr, n, ms})
	}
	for _, r := range HeadlineRows(sums) {
		hr := htmlRow{Label: r.Label, Unit: r.Unit}
		for i, v := range r.Values {
			c := htmlCell{Value: FormatValue(r, v), Delta: FormatDelta(r, i)}
			if d, ok := r.Delta(i); ok && d != 0 && r.Better != "" {
				if (d < 0) == (r.Better == "lower") {
					c.Class = "good"
				} else {
					c.Class = "bad"
				}
			}
			hr.Cells = append(hr.Cells, c)
		}
		p.Headline = append(p.Headline, hr)
	}
	evs := make([]metrics.Summary, len(vs))
	for i, v := range vs {
		evs[i].ExecutionModes = v.Events
	}
	p.Events = ModeRows(evs)
	p.OneModeEach = true
	for _, m := range p.Modes {
		if len(m.Rows) > 1 {
			p.OneModeEach = false
		}
	}
	for _, c := range buildCharts(vs, opt) {
		if c.Folded {
			p.Folded = append(p.Folded, c)
		} else {
			p.Charts = append(p.Charts, c)
		}
	}
	t, err := template.New("page").Funcs(template.FuncMap{
		"num": formatNum,
		"ms":  func(s float64) string { return formatNum(s) },
		"pct": func(a, b int) string {
			if b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
		},
	}).Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("report: template: %w", err)
	}
	if err := t.Execute(w, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
