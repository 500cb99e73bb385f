package synth

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wekaDir is where the real Claude Code sessions live relative to this
// package (the project's ../shared). Tests that need them skip without it.
const wekaDir = "../../../shared/traces/weka"

type wekaReq struct {
	Type      string    `json:"type"`
	In        int       `json:"in"`
	Out       int       `json:"out"`
	T         float64   `json:"t"`
	Think     *float64  `json:"think_time"`
	API       *float64  `json:"api_time"`
	HashIDs   []int64   `json:"hash_ids"`
	Requests  []wekaReq `json:"requests"`
	Tool      int       `json:"tool_tokens"`
	System    int       `json:"system_tokens"`
	BlockSize int       `json:"block_size"`
}

type wekaSession struct {
	BlockSize int       `json:"block_size"`
	Tool      int       `json:"tool_tokens"`
	System    int       `json:"system_tokens"`
	Requests  []wekaReq `json:"requests"`
}

// wekaMeasure is everything the Agentic defaults are derived from.
type wekaMeasure struct {
	sessions, requests, subagents, mainTurns int
	prefix, firstCtx, turns, appendTok       []float64
	appendTurn2                              []float64
	output, think, compactRatio              []float64
	subTurns, subFirstCtx, subThink          []float64
	subPrefix                                []float64
	allIn, allOut, allThink                  []float64
	bandTrans, bandDrops                     [3]int
	apiOut, apiTime                          []float64
	sessionsOverCap                          int
}

func loadWeka(t testing.TB) *wekaMeasure {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(wekaDir, "trace_*.json"))
	if len(files) == 0 {
		t.Skipf("weka traces not found at %s (../shared absent): skipping calibration", wekaDir)
	}
	slices.Sort(files)
	m := &wekaMeasure{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s wekaSession
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		m.sessions++
		p := float64(s.Tool + s.System)
		m.prefix = append(m.prefix, p)
		var main []wekaReq
		maxIn := 0
		for _, r := range s.Requests {
			if r.Type == "subagent" {
				m.subagents++
				m.subTurns = append(m.subTurns, float64(len(r.Requests)))
				sp := float64(r.Tool + r.System)
				m.subPrefix = append(m.subPrefix, sp)
				for i, x := range r.Requests {
					m.requests++
					m.allIn = append(m.allIn, float64(x.In))
					m.allOut = append(m.allOut, float64(x.Out))
					if i == 0 {
						m.subFirstCtx = append(m.subFirstCtx, float64(x.In)-sp)
					} else if x.Think != nil {
						m.subThink = append(m.subThink, *x.Think)
						m.allThink = append(m.allThink, *x.Think)
					}
				}
				continue
			}
			main = append(main, r)
		}
		m.turns = append(m.turns, float64(len(main)))
		m.mainTurns += len(main)
		for i, r := range main {
			m.requests++
			maxIn = max(maxIn, r.In)
			m.allIn = append(m.allIn, float64(r.In))
			m.allOut = append(m.allOut, float64(r.Out))
			m.output = append(m.output, float64(r.Out))
			if r.API != nil {
				m.apiOut = append(m.apiOut, float64(r.Out))
				m.apiTime = append(m.apiTime, *r.API)
			}
			if i == 0 {
				m.firstCtx = append(m.firstCtx, float64(r.In)-p)
				continue
			}
			if r.Think != nil {
				m.think = append(m.think, *r.Think)
				m.allThink = append(m.allThink, *r.Think)
			}
			prev := main[i-1]
			band := 0
			switch {
			case prev.In >= 160000:
				band = 2
			case prev.In >= 140000:
				band = 1
			}
			m.bandTrans[band]++
			if r.In < prev.In {
				m.bandDrops[band]++
				m.compactRatio = append(m.compactRatio, (float64(r.In)-p)/(float64(prev.In)-p))
				continue
			}
			a := math.Max(0, float64(r.In-prev.In-prev.Out))
			if i == 1 {
				m.appendTurn2 = append(m.appendTurn2, a)
			} else {
				m.appendTok = append(m.appendTok, a)
			}
		}
		if maxIn > 262144 {
			m.sessionsOverCap++
		}
	}
	return m
}

// quantile is the type-7 (linear interpolation) sample quantile.
func quantile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	h := float64(len(s)-1) * p
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (s[i+1]-s[i])*(h-float64(i))
}

func tableOf(xs []float64, digits int) quantiles {
	var q quantiles
	scale := math.Pow(10, float64(digits))
	for i, p := range quantileGrid {
		q[i] = math.Round(quantile(xs, p)*scale) / scale
	}
	return q
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func spearman(a, b []float64) float64 {
	rank := func(x []float64) []float64 {
		idx := make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(i, j int) int { return compareF(x[i], x[j]) })
		r := make([]float64, len(x))
		for k := 0; k < len(idx); {
			e := k
			for e+1 < len(idx) && x[idx[e+1]] == x[idx[k]] {
				e++
			}
			for j := k; j <= e; j++ { // ties share their mean rank
				r[idx[j]] = float64(k+e) / 2
			}
			k = e + 1
		}
		return r
	}
	ra, rb := rank(a), rank(b)
	ma, mb := mean(ra), mean(rb)
	var sab, saa, sbb float64
	for i := range ra {
		sab += (ra[i] - ma) * (rb[i] - mb)
		saa += (ra[i] - ma) * (ra[i] - ma)
		sbb += (rb[i] - mb) * (rb[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

func compareF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fmtTable(name string, q quantiles) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s = quantiles{", name)
	for i, v := range q {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%g", v)
	}
	b.WriteString("}")
	return b.String()
}

// TestSynthWekaCalibration re-measures the weka set and checks that the
// embedded tables and constants are exactly what the data gives. Run with -v
// to see every figure docs/workloads.md quotes; on a mismatch it prints the
// Go source of the measured table.
func TestSynthWekaCalibration(t *testing.T) {
	m := loadWeka(t)
	t.Logf("sessions %d, sub-agents %d, requests %d (main-agent %d)", m.sessions, m.subagents, m.requests, m.mainTurns)
	for _, d := range []struct {
		name string
		xs   []float64
	}{{"input (all requests)", m.allIn}, {"output (all requests)", m.allOut}, {"think (all, turn>1)", m.allThink},
		{"shared prefix tool+system", m.prefix}, {"first-turn context after prefix", m.firstCtx},
		{"turns per session", m.turns}, {"append at turn 2", m.appendTurn2}, {"append per turn 3+", m.appendTok}, {"output (main)", m.output},
		{"think (main)", m.think}, {"compaction ratio", m.compactRatio}, {"sub-agent turns", m.subTurns},
		{"sub-agent prefix", m.subPrefix}, {"sub-agent first context", m.subFirstCtx}, {"sub-agent think", m.subThink}} {
		t.Logf("%-32s n=%5d mean=%10.1f p50=%9.1f p90=%9.1f p99=%9.1f max=%9.1f", d.name, len(d.xs), mean(d.xs),
			quantile(d.xs, .5), quantile(d.xs, .9), quantile(d.xs, .99), quantile(d.xs, 1))
	}
	t.Logf("sessions exceeding 262,144 input tokens: %d", m.sessionsOverCap)
	for i, name := range []string{"<140K", "140K-160K", ">=160K"} {
		t.Logf("compaction hazard %-9s drops %2d / transitions %4d = %.4f", name, m.bandDrops[i], m.bandTrans[i],
			float64(m.bandDrops[i])/float64(m.bandTrans[i]))
	}
	rs := spearman(m.firstCtx, m.turns)
	t.Logf("spearman(first-turn context, turns) = %.3f", rs)
	// Least-squares api_time = a + out/rate.
	mo, mt := mean(m.apiOut), mean(m.apiTime)
	var sxy, sxx float64
	for i := range m.apiOut {
		sxy += (m.apiOut[i] - mo) * (m.apiTime[i] - mt)
		sxx += (m.apiOut[i] - mo) * (m.apiOut[i] - mo)
	}
	slope := sxy / sxx
	t.Logf("api_time = %.3f s + out / %.1f tok/s (n=%d)", mt-slope*mo, 1/slope, len(m.apiOut))
	t.Logf("sub-agent probability per main turn = %d/%d = %.5f", m.subagents, m.mainTurns, float64(m.subagents)/float64(m.mainTurns))

	check := func(name string, got quantiles, want *quantiles) {
		t.Helper()
		if got != *want {
			t.Errorf("embedded %s differs from the data; measured:\n%s", name, fmtTable(name, got))
		}
	}
	w := wekaTables()
	check("firstContext", tableOf(m.firstCtx, 0), &w.firstContext)
	check("turns", tableOf(m.turns, 1), &w.turns)
	check("appendTurn2", tableOf(m.appendTurn2, 0), &w.appendTurn2)
	check("appendTokens", tableOf(m.appendTok, 0), &w.appendTokens)
	check("output", tableOf(m.output, 0), &w.output)
	check("think", tableOf(m.think, 1), &w.think)
	check("compactRatio", tableOf(m.compactRatio, 3), &w.compactRatio)
	check("subTurns", tableOf(m.subTurns, 1), &w.subTurns)
	check("subFirstContext", tableOf(m.subFirstCtx, 0), &w.subFirstContext)
	check("subThink", tableOf(m.subThink, 1), &w.subThink)
	if got := math.Round(rs*1000) / 1000; got != w.spearmanFirstTurns {
		t.Errorf("spearman: embedded %v, measured %v", w.spearmanFirstTurns, got)
	}
}
