package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
)

// Facts say what a run compares: the model and hardware it ran on, how many
// GPUs each role had, what it replayed and how fast, the SLO its goodput
// used and the pdhybrid that made it. Every field is display text; "" means
// the run folder does not say (the page shows "—").
type Facts struct {
	Model          string
	Hardware       string
	GPUs           string // per role: "1P3D" (1 prefill + 3 decode), "DP×4" (4 colocated)
	KVCPreset      string // a KVC run's preset: "v2" or "v3" (--kvc-preset); "" for other mechanisms
	Workload       string
	TimeScale      string
	RequestRate    string
	MaxConcurrency string
	SLO            string
	Date           string
	Version        string // the pdhybrid that wrote the run, when recorded
	Incomplete     bool   // summary.json says "complete": false
	StopReason     string // why an incomplete run stopped
}

// factFields lists the facts in page order with their labels.
var factFields = []struct {
	Key, Label string
	Get        func(*Facts) string
}{
	{"model", "model", func(f *Facts) string { return f.Model }},
	{"hardware", "hardware profile", func(f *Facts) string { return f.Hardware }},
	{"gpus", "GPUs per role", func(f *Facts) string { return f.GPUs }},
	{"kvc_preset", "KVC preset", func(f *Facts) string { return f.KVCPreset }},
	{"workload", "workload / trace", func(f *Facts) string { return f.Workload }},
	{"time_scale", "time scale", func(f *Facts) string { return f.TimeScale }},
	{"request_rate", "request rate", func(f *Facts) string { return f.RequestRate }},
	{"max_concurrency", "max concurrency", func(f *Facts) string { return f.MaxConcurrency }},
	{"slo", "goodput SLO", func(f *Facts) string { return f.SLO }},
	{"date", "date", func(f *Facts) string { return f.Date }},
	{"version", "pdhybrid version", func(f *Facts) string { return f.Version }},
}

// FactRow is one fact across runs: one Value when every run agrees (""
// when none says), else one value per run, in run order.
type FactRow struct {
	Key, Label string
	Same       bool
	Value      string
	PerRun     []string
}

// FactRows lines the runs' facts up for the page's header.
func FactRows(fs []Facts) []FactRow {
	out := make([]FactRow, 0, len(factFields))
	for _, fd := range factFields {
		r := FactRow{Key: fd.Key, Label: fd.Label, Same: true}
		for i := range fs {
			v := fd.Get(&fs[i])
			r.PerRun = append(r.PerRun, v)
			if i > 0 && v != r.PerRun[0] {
				r.Same = false
			}
		}
		if r.Same && len(r.PerRun) > 0 {
			r.Value = r.PerRun[0]
		}
		out = append(out, r)
	}
	return out
}

// readFacts reads the facts of the run folder dir. summary.json is decoded
// on its own, field by field, so fields this version does not know (or
// knows with another type) never make a run unreadable: a field that cannot
// be understood is shown as unknown.
func readFacts(dir string, cfg map[string]any, ws []WorkerSeries) (Facts, error) {
	var sum map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return Facts{}, fmt.Errorf("report: %w", err)
	default:
		_ = json.Unmarshal(b, &sum) // readSummary reports a broken file
	}
	return ExtractFacts(sum, cfg, ws), nil
}

// ExtractFacts takes each fact from summary.json (sum) first, then from
// config.json (cfg); GPUs per role come from the config's worker counts,
// else from the roles in structural/workers.jsonl (ws). Either map may be
// nil.
func ExtractFacts(sum, cfg map[string]any, ws []WorkerSeries) Facts {
	var f Facts
	first := func(vals ...any) any {
		for _, v := range vals {
			if v != nil {
				return v
			}
		}
		return nil
	}
	profile, _ := cfg["profile"].(map[string]any)
	pmodel, _ := profile["model"].(map[string]any)
	phw, _ := profile["hardware"].(map[string]any)

	f.Model = text(first(sum["model_id"], sum["model"], cfg["model_id"], cfg["model"], pmodel["name"]))
	f.Hardware = text(first(sum["hardware"], cfg["hardware"], phw["name"], profile["name"]))
	f.GPUs = gpusFromConfig(cfg)
	if f.GPUs == "" {
		f.GPUs = gpusFromWorkers(ws)
	}
	if mech := first(sum["mechanism"], cfg["mechanism"]); mech == "kvcache-centric" {
		if kc, ok := cfg["kvc"].(map[string]any); ok {
			f.KVCPreset = "v2" // simulated before the presets: v2
			v3, _ := kc["v3"].(map[string]any)
			if p, ok := v3["preset"].(string); ok && p != "" {
				f.KVCPreset = p
			}
		}
	}
	f.Workload = workloadText(first(sum["workload"], cfg["workload"], cfg["trace"]))
	f.TimeScale = timeScaleText(first(sum["time_scale"], cfg["time_scale"]))
	f.RequestRate = rateText(first(sum["request_rate"], cfg["request_rate"]))
	if v, ok := sum["max_concurrency"]; ok {
		f.MaxConcurrency = concurrencyText(v)
	} else if v, ok := cfg["concurrency"]; ok {
		f.MaxConcurrency = concurrencyText(v)
	}
	f.SLO = sloText(first(sum["slo"], cfg["slo"]))
	f.Date = text(first(sum["date"], cfg["date"]))
	f.Version = text(first(sum["pdhybrid_version"], sum["version"], cfg["pdhybrid_version"], cfg["version"]))
	if c, ok := sum["complete"].(bool); ok && !c {
		f.Incomplete = true
		f.StopReason = text(first(sum["stop_reason"], sum["reason"]))
	}
	return f
}

// text renders a JSON scalar; objects and lists become "k: v" lists.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(x)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return ""
		}
		return factNum(x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			if s := text(e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts := make([]string, 0, len(ks))
		for _, k := range ks {
			if s := text(x[k]); s != "" {
				parts = append(parts, k+": "+s)
			}
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

func num(v any) (float64, bool) {
	x, ok := v.(float64)
	return x, ok && !math.IsNaN(x) && !math.IsInf(x, 0)
}

// gpusFromConfig reads the worker counts of a pdhybrid config: prefill and
// decode workers ("1P3D") and colocated ones ("DP×4"), one GPU each.
func gpusFromConfig(cfg map[string]any) string {
	p, _ := num(cfg["prefill"])
	d, _ := num(cfg["decode"])
	c, _ := num(cfg["colo"])
	return gpuText(int(p), int(d), int(c))
}

// gpusFromWorkers counts the workers of each role seen in the occupancy log.
func gpusFromWorkers(ws []WorkerSeries) string {
	var p, d, c int
	for _, w := range ws {
		switch w.Role {
		case "prefill":
			p++
		case "decode":
			d++
		case "colocated", "colo":
			c++
		}
	}
	return gpuText(p, d, c)
}

func gpuText(p, d, c int) string {
	var parts []string
	if p > 0 || d > 0 {
		parts = append(parts, fmt.Sprintf("%dP%dD", p, d))
	}
	if c > 0 {
		parts = append(parts, fmt.Sprintf("DP×%d", c))
	}
	return strings.Join(parts, " + ")
}

// workloadText names a workload: a string as given, an object by its
// "name" (with its other fields after it).
func workloadText(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return text(v)
	}
	name := text(m["name"])
	rest := map[string]any{}
	for k, x := range m {
		if k != "name" {
			rest[k] = x
		}
	}
	if r := text(rest); r != "" {
		if name == "" {
			return r
		}
		return name + " (" + r + ")"
	}
	return name
}

func timeScaleText(v any) string {
	x, ok := num(v)
	switch {
	case !ok:
		return text(v)
	case x == 1:
		return "1 (trace time)"
	case x > 1:
		return fmt.Sprintf("%s (arrivals and think times %s× faster than the trace)", factNum(x), factNum(x))
	}
	return fmt.Sprintf("%s (trace time ÷ %s)", factNum(x), factNum(x))
}

func rateText(v any) string {
	if x, ok := num(v); ok {
		return factNum(x) + " req/s"
	}
	return text(v)
}

// concurrencyText: 0 and null mean no limit, in pdhybrid's config as in
// vLLM's bench output.
func concurrencyText(v any) string {
	if v == nil {
		return "unlimited"
	}
	if x, ok := num(v); ok {
		if x <= 0 {
			return "unlimited"
		}
		return factNum(x) + " requests in flight"
	}
	return text(v)
}

// sloText reads an SLO object with bounds in seconds (ttft_s, tpot_s,
// e2el_s) or milliseconds (ttft_ms, …); zero bounds are not bounds.
func sloText(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return text(v)
	}
	names := map[string]string{"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E latency", "latency": "E2E latency"}
	order := []string{"ttft", "tpot", "itl", "e2el", "latency"}
	var parts []string
	seen := map[string]bool{}
	for _, base := range order {
		for _, unit := range []string{"_s", "_ms"} {
			k := base + unit
			x, ok := num(m[k])
			if !ok {
				continue
			}
			seen[k] = true
			if x <= 0 {
				continue
			}
			s := x
			if unit == "_ms" {
				s = x / 1e3
			}
			parts = append(parts, names[base]+" ≤ "+durationText(s))
		}
	}
	rest := map[string]any{}
	for k, x := range m {
		if !seen[k] {
			rest[k] = x
		}
	}
	if r := text(rest); r != "" {
		parts = append(parts, r)
	}
	if len(parts) == 0 {
		return "none (every completed request counts)"
	}
	return strings.Join(parts, ", ")
}

// factNum prints a recorded number compactly: 4 significant digits, no
// trailing zeros (2, 0.1, 2.5, 1.234e+06 → 1234000).
func factNum(x float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 4, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// durationText prints seconds as s under a minute and ms under a second.
func durationText(s float64) string {
	if s < 1 {
		return factNum(s*1e3) + " ms"
	}
	return factNum(s) + " s"
}

// Version is the pdhybrid version the page names as its writer. A build
// may set it (-ldflags "-X …/internal/report.Version=v1.2.3"); when empty,
// BuildVersion reads the module version and VCS stamp of the binary.
var Version string

// VersionFrom, when set and Version is empty, gives the version on first
// use: a command sets it so that the version (which may take a git run to
// find) is looked up only by a run that renders a page.
var VersionFrom func() string

// BuildVersion returns Version, else VersionFrom's answer, else the
// binary's module version and revision ("v1.2.3", "(devel)
// 3c5b43e1a2b4+dirty"), else "devel".
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	if VersionFrom != nil {
		if v := VersionFrom(); v != "" {
			return v
		}
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := bi.Main.Version
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		if dirty {
			rev += "+dirty"
		}
		if v == "" || v == "(devel)" {
			return rev
		}
		return v + " " + rev
	}
	if v == "" {
		return "devel"
	}
	return v
}
