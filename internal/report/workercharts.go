package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// minTurnRequests is the fewest requests a turn number needs to be drawn in
// the cache-by-turn chart.
const minTurnRequests = 5

// loadCharts: per-worker load, cache behaviour, D changes and KV occupancy.
func loadCharts(vs []view) []Chart {
	var out []Chart

	// Per-worker load. Workers are the union over runs: mechanisms deploy
	// different pools (P+D versus fused), so a run simply has no bar where
	// it has no such worker.
	loads := make([]map[string]WorkerLoad, len(vs))
	seen := map[string]bool{}
	var workers []string
	for i, v := range vs {
		loads[i] = map[string]WorkerLoad{}
		for _, l := range WorkerLoads(v.Requests) {
			loads[i][l.Worker] = l
			if !seen[l.Worker] {
				seen[l.Worker] = true
				workers = append(workers, l.Worker)
			}
		}
	}
	sort.Slice(workers, func(i, j int) bool { return naturalLess(workers[i], workers[j]) })
	reqs := make([]BarGroup, len(vs))
	toks := make([]BarGroup, len(vs))
	for i, v := range vs {
		reqs[i] = BarGroup{Name: v.name, Color: v.color}
		toks[i] = BarGroup{Name: v.name, Color: v.color}
		for _, w := range workers {
			l, ok := loads[i][w]
			if !ok {
				reqs[i].Values, reqs[i].Labels = append(reqs[i].Values, math.NaN()), append(reqs[i].Labels, "")
				toks[i].Values, toks[i].Labels = append(toks[i].Values, math.NaN()), append(toks[i].Labels, "")
				continue
			}
			reqs[i].Values = append(reqs[i].Values, float64(l.Requests))
			reqs[i].Labels = append(reqs[i].Labels, strconv.Itoa(l.Requests)+" requests")
			toks[i].Values = append(toks[i].Values, float64(l.PrefillTokens+l.DecodeTokens))
			toks[i].Labels = append(toks[i].Labels, fmt.Sprintf("prefill %d + decode %d tokens", l.PrefillTokens, l.DecodeTokens))
		}
	}
	out = append(out, Chart{ID: "worker-requests", Title: "Requests per worker",
		Question: "Is routing balanced across workers by request count?",
		Method:   "Completed requests each worker prefilled or decoded (a P→D request counts on both).",
		SVG:      BarChart{Title: "Requests per worker", Categories: workers, Groups: reqs, CatLabel: "worker", Value: Axis{Label: "completed requests"}}.SVG()})
	out = append(out, Chart{ID: "worker-tokens", Title: "Token work per worker",
		Question: "Is the work balanced? Requests differ 100× in size, so equal counts can hide a hot worker.",
		Method:   "Uncached prompt tokens prefilled (on P, or on D for direct appends and fused workers) plus output tokens decoded, over completed requests; hover a bar for the split.",
		SVG:      BarChart{Title: "Token work per worker", Categories: workers, Groups: toks, CatLabel: "worker", Value: Axis{Label: "tokens (prefill + decode)"}}.SVG()})

	// Cache hit rate by turn.
	var hit []Line
	for _, v := range vs {
		l := v.line(nil, nil, -1)
		turns := CacheHitByTurn(v.Requests)
		kept := 0
		for _, t := range turns {
			if t.Requests >= minTurnRequests {
				kept++
			}
		}
		for _, t := range turns {
			if t.Requests >= minTurnRequests || kept < 2 {
				l.X, l.Y = append(l.X, float64(t.Turn)), append(l.Y, t.Ratio())
			}
		}
		if v.direct && len(l.X) > 0 {
			l.Label, l.LabelAt = v.name, len(l.X)-1
		}
		hit = append(hit, l)
	}
	out = append(out, Chart{ID: "cache-by-turn", Title: "Prefix-cache hit rate by turn",
		Question: "Do later turns find their session's history in cache, or does the mechanism lose it between turns?",
		Method:   fmt.Sprintf("Cached ÷ input tokens summed over completed requests of each turn number (token-weighted); turns with fewer than %d requests in a run are left out of its line, as a single long session would otherwise draw noise.", minTurnRequests),
		SVG: LineChart{Title: "Cache hit rate by turn", X: Axis{Label: "turn number"},
			Y: Axis{Label: "cached share of prompt tokens", Percent: true, Min: 0, Max: 1}, Lines: hit, Legend: runLegend(vs, nil)}.SVG()})

	// Uncached-token ECDF.
	var unc []Line
	for _, v := range vs {
		xs := sortedCompleted(v.Requests, func(q *Request) float64 { return math.Max(float64(q.UncachedTokens), 1) })
		x, F, _ := ECDFPoints(xs, 400)
		unc = append(unc, v.line(x, F, firstAtLeast(F, 0.5)))
	}
	out = append(out, Chart{ID: "uncached-ecdf", Title: "Uncached prompt tokens per request (ECDF)",
		Question: "How much prefill does each request still need after the cache? This is the compute the cache failed to save.",
		Method:   "Empirical CDF of uncached_tokens over completed requests, log x; fully cached requests (0 tokens) are drawn at 1.",
		SVG: LineChart{Title: "Uncached tokens ECDF", X: Axis{Label: "uncached prompt tokens (log scale)", Log: true},
			Y: Axis{Label: "share of completed requests ≤ x", Percent: true, Min: 0, Max: 1}, Lines: unc, Legend: runLegend(vs, nil)}.SVG()})

	// D changes per session.
	hists := make([][]int, len(vs))
	maxK := 0
	dg := make([]BarGroup, len(vs))
	for i, v := range vs {
		h, trans, ch := DChanges(v.Requests)
		hists[i] = h
		maxK = max(maxK, len(h)-1)
		rate := 0.0
		if trans > 0 {
			rate = float64(ch) / float64(trans)
		}
		dg[i] = BarGroup{Name: fmt.Sprintf("%s (%.0f%% of turn transitions change D)", v.name, rate*100), Color: v.color}
	}
	const capK = 15
	var cats []string
	for k := 0; k <= min(maxK, capK); k++ {
		c := strconv.Itoa(k)
		if k == capK && maxK > capK {
			c = "≥" + c
		}
		cats = append(cats, c)
	}
	for i := range vs {
		sessions := 0
		for _, c := range hists[i] {
			sessions += c
		}
		for k := range cats {
			cnt := 0
			for j, c := range hists[i] {
				if j == k || (k == capK && j > capK) {
					cnt += c
				}
			}
			if sessions == 0 {
				dg[i].Values, dg[i].Labels = append(dg[i].Values, math.NaN()), append(dg[i].Labels, "")
				continue
			}
			dg[i].Values = append(dg[i].Values, float64(cnt)/float64(sessions))
			dg[i].Labels = append(dg[i].Labels, fmt.Sprintf("%d sessions", cnt))
		}
	}
	dc := Chart{ID: "d-changes", Title: "Decode-worker changes per session",
		Question: "How sticky is session placement? Every change strands the session's KV on the old decode worker and forces a reseed.",
		Method:   "Per session, completed turns with a decode worker in turn order; a change is two consecutive turns on different decode workers. Sessions with fewer than two such turns are left out.",
		SVG:      BarChart{Title: "D changes per session", Categories: cats, Groups: dg, CatLabel: "decode-worker changes in the session", Value: Axis{Label: "share of sessions", Percent: true}}.SVG()}
	if TrivialShares(dg) {
		names := make([]string, len(vs))
		for i, v := range vs {
			names[i] = v.name
		}
		dc.Folded, dc.FoldNote = true, "in every run all sessions changed decode worker the same number of times (changes: "+soleCategories(names, dg, cats)+")."
	}
	out = append(out, dc)

	// KV occupancy over time: one panel per run (mean and busiest worker
	// are two lines each, which overlap past reading in one frame).
	var panels []Panel
	for _, v := range vs {
		t, mean, mx := Occupancy(decodeSide(v.Workers), 300)
		panels = append(panels, Panel{Title: v.name, Lines: []Line{
			{Name: v.name + " mean", Color: v.color, X: t, Y: mean},
			{Name: v.name + " busiest worker", Color: v.color, Dash: "5 3", X: t, Y: mx}}})
	}
	legend := []LegendItem{{Label: "solid: mean over workers", Color: "#444"}, {Label: "dashed: busiest worker", Color: "#444", Dash: "5 3"}}
	out = append(out, Chart{ID: "kv-occupancy", Title: "KV pool occupancy over time (decode-side workers)",
		Question: "How full are the pools that hold sessions between turns, and is one worker saturated while others idle?",
		Method:   "From structural/workers.jsonl: kv_used_tokens ÷ kv_capacity_tokens of decode and colocated workers (all workers when roles are absent), each worker's level held between samples and averaged over 300 equal time buckets; one panel per run on shared axes, solid = mean over workers, dashed = the fullest worker in the bucket.",
		SVG: SmallMultiples{Title: "KV occupancy over time", X: Axis{Label: "run time (s)"},
			Y: Axis{Label: "KV pool occupancy", Percent: true, Min: 0, Max: 1}, Panels: panels, Legend: legend}.SVG()})
	return out
}
