package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// State is what a cell's folder holds.
type State int

const (
	Missing State = iota // no folder, or nothing in it
	Partial              // run files without a finished summary.json: run it again
	Done                 // a finished run: kept as it is
)

// CellState reads dir's summary.json. A run is finished when its summary
// parses and it either replayed its whole workload or stopped at a limit
// of its own (an overloaded cluster stops the same way every time); an
// interrupted run, a truncated or missing summary is Partial.
func CellState(dir string) (State, *metrics.Summary) {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		if ents, derr := os.ReadDir(dir); errors.Is(derr, fs.ErrNotExist) || (derr == nil && len(ents) == 0) {
			return Missing, nil
		}
		return Partial, nil
	}
	var s metrics.Summary
	if json.Unmarshal(b, &s) != nil || s.Mechanism == "" {
		return Partial, nil
	}
	if !s.Complete && Interrupted(s.StopReason) {
		return Partial, nil
	}
	return Done, &s
}

// Interrupted tells a stop reason of an ended context (a signal, a
// cancel) from a limit the run reached itself.
func Interrupted(reason string) bool {
	return strings.HasPrefix(reason, "interrupted") || strings.HasPrefix(reason, "context ")
}

// Result is how one cell's run ended.
type Result struct {
	Err     error // nil: the cell's folder holds a finished run
	Skipped bool  // finished before this sweep started; not run again
}

// Run calls run for cells 0..n-1 on jobs goroutines, lowest index first,
// and done (one call at a time) as each ends. Once ctx ends no further cell
// starts; the cells running see ctx end and return. It returns each cell's
// result; a cell never started has Err ctx's error.
func Run(ctx context.Context, n, jobs int, run func(ctx context.Context, i int) Result, done func(i int, r Result)) []Result {
	res := make([]Result, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	jobs = max(1, min(jobs, n))
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil { // ended while i was handed over
					mu.Lock()
					res[i] = Result{Err: context.Cause(ctx)}
					mu.Unlock()
					continue
				}
				r := run(ctx, i)
				mu.Lock()
				res[i] = r
				if done != nil {
					done(i, r)
				}
				mu.Unlock()
			}
		}()
	}
	i := 0
feed:
	for ; i < n && ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
	for ; i < n; i++ {
		res[i] = Result{Err: context.Cause(ctx)}
	}
	return res
}
