package main

import (
	"errors"
	"fmt"
	"github.com/pdhybrid/pdhybrid/internal/sim"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A run folder (sim --out) holds exactly these files; a bench folder holds
// run folders, comparison.json and report/index.html.
var (
	runFiles   = []string{"metrics.jsonl", "summary.json", "config.json"}
	runSubdir  = "structural"
	runSubFile = structuralFiles()
	benchFiles = []string{"comparison.json"}
	reportDir  = "report"
	reportFile = "index.html"
)

// outKind is what a command writes into --out.
type outKind int

const (
	outRun   outKind = iota // one run folder (sim)
	outBench                // run folders, comparison.json, report/ (bench)
)

// prepareOut makes dir ready for a new run before any work starts. A
// missing or empty folder is used as is. A folder holding pdhybrid output is
// refused unless force; with force, the files pdhybrid writes there are
// removed (every run folder of a bench folder, not just the ones the new run
// will write, so no stale run is mixed into a later report) and anything
// else is kept. A folder holding nothing pdhybrid wrote is refused even with
// force: it is not ours to clear.
func prepareOut(dir string, force bool, kind outKind) (kept []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
			return nil, usagef("--out %s: exists and is not a folder", dir)
		}
		return nil, err
	}
	if len(ents) == 0 {
		return nil, nil
	}
	var ours, others []string
	if kind == outRun {
		ours, others = classifyRun(dir)
	} else {
		ours, others = classifyBench(dir)
	}
	if len(ours) == 0 {
		return nil, usagef("--out %s: the folder is not empty and holds no pdhybrid %s (it has %s); give a new or empty folder",
			dir, kindName(kind), listSome(others))
	}
	if !force {
		return nil, usagef("--out %s: already holds a %s (%s); pass --force to replace it, or give another folder",
			dir, kindName(kind), listSome(ours))
	}
	// Files before the folders that hold them.
	sort.Slice(ours, func(i, j int) bool { return len(ours[i]) > len(ours[j]) })
	for _, p := range ours {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if isNotEmpty(err) {
				continue // a folder that also holds files of someone else's
			}
			return nil, fmt.Errorf("--force: %w", err)
		}
	}
	return others, nil
}

func kindName(k outKind) string {
	if k == outRun {
		return "run"
	}
	return "bench output"
}

// classifyRun splits dir's entries into run artefacts (files and the
// structural folder, as paths) and everything else.
func classifyRun(dir string) (ours, others []string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case !e.IsDir() && contains(runFiles, e.Name()):
			ours = append(ours, p)
		case e.IsDir() && e.Name() == runSubdir:
			sub, _ := os.ReadDir(p)
			for _, s := range sub {
				if !s.IsDir() && contains(runSubFile, s.Name()) {
					ours = append(ours, filepath.Join(p, s.Name()))
				} else {
					others = append(others, filepath.Join(p, s.Name()))
				}
			}
			ours = append(ours, p)
		default:
			others = append(others, p)
		}
	}
	return ours, others
}

// classifyBench does the same for a bench folder: its run folders (a
// sub-folder holding run artefacts), comparison.json and report/index.html.
func classifyBench(dir string) (ours, others []string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case !e.IsDir() && contains(benchFiles, e.Name()):
			ours = append(ours, p)
		case e.IsDir() && e.Name() == reportDir:
			if st, err := os.Stat(filepath.Join(p, reportFile)); err == nil && !st.IsDir() {
				ours = append(ours, filepath.Join(p, reportFile), p)
			} else {
				others = append(others, p)
			}
		case e.IsDir():
			o, x := classifyRun(p)
			if len(o) > 0 {
				ours = append(ours, o...)
				ours = append(ours, p)
			}
			others = append(others, x...)
			if len(o) == 0 && len(x) == 0 {
				others = append(others, p) // an empty folder: not ours
			}
		default:
			others = append(others, p)
		}
	}
	return ours, others
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func listSome(paths []string) string {
	var names []string
	for i, p := range paths {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(paths)-3))
			break
		}
		names = append(names, filepath.Base(p))
	}
	return strings.Join(names, ", ")
}

func isNotEmpty(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if st, serr := os.Stat(pe.Path); serr == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// structuralFiles are the files a run writes under structural/.
func structuralFiles() []string {
	out := []string{"workers.jsonl", "events.jsonl"}
	for _, name := range sim.EventFiles {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
