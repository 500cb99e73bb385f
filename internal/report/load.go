// Package report turns run directories (written by `pdhybrid sim` and
// `pdhybrid bench`) into comparisons people can read: aligned terminal
// tables (text, CSV, JSON) and a self-contained HTML page whose charts are
// inline SVG drawn here, so a report opens offline, from an archive, years
// later, with nothing fetched.
//
// The numbers behind each chart are computed by small pure functions
// (series.go) so they can be tested against hand-computed values; drawing
// (svg.go) and the page (html.go) only lay them out.
package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Request is the slice of a metrics.Record a report needs. A run can hold
// hundreds of thousands of requests, so Load keeps only these fields and
// shares repeated strings (session ids, modes, workers) between requests.
type Request struct {
	SessionID      string
	Turn           int
	InputLength    int
	OutputLength   int
	CachedTokens   int
	UncachedTokens int
	TTFTS          float64
	LatencyS       float64
	TPOTS          float64
	ExecutionMode  string
	PrefillWorker  string
	DecodeWorker   string
	Completed      bool   // status == completed; only these enter latency charts
	Cause          string // "status: error" for requests that did not complete
}

// WorkerSeries is one worker's KV pool occupancy over time, from
// structural/workers.jsonl, in time order.
type WorkerSeries struct {
	Worker string
	Role   string
	T      []float64 // seconds on the run clock
	Occ    []float64 // kv_used_tokens / kv_capacity_tokens, 0..1
}

// Run is one loaded run directory.
type Run struct {
	Name      string // config.json "name", else the folder's base name
	Dir       string
	Mechanism string
	Policy    string
	Config    map[string]any
	Summary   metrics.Summary
	Requests  []Request
	Workers   []WorkerSeries // sorted by role, then worker name
	Events    map[string]int // structural/events.jsonl: count per kind
	Facts     Facts          // what the run compares: model, GPUs, workload, SLO (facts.go)
}

// maxLine bounds one JSONL line; records are a few hundred bytes, so a
// longer line means a corrupt file rather than data.
const maxLine = 16 << 20

// IsRunDir reports whether dir looks like a run (has metrics.jsonl or
// summary.json).
func IsRunDir(dir string) bool {
	for _, f := range []string{"metrics.jsonl", "summary.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// Expand resolves the directories given on a command line into run
// directories: a run directory stands for itself, and a `pdhybrid bench`
// output folder (runs one level down) stands for its runs, in the order of
// its comparison.json "runs" list (bench's baseline first), then by name.
func Expand(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if IsRunDir(d) {
			out = append(out, d)
			continue
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		var sub []string
		for _, e := range ents {
			if p := filepath.Join(d, e.Name()); e.IsDir() && IsRunDir(p) {
				sub = append(sub, p)
			}
		}
		if len(sub) == 0 {
			return nil, fmt.Errorf("report: %s holds no metrics.jsonl or summary.json, nor run folders", d)
		}
		sortByComparison(d, sub)
		out = append(out, sub...)
	}
	return out, nil
}

// sortByComparison orders a bench folder's runs as its comparison.json
// lists them, so the report's baseline is bench's baseline.
func sortByComparison(dir string, sub []string) {
	rank := map[string]int{}
	if b, err := os.ReadFile(filepath.Join(dir, "comparison.json")); err == nil {
		var c struct {
			Runs []string `json:"runs"`
		}
		if json.Unmarshal(b, &c) == nil {
			for i, n := range c.Runs {
				rank[n] = i + 1
			}
		}
	}
	sort.Slice(sub, func(i, j int) bool {
		ri, rj := rank[filepath.Base(sub[i])], rank[filepath.Base(sub[j])]
		if (ri == 0) != (rj == 0) {
			return ri != 0
		}
		if ri != rj {
			return ri < rj
		}
		return sub[i] < sub[j]
	})
}

// Load reads a run directory: metrics.jsonl (streamed; required),
// summary.json (recomputed from metrics.jsonl when absent), config.json,
// structural/workers.jsonl and structural/events.jsonl (both optional).
func Load(dir string) (*Run, error) {
	r := &Run{Dir: dir, Events: map[string]int{}}
	if err := readConfig(dir, r); err != nil {
		return nil, err
	}
	sum, ok, err := readSummary(dir)
	if err != nil {
		return nil, err
	}
	var col *metrics.Collector // only needed when summary.json is missing
	if !ok {
		col = metrics.NewCollector(metrics.SLO{})
	}
	if err := readRecords(filepath.Join(dir, "metrics.jsonl"), r, col); err != nil {
		return nil, err
	}
	if !ok {
		sum = col.Summary(0)
	}
	r.Summary = sum
	if r.Mechanism == "" {
		r.Mechanism = sum.Mechanism
	}
	if r.Policy == "" {
		r.Policy = sum.Policy
	}
	if err := readWorkers(filepath.Join(dir, "structural", "workers.jsonl"), r); err != nil {
		return nil, err
	}
	for _, name := range eventFiles {
		if err := readEvents(filepath.Join(dir, "structural", name), r); err != nil {
			return nil, err
		}
	}
	if r.Facts, err = readFacts(dir, r.Config, r.Workers); err != nil {
		return nil, err
	}
	return r, nil
}

// LoadAll loads several run directories concurrently (decoding JSON is the
// bottleneck for large runs), returning them in the order given.
func LoadAll(dirs []string) ([]*Run, error) {
	runs := make([]*Run, len(dirs))
	errs := make([]error, len(dirs))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			runs[i], errs[i] = Load(d)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return runs, nil
}

// LoadSummary reads only what a terminal table needs: the run's name and
// summary.json, falling back to streaming metrics.jsonl through a Collector
// when the summary is missing.
func LoadSummary(dir string) (string, metrics.Summary, error) {
	r := &Run{Dir: dir}
	if err := readConfig(dir, r); err != nil {
		return "", metrics.Summary{}, err
	}
	sum, ok, err := readSummary(dir)
	if err != nil {
		return "", sum, err
	}
	if !ok {
		col := metrics.NewCollector(metrics.SLO{})
		if err := eachLine(filepath.Join(dir, "metrics.jsonl"), func(b []byte) error {
			var rec metrics.Record
			if err := json.Unmarshal(b, &rec); err != nil {
				return err
			}
			col.Add(&rec)
			return nil
		}); err != nil {
			return "", sum, err
		}
		sum = col.Summary(0)
	}
	return r.Name, sum, nil
}

func readConfig(dir string, r *Run) error {
	r.Name = filepath.Base(filepath.Clean(dir))
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := json.Unmarshal(b, &r.Config); err != nil {
		return fmt.Errorf("report: %s/config.json: %w", dir, err)
	}
	str := func(k string) string { s, _ := r.Config[k].(string); return s }
	if n := str("name"); n != "" {
		r.Name = n
	}
	r.Mechanism, r.Policy = str("mechanism"), str("policy")
	return nil
}

func readSummary(dir string) (metrics.Summary, bool, error) {
	var s metrics.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("report: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("report: %s/summary.json: %w", dir, err)
	}
	// Summaries from before "complete" existed were only ever written for
	// whole runs; a stopped run always names its stop reason.
	s.Complete = s.StopReason == ""
	return s, true, nil
}

// slimRecord decodes only the fields a report keeps; encoding/json skips
// the rest without allocating for them.
type slimRecord struct {
	SessionID      string  `json:"session_id"`
	Turn           int     `json:"turn"`
	InputLength    int     `json:"input_length"`
	OutputLength   int     `json:"output_length"`
	CachedTokens   int     `json:"cached_tokens"`
	UncachedTokens int     `json:"uncached_tokens"`
	TTFTS          float64 `json:"ttft_s"`
	LatencyS       float64 `json:"latency_s"`
	TPOTS          float64 `json:"tpot_s"`
	ExecutionMode  string  `json:"execution_mode"`
	PrefillWorker  string  `json:"prefill_worker"`
	DecodeWorker   string  `json:"decode_worker"`
	Status         string  `json:"status"`
	Error          string  `json:"error"`
}

// readRecords streams metrics.jsonl into r.Requests and, when col is not
// nil (runs without summary.json), into col.
func readRecords(path string, r *Run, col *metrics.Collector) error {
	intern := map[string]string{}
	in := func(s string) string {
		if v, ok := intern[s]; ok {
			return v
		}
		intern[s] = s
		return s
	}
	return eachLine(path, func(b []byte) error {
		var s slimRecord
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		q := Request{
			SessionID: in(s.SessionID), Turn: s.Turn,
			InputLength: s.InputLength, OutputLength: s.OutputLength,
			CachedTokens: s.CachedTokens, UncachedTokens: s.UncachedTokens,
			TTFTS: s.TTFTS, LatencyS: s.LatencyS, TPOTS: s.TPOTS,
			ExecutionMode: in(s.ExecutionMode),
			PrefillWorker: in(s.PrefillWorker), DecodeWorker: in(s.DecodeWorker),
			Completed: s.Status == string(metrics.StatusCompleted),
		}
		if !q.Completed {
			q.Cause = in(s.Status + ": " + s.Error)
		}
		r.Requests = append(r.Requests, q)
		if col == nil {
			return nil
		}
		col.Add(&metrics.Record{
			SessionID: q.SessionID, Turn: q.Turn, InputLength: q.InputLength,
			OutputLength: q.OutputLength, CachedTokens: q.CachedTokens,
			UncachedTokens: q.UncachedTokens, TTFTS: q.TTFTS, LatencyS: q.LatencyS,
			TPOTS: q.TPOTS, ExecutionMode: q.ExecutionMode, PrefillWorker: q.PrefillWorker,
			DecodeWorker: q.DecodeWorker, Status: metrics.Status(s.Status), Error: s.Error,
		})
		return nil
	})
}

func readWorkers(path string, r *Run) error {
	idx := map[string]int{}
	err := eachLine(path, func(b []byte) error {
		var s metrics.WorkerSample
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		i, ok := idx[s.Worker]
		if !ok {
			i = len(r.Workers)
			idx[s.Worker] = i
			r.Workers = append(r.Workers, WorkerSeries{Worker: s.Worker, Role: s.Role})
		}
		occ := 0.0
		if s.KVCapacityTokens > 0 {
			occ = float64(s.KVUsedTokens) / float64(s.KVCapacityTokens)
		}
		w := &r.Workers[i]
		w.T = append(w.T, s.TimeS)
		w.Occ = append(w.Occ, occ)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for i := range r.Workers {
		w := &r.Workers[i]
		if !sort.Float64sAreSorted(w.T) {
			sort.Sort(byTime{w})
		}
	}
	sort.SliceStable(r.Workers, func(i, j int) bool {
		a, b := r.Workers[i], r.Workers[j]
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Worker < b.Worker
	})
	return err
}

type byTime struct{ w *WorkerSeries }

func (b byTime) Len() int           { return len(b.w.T) }
func (b byTime) Less(i, j int) bool { return b.w.T[i] < b.w.T[j] }
func (b byTime) Swap(i, j int) {
	b.w.T[i], b.w.T[j] = b.w.T[j], b.w.T[i]
	b.w.Occ[i], b.w.Occ[j] = b.w.Occ[j], b.w.Occ[i]
}

// eventFiles are the structural event logs a run folder may hold: the
// general one and one per control-plane event kind (sim.EventFiles).
var eventFiles = []string{"events.jsonl", "admission-events.jsonl", "session-d-binding.jsonl",
	"backpressure-events.jsonl", "evictions.jsonl", "d-to-p-sync.jsonl"}

func readEvents(path string, r *Run) error {
	err := eachLine(path, func(b []byte) error {
		var e struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
		r.Events[e.Kind]++
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// eachLine calls fn for every non-blank line of a JSONL file, naming the
// file and line in any error. A missing file returns an error wrapping
// os.ErrNotExist so optional files can be told apart.
func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	return scanLines(f, path, fn)
}

func scanLines(rd io.Reader, name string, fn func([]byte) error) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 || isBlank(b) {
			continue
		}
		if err := fn(b); err != nil {
			return fmt.Errorf("report: %s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %s:%d: %w", name, line+1, err)
	}
	return nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
