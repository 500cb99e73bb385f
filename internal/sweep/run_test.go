package sweep

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCellState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		summary string // "" writes none; "-" makes no folder
		other   bool   // a run file beside it
		want    State
	}{
		{"no folder", "-", false, Missing},
		{"empty folder", "", false, Missing},
		{"run files, no summary (killed mid-run)", "", true, Partial},
		{"truncated summary", `{"mechanism": "pd-colo", "compl`, true, Partial},
		{"interrupted", `{"mechanism": "pd-colo", "complete": false, "stop_reason": "interrupted by SIGINT"}`, true, Partial},
		{"canceled", `{"mechanism": "pd-colo", "complete": false, "stop_reason": "context canceled"}`, true, Partial},
		{"stopped at a limit", `{"mechanism": "pd-colo", "complete": false, "stop_reason": "overload: 1000 requests in flight"}`, true, Done},
		{"complete", `{"mechanism": "pd-colo", "complete": true}`, true, Done},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cell")
			if tc.summary != "-" {
				os.MkdirAll(dir, 0o755)
			}
			if tc.summary != "" && tc.summary != "-" {
				os.WriteFile(filepath.Join(dir, "summary.json"), []byte(tc.summary), 0o644)
			}
			if tc.other {
				os.WriteFile(filepath.Join(dir, "metrics.jsonl"), nil, 0o644)
			}
			if got, s := CellState(dir); got != tc.want || (got == Done) != (s != nil) {
				t.Fatalf("state %v (summary %v), want %v", got, s, tc.want)
			}
		})
	}
}

// TestRunEveryCellOnce: whatever the number of jobs, every cell runs
// exactly once, and at most jobs at a time.
func TestRunEveryCellOnce(t *testing.T) {
	for _, jobs := range []int{1, 3, 50} {
		var ran [20]atomic.Int32
		var now, peak atomic.Int32
		res := Run(context.Background(), len(ran), jobs, func(_ context.Context, i int) Result {
			if n := now.Add(1); n > peak.Load() {
				peak.Store(n)
			}
			ran[i].Add(1)
			time.Sleep(time.Millisecond)
			now.Add(-1)
			return Result{}
		}, nil)
		for i := range ran {
			if ran[i].Load() != 1 || res[i].Err != nil {
				t.Fatalf("jobs %d: cell %d ran %d times (%v)", jobs, i, ran[i].Load(), res[i].Err)
			}
		}
		if int(peak.Load()) > jobs {
			t.Errorf("jobs %d: %d cells ran at once", jobs, peak.Load())
		}
	}
}

// TestRunStopsStartingCells: once the context ends no cell starts; those
// never started report the context's cause.
func TestRunStopsStartingCells(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	res := Run(ctx, 10, 1, func(ctx context.Context, i int) Result {
		started.Add(1)
		if i == 2 {
			cancel()
		}
		return Result{}
	}, nil)
	if n := started.Load(); n != 3 {
		t.Fatalf("%d cells started, want 3 (the third cancels)", n)
	}
	for i := 3; i < 10; i++ {
		if res[i].Err == nil {
			t.Fatalf("cell %d never ran but reports success", i)
		}
	}
}

func TestBar(t *testing.T) {
	var b bytes.Buffer
	clock := time.Unix(0, 0)
	bar := &Bar{W: &b, Now: func() time.Time { return clock }, Total: 4, Kept: 2}
	bar.Start()
	for i := range 4 {
		bar.Began()
		clock = clock.Add(11 * time.Second)
		bar.Ended(i == 1)
	}
	bar.Finish()
	out := b.String()
	for _, want := range []string{"2 cells already finished", "1/4 cells", "4/4 cells, 1 failed", "about 33s left"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%s", want, out)
		}
	}
}

func TestManifestDiff(t *testing.T) {
	g := Grid{Mechanisms: []string{"a"}, Base: []string{"--time-scale=2"}}
	a := NewManifest(g, []Cell{{Mechanism: "a"}, {Mechanism: "b"}})
	b := NewManifest(g, []Cell{{Mechanism: "b"}, {Mechanism: "a"}})
	if d, same := a.Diff(b); d != "" || !same {
		t.Fatalf("same cells in another order differ: %q", d)
	}
	c := NewManifest(g, []Cell{{Mechanism: "a"}, {Mechanism: "c"}})
	if d, same := c.Diff(a); !same || !strings.Contains(d, "1 cells are new") || !strings.Contains(d, "1 of its cells are not in this grid") {
		t.Fatalf("diff %q", d)
	}
	g.Base = nil
	e := NewManifest(g, []Cell{{Mechanism: "a"}, {Mechanism: "b"}})
	if d, same := e.Diff(a); same || !strings.Contains(d, "sim flags") {
		t.Fatalf("other base flags: %q same=%v", d, same)
	}
	dir := t.TempDir()
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, ok, err := ReadManifest(dir)
	if d, _ := a.Diff(back); err != nil || !ok || d != "" {
		t.Fatalf("read back: %v %v %q", ok, err, d)
	}
}
