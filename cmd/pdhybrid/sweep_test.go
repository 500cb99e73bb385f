package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/sweep"
)

// tinySweep is a 5-cell grid on a 3-session workload: KVC at two τ_append,
// naive PD and DP once each (the knob does not apply to them).
func tinySweep(out string, extra ...string) []string {
	args := []string{"sweep", "--mechanism", "kvcache-centric,pd-disaggregation,pd-colo",
		"--set", "direct-max-uncached-tokens=2048,8192", "--out", out}
	args = append(args, extra...)
	return append(args, "--", "--synth-sessions", "3")
}

var tinyCells = []string{
	"kvcache-centric_1P3D_agentic_direct-max-uncached-tokens=2048",
	"kvcache-centric_1P3D_agentic_direct-max-uncached-tokens=8192",
	"pd-disaggregation_1P3D_agentic",
	"pd-colo_4C_agentic",
}

func TestSweepBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the first line of stderr
	}{
		{"out of range", []string{"--mechanism", "kvcache-centric", "--set", "direct-max-uncached-tokens=2048,0"},
			[]string{"cell kvcache-centric_1P3D_agentic_direct-max-uncached-tokens=0", "--direct-max-uncached-tokens 0", "want a number of tokens in [1, "}},
		{"not a number", []string{"--mechanism", "kvcache-centric", "--set", "migration-reject-threshold=x"},
			[]string{"cell kvcache-centric_1P3D_agentic_migration-reject-threshold=x", "migration-reject-threshold"}},
		{"not a choice", []string{"--mechanism", "kvcache-centric", "--set", "trim=idle,some"},
			[]string{"trim=some", `--trim "some"`, "idle, any"}},
		{"no such knob", []string{"--set", "direct-max-uncached-token=1"}, []string{"no flag --direct-max-uncached-token", "did you mean direct-max-uncached-tokens"}},
		{"the sweep's own", []string{"--set", "mechanism=pd-colo"}, []string{"--set mechanism", "use sweep's --mechanism"}},
		{"applies to no cell", []string{"--mechanism", "pd-colo", "--set", "direct-max-uncached-tokens=2048"},
			[]string{"--set direct-max-uncached-tokens: applies to none", "kvcache-centric"}},
		{"unknown mechanism", []string{"--mechanism", "pd-colo,warp-drive"}, []string{"cell warp-drive_1P3D_agentic", "unknown mechanism"}},
		{"bad topology", []string{"--topology", "4"}, []string{`topology "4"`, "1P3D"}},
		{"no values", []string{"--set", "trim="}, []string{"--set trim=", "name=v1,v2"}},
		{"a flag for every cell the sweep owns", []string{"--", "--prefill", "2"}, []string{"--prefill is the sweep's", "--topology"}},
		{"a bad flag for every cell", []string{"--", "--time-scale", "0"}, []string{"--time-scale 0"}},
		{"stdin trace", []string{"--trace", "-"}, []string{"--trace -"}},
		{"missing trace", []string{"--trace", "/nonexistent/t.jsonl"}, []string{"--trace /nonexistent/t.jsonl: not a readable"}},
		{"a flag after -- that applies to no cell", []string{"--workload", "seed-swe", "--", "--synth-sessions", "3"},
			[]string{"--synth-sessions applies to none", "--workload agentic"}},
		{"a flag both a knob and after --", []string{"--set", "time-scale=1,2", "--", "--time-scale", "3"}, []string{"--time-scale: given both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sw")
			args := append([]string{"sweep", "--out", out}, tc.args...)
			_, stderr, err := runCLI(args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if exitCode(err) != exitUsage {
				t.Fatalf("exit %d, want 2\n%s", exitCode(err), stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(first, w) {
					t.Errorf("first line %q lacks %q", first, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused sweep made its folder")
			}
		})
	}
	if _, stderr, err := runCLI("sweep"); exitCode(err) != exitUsage || !strings.Contains(stderr, "--out") {
		t.Errorf("no --out: %v %s", err, stderr)
	}
}

// readRows reads sweep.json's rows.
func readRows(t *testing.T, dir string) []sweep.Row {
	t.Helper()
	var tb sweep.Table
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, sweep.JSONFile)), &tb); err != nil {
		t.Fatal(err)
	}
	return tb.Rows
}

// sweepFiles lists every file under dir with its bytes; summary.json without
// its run date (the wall clock).
func sweepFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	date := regexp.MustCompile(`"date": "[^"]*",?\n`)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || filepath.Base(p) == sweep.LogFile {
			return err
		}
		b, _ := os.ReadFile(p)
		if filepath.Base(p) == "summary.json" {
			b = date.ReplaceAll(b, nil)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return nil
	})
	return out
}

// TestSweepSameWhateverJobs: one job or four, the sweep writes the same
// cells, the same run folders byte for byte (run dates aside) and the same
// tables; and the tables say what each cell's summary.json says.
func TestSweepSameWhateverJobs(t *testing.T) {
	var files []map[string]string
	var dirs []string
	for _, jobs := range []string{"1", "4"} {
		dir := filepath.Join(t.TempDir(), "sw")
		stdout, stderr, err := runCLI(tinySweep(dir, "--jobs", jobs)...)
		if err != nil {
			t.Fatalf("jobs %s: %v\n%s", jobs, err, stderr)
		}
		if !strings.Contains(stderr, "--direct-max-uncached-tokens is left out of the cells of pd-colo, pd-disaggregation") {
			t.Errorf("stderr does not say the knob did not multiply the baselines:\n%s", stderr)
		}
		if !strings.Contains(stdout, tinyCells[0]) {
			t.Errorf("stdout lacks the cells:\n%s", stdout)
		}
		files = append(files, sweepFiles(t, dir))
		dirs = append(dirs, dir)
	}
	for _, c := range tinyCells {
		if _, ok := files[0][filepath.Join(c, "metrics.jsonl")]; !ok {
			t.Fatalf("no run folder %s", c)
		}
	}
	var names []string
	for n := range files[0] {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(files[0]) != len(files[1]) {
		t.Errorf("%d files with --jobs 1, %d with --jobs 4", len(files[0]), len(files[1]))
	}
	for _, n := range names {
		if files[0][n] != files[1][n] {
			t.Errorf("%s differs between --jobs 1 and --jobs 4", n)
		}
	}

	// The tables against each cell's summary.json.
	dir := dirs[0]
	rows := readRows(t, dir)
	recs, err := csv.NewReader(bytes.NewReader(mustRead(t, filepath.Join(dir, sweep.CSVFile)))).ReadAll()
	if err != nil || len(recs) != len(tinyCells)+1 || len(rows) != len(tinyCells) {
		t.Fatalf("%d CSV records, %d JSON rows for %d cells: %v", len(recs), len(rows), len(tinyCells), err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for i, r := range rows {
		var s map[string]any
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, r.Cell, "summary.json")), &s); err != nil {
			t.Fatal(err)
		}
		if r.Cell != tinyCells[i] || recs[i+1][col["cell"]] != r.Cell {
			t.Errorf("row %d is %s (CSV %s), want %s", i, r.Cell, recs[i+1][col["cell"]], tinyCells[i])
		}
		for csvName, sumName := range map[string]string{"ttft_mean_ms": "mean_ttft_ms", "ttft_p50_ms": "p50_ttft_ms", "ttft_p90_ms": "p90_ttft_ms",
			"ttft_p99_ms": "p99_ttft_ms", "e2e_mean_ms": "mean_e2el_ms", "e2e_p50_ms": "p50_e2el_ms", "e2e_p99_ms": "p99_e2el_ms",
			"tpot_p99_ms": "p99_tpot_ms", "failures": "errors", "requests": "requests", "direct_share": "direct_to_d_share"} {
			want := s[sumName].(float64)
			got, err := strconv.ParseFloat(recs[i+1][col[csvName]], 64)
			if err != nil || got != want {
				t.Errorf("%s: CSV %s = %q, summary.json %s = %v", r.Cell, csvName, recs[i+1][col[csvName]], sumName, want)
			}
		}
		if r.TTFTP99Ms != s["p99_ttft_ms"].(float64) || r.Mechanism != s["mechanism"] || r.Policy != s["policy"] {
			t.Errorf("%s: sweep.json row %+v disagrees with summary.json", r.Cell, r)
		}
	}
	if rows[0].DirectShare >= rows[1].DirectShare {
		t.Errorf("τ_append 2048 appends directly as often as 8192 (%v ≥ %v): the knob did not reach the run", rows[0].DirectShare, rows[1].DirectShare)
	}
}

// TestSweepResumes: a second run keeps finished cells untouched and runs
// again the ones a kill or an interrupt left unfinished; a different grid
// is refused unless --force.
func TestSweepResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	if _, stderr, err := runCLI(tinySweep(dir)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// Cell 0 finished: mark its summary, which a re-run would overwrite.
	keep := filepath.Join(dir, tinyCells[0], "summary.json")
	marked := strings.Replace(string(mustRead(t, keep)), "{", `{"untouched": true,`, 1)
	os.WriteFile(keep, []byte(marked), 0o644)
	// Cell 1 killed before its summary; cell 2 interrupted.
	os.Remove(filepath.Join(dir, tinyCells[1], "summary.json"))
	os.WriteFile(filepath.Join(dir, tinyCells[2], "summary.json"), []byte(`{"mechanism": "pd-disaggregation", "complete": false, "stop_reason": "interrupted by SIGINT"}`), 0o644)
	kept3 := mustRead(t, filepath.Join(dir, tinyCells[3], "summary.json"))
	// The workload's floor: marked too, so that the resume shows it kept it.
	js := filepath.Join(dir, sweep.JSONFile)
	var tab sweep.Table
	if err := json.Unmarshal(mustRead(t, js), &tab); err != nil || len(tab.Floors) != 1 {
		t.Fatalf("sweep.json floors: %v %+v", err, tab.Floors)
	}
	tab.Floors[0].TTFTP50 = 12345
	b, _ := json.Marshal(tab)
	os.WriteFile(js, b, 0o644)

	_, stderr, err := runCLI(tinySweep(dir)...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	tab = sweep.Table{}
	if err := json.Unmarshal(mustRead(t, js), &tab); err != nil || len(tab.Floors) != 1 || tab.Floors[0].TTFTP50 != 12345 ||
		!strings.Contains(stderr, "kept the latency floors of 1 workload(s)") {
		t.Errorf("the resume computed the workload's floor again (floors %+v):\n%s", tab.Floors, stderr)
	}
	if !strings.Contains(stderr, "2 cells already finished in this folder are kept; 2 to run") {
		t.Errorf("resume does not say what it kept:\n%s", stderr)
	}
	if string(mustRead(t, keep)) != marked || !bytes.Equal(mustRead(t, filepath.Join(dir, tinyCells[3], "summary.json")), kept3) {
		t.Error("a finished cell was run again")
	}
	for _, c := range tinyCells[1:3] {
		if st, _ := sweep.CellState(filepath.Join(dir, c)); st != sweep.Done {
			t.Errorf("%s not finished after the resume (state %v)", c, st)
		}
	}
	if rows := readRows(t, dir); len(rows) != len(tinyCells) {
		t.Errorf("%d rows after the resume, want %d", len(rows), len(tinyCells))
	}

	// Another grid in the same folder.
	other := []string{"sweep", "--mechanism", "kvcache-centric", "--set", "direct-max-uncached-tokens=2048", "--out", dir, "--", "--synth-sessions", "3"}
	_, stderr, err = runCLI(other...)
	if exitCode(err) != exitUsage || !strings.Contains(stderr, "holds a different sweep") || !strings.Contains(stderr, "--force") {
		t.Fatalf("another grid: exit %d\n%s", exitCode(err), stderr)
	}
	if string(mustRead(t, keep)) != marked {
		t.Fatal("a refused sweep touched the folder")
	}
	// --force keeps the cell both grids share and removes the others.
	if _, stderr, err = runCLI(append(other[:len(other)-3], "--force", "--", "--synth-sessions", "3")...); err != nil {
		t.Fatalf("--force: %v\n%s", err, stderr)
	}
	if string(mustRead(t, keep)) != marked {
		t.Error("--force ran a shared cell again")
	}
	for _, c := range tinyCells[1:] {
		if _, err := os.Stat(filepath.Join(dir, c)); err == nil {
			t.Errorf("--force left %s, not in the new grid", c)
		}
	}
	// Other base flags make every cell another run.
	_, stderr, err = runCLI("sweep", "--mechanism", "kvcache-centric", "--set", "direct-max-uncached-tokens=2048", "--out", dir, "--", "--synth-sessions", "2")
	if exitCode(err) != exitUsage || !strings.Contains(stderr, "--synth-sessions") {
		t.Errorf("other base flags: exit %d\n%s", exitCode(err), stderr)
	}

	// A folder that holds something else, and a file.
	junk := t.TempDir()
	os.WriteFile(filepath.Join(junk, "notes.txt"), nil, 0o644)
	if _, stderr, err := runCLI(tinySweep(junk)...); exitCode(err) != exitUsage || !strings.Contains(stderr, "holds no sweep") {
		t.Errorf("a foreign folder: exit %d\n%s", exitCode(err), stderr)
	}
	if _, stderr, err := runCLI(tinySweep(filepath.Join(junk, "notes.txt"))...); exitCode(err) != exitUsage || !strings.Contains(stderr, "not a folder") {
		t.Errorf("a file as --out: exit %d\n%s", exitCode(err), stderr)
	}
}

// TestSweepInterrupt: an interrupt stops the sweep with status 130, keeps
// the finished cells, leaves no half-run folder and writes the tables for
// what finished; the same command then does the rest.
func TestSweepInterrupt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	// Four cells of the default 40-session workload, one at a time.
	args := []string{"sweep", "--mechanism", "kvcache-centric", "--set", "direct-max-uncached-tokens=1024,2048,4096,8192", "--jobs", "1", "--out", dir}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	first := filepath.Join(dir, "kvcache-centric_1P3D_agentic_direct-max-uncached-tokens=1024", "summary.json")
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(first); err == nil {
				cancel(interrupted{os.Interrupt})
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: time.Now}
	_, err := execute(ctx, e, args)
	if exitCode(err) != exitInterrupted {
		t.Fatalf("exit %d (%v), want 130\n%s", exitCode(err), err, stderr.String())
	}
	rows := readRows(t, dir)
	if len(rows) == 0 || len(rows) == 4 {
		t.Fatalf("%d cells finished before the interrupt; want some but not all\n%s", len(rows), stderr.String())
	}
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if en.IsDir() {
			if st, _ := sweep.CellState(filepath.Join(dir, en.Name())); st != sweep.Done {
				t.Errorf("%s left unfinished (state %v)", en.Name(), st)
			}
		}
	}
	if !strings.Contains(stderr.String(), "run the same command again") {
		t.Errorf("stderr does not say how to finish:\n%s", stderr.String())
	}
	_, se, err := runCLI(args...)
	if err != nil || len(readRows(t, dir)) != 4 {
		t.Fatalf("resume after the interrupt: %v\n%s", err, se)
	}
}

// TestSweepGridFile: a YAML grid file gives the same cells as the flags.
func TestSweepGridFile(t *testing.T) {
	dir := t.TempDir()
	gf := filepath.Join(dir, "grid.yaml")
	os.WriteFile(gf, []byte("mechanisms: [kvcache-centric, pd-disaggregation, pd-colo]\nset:\n  direct-max-uncached-tokens: [2048, 8192]\nbase:\n  synth-sessions: 3\n"), 0o644)
	out := filepath.Join(dir, "sw")
	if _, stderr, err := runCLI("sweep", "--grid", gf, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got []string
	for _, r := range readRows(t, out) {
		got = append(got, r.Cell)
	}
	if strings.Join(got, " ") != strings.Join(tinyCells, " ") {
		t.Errorf("cells %v, want %v", got, tinyCells)
	}
	if _, stderr, err := runCLI("sweep", "--grid", gf, "--set", "trim=any", "--out", out); exitCode(err) != exitUsage || !strings.Contains(stderr, "--set") {
		t.Errorf("--grid with --set: exit %d\n%s", exitCode(err), stderr)
	}
}

// TestSweepMixedWorkloadsAndFailedCell: a flag after -- goes to the cells
// it applies to (--synth-sessions to the built-in workload, not the
// trace); a cell whose run fails is reported, exit 1, and the others are
// tabulated.
func TestSweepMixedWorkloadsAndFailedCell(t *testing.T) {
	tr := smallTrace(t)
	bad := filepath.Join(t.TempDir(), "broken.jsonl")
	os.WriteFile(bad, append(mustRead(t, tr), []byte("{not json\n")...), 0o644)
	dir := filepath.Join(t.TempDir(), "sw")
	_, stderr, err := runCLI("sweep", "--mechanism", "pd-colo", "--workload", "agentic", "--trace", bad, "--out", dir, "--", "--synth-sessions", "3")
	if exitCode(err) != exitError || !strings.Contains(stderr, "cell pd-colo_4C_broken failed") || !strings.Contains(stderr, "1 of 2 cells failed") {
		t.Fatalf("exit %d\n%s", exitCode(err), stderr)
	}
	if !strings.Contains(stderr, "--synth-sessions (after --) is left out of the cells of broken") {
		t.Errorf("stderr does not say where --synth-sessions was left out:\n%s", stderr)
	}
	rows := readRows(t, dir)
	if len(rows) != 1 || rows[0].Cell != "pd-colo_4C_agentic" || rows[0].Requests == 0 {
		t.Fatalf("rows %+v", rows)
	}
	var tb sweep.Table
	json.Unmarshal(mustRead(t, filepath.Join(dir, sweep.JSONFile)), &tb)
	if tb.Failed["pd-colo_4C_broken"] == "" {
		t.Errorf("sweep.json does not list the failed cell: %v", tb.Failed)
	}
	// The good workload has its latency floor, below its cell at every
	// percentile; the broken one has none, and stderr says why.
	if len(tb.Floors) != 1 || tb.Floors[0].Workload != "agentic" || tb.Floors[0].TTFTP50 <= 0 ||
		tb.Floors[0].TTFTP50 > rows[0].TTFTP50Ms || tb.Floors[0].E2EP99 > rows[0].E2EP99Ms {
		t.Errorf("floors %+v against the cell %+v", tb.Floors, rows[0])
	}
	if !strings.Contains(stderr, "sweep: no latency floor for broken") {
		t.Errorf("stderr does not say the broken workload has no floor:\n%s", stderr)
	}
	if page := string(mustRead(t, filepath.Join(dir, sweep.HTMLFile))); !strings.Contains(page, "Latency floor of each workload") {
		t.Error("the page has no floor table")
	}
	var cfg struct {
		Mechanism string `json:"mechanism"`
	}
	if json.Unmarshal(mustRead(t, filepath.Join(dir, "pd-colo_4C_agentic", "config.json")), &cfg); cfg.Mechanism != "pd-colo" {
		t.Errorf("config.json mechanism %q", cfg.Mechanism)
	}
}

// TestSweepScopedKnob: mechanism:knob sweeps a knob in that mechanism's
// cells only (DP's routing policy, say), through a grid file too.
func TestSweepScopedKnob(t *testing.T) {
	dir := t.TempDir()
	gf := filepath.Join(dir, "grid.yaml")
	os.WriteFile(gf, []byte("mechanisms: [pd-disaggregation, pd-colo]\nset:\n  pd-colo:policy: [sticky, kv-aware]\nbase: {synth-sessions: 2}\n"), 0o644)
	for i, args := range [][]string{
		{"sweep", "--mechanism", "pd-disaggregation,pd-colo", "--set", "pd-colo:policy=sticky,kv-aware", "--", "--synth-sessions", "2"},
		{"sweep", "--grid", gf},
	} {
		out := filepath.Join(dir, strconv.Itoa(i))
		args = append([]string{"sweep", "--out", out}, args[1:]...)
		if _, stderr, err := runCLI(args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var got []string
		for _, r := range readRows(t, out) {
			got = append(got, r.Cell+"/"+r.Policy)
		}
		want := "pd-disaggregation_1P3D_agentic/default pd-colo_4C_agentic_policy=sticky/sticky pd-colo_4C_agentic_policy=kv-aware/kv-aware"
		if strings.Join(got, " ") != want {
			t.Errorf("%v: cells %v, want %s", args, got, want)
		}
	}
}

// TestSweepSIGINT: pdhybrid sweep as a process stops cleanly at SIGINT
// (it is marked graceful): exit 130, no half-run cell folder left.
func TestSweepSIGINT(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	c := pdhybrid(t, "sweep", "--mechanism", "kvcache-centric", "--set", "direct-max-uncached-tokens=1024,2048,4096,8192,16384",
		"--jobs", "1", "--out", dir, "--", "--synth-sessions", "200")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "the sweep never started a cell", func() bool {
		ents, _ := os.ReadDir(dir)
		return len(ents) > 2 // sweep-grid.json, sweep.log and a cell
	})
	interruptAndWait(t, c, &stderr)
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if st, _ := sweep.CellState(filepath.Join(dir, en.Name())); en.IsDir() && st != sweep.Done {
			t.Errorf("%s left unfinished after SIGINT (state %v)", en.Name(), st)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, sweep.CSVFile)); err != nil {
		t.Errorf("no %s after SIGINT: %v", sweep.CSVFile, err)
	}
}

// TestSweepTraceChanged: a trace rewritten under the same name is another
// sweep, not a resume.
func TestSweepTraceChanged(t *testing.T) {
	tr := smallTrace(t)
	dir := filepath.Join(t.TempDir(), "sw")
	args := []string{"sweep", "--mechanism", "pd-colo", "--trace", tr, "--out", dir}
	if _, stderr, err := runCLI(args...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, stderr, err := runCLI(args...); err != nil || !strings.Contains(stderr, "1 cells already finished") {
		t.Fatalf("the same trace again: %v\n%s", err, stderr)
	}
	if _, se, err := runCLI("trace", "synth", "small-append", "--sessions", "3", "--turns", "2", "--out", tr); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	_, stderr, err := runCLI(args...)
	if exitCode(err) != exitUsage || !strings.Contains(stderr, "the trace of workload t is not the one") {
		t.Fatalf("a changed trace: exit %d\n%s", exitCode(err), stderr)
	}
}

// A sweep over models has a latency floor for each model, not the first
// cell's for all: Qwen2.5-32B and Mistral-7B on one H100 each get their
// own, named by profile, and Mistral's (a model a fifth the size) is the
// lower.
func TestSweepFloorPerModel(t *testing.T) {
	hf := filepath.Join("..", "..", "internal", "model", "testdata", "hf")
	qwen, mistral := filepath.Join(hf, "qwen2.5-32b-instruct.json"), filepath.Join(hf, "mistral-7b-v0.1.json")
	so, se, err := runCLI("sweep", "--jobs", "1", "--mechanism", "pd-colo", "--set", "model-config="+qwen+","+mistral,
		"--out", filepath.Join(t.TempDir(), "s"), "--", "--hardware", "h100-sxm", "--synth-sessions", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	p50 := map[string]float64{}
	for _, l := range strings.Split(so, "\n") {
		rest, ok := strings.CutPrefix(l, "floor of agentic (")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ")")
		var v float64
		if _, err := fmt.Sscanf(l[strings.Index(l, "TTFT p50 ")+len("TTFT p50 "):], "%g", &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		p50[name] = v
	}
	q, m := p50["qwen2.5-32b-instruct/h100-sxm-tp1"], p50["mistral-7b-v0.1/h100-sxm-tp1"]
	if len(p50) != 2 || !(m > 0 && m < q) {
		t.Errorf("floors %v; want one per model, Mistral's TTFT p50 below Qwen2.5-32B's\n%s", p50, so)
	}
}
