package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Files a sweep writes at the top of its folder, beside one run folder per
// cell.
const (
	ManifestFile = "sweep-grid.json"
	CSVFile      = "sweep.csv"
	JSONFile     = "sweep.json"
	HTMLFile     = "index.html"
	LogFile      = "sweep.log"
)

// Manifest is sweep-grid.json: what the folder's cells are. Two sweeps
// with the same base flags give a cell of one name the same run, so the
// folder can be resumed by any sweep of the same manifest.
type Manifest struct {
	Base  []string `json:"base"`  // sim flags every cell got
	Cells []string `json:"cells"` // folder names, sorted
	Grid  Grid     `json:"grid"`  // as given, for the reader
	// Traces are the trace files' contents by workload name (sha256), so a
	// trace regenerated under the same name is not taken for the old one.
	Traces map[string]string `json:"traces,omitempty"`
}

// HashTraces fills Traces from the grid's trace files.
func (m *Manifest) HashTraces() error {
	for _, w := range m.Grid.Workloads {
		if w.Trace == "" {
			continue
		}
		f, err := os.Open(w.Trace)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		if m.Traces == nil {
			m.Traces = map[string]string{}
		}
		m.Traces[w.Name] = "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	return nil
}

// NewManifest describes cells of grid g.
func NewManifest(g Grid, cells []Cell) Manifest {
	m := Manifest{Base: append([]string{}, g.Base...), Grid: g}
	for _, c := range cells {
		m.Cells = append(m.Cells, c.Name())
	}
	sort.Strings(m.Cells)
	return m
}

// ReadManifest reads dir's manifest; ok is false when there is none.
func ReadManifest(dir string) (m Manifest, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, fmt.Errorf("%s: %v", filepath.Join(dir, ManifestFile), err)
	}
	return m, true, nil
}

// Write writes the manifest into dir.
func (m Manifest) Write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644)
}

// Diff says how old differs from m; "" when they describe the same sweep.
// sameBase tells whether cells of one name are the same runs in both: the
// same base flags, and no trace of one name with other contents.
func (m Manifest) Diff(old Manifest) (diff string, sameBase bool) {
	sameBase = slices.Equal(m.Base, old.Base)
	var parts []string
	if !sameBase {
		parts = append(parts, fmt.Sprintf("its cells got the sim flags [%s], these get [%s]", strings.Join(old.Base, " "), strings.Join(m.Base, " ")))
	}
	for name, h := range m.Traces {
		if o, ok := old.Traces[name]; ok && o != h {
			parts = append(parts, fmt.Sprintf("the trace of workload %s is not the one its cells replayed (its content differs)", name))
			sameBase = false
		}
	}
	in := func(xs []string, x string) bool { _, ok := slices.BinarySearch(xs, x); return ok }
	var added, gone []string
	for _, c := range m.Cells {
		if !in(old.Cells, c) {
			added = append(added, c)
		}
	}
	for _, c := range old.Cells {
		if !in(m.Cells, c) {
			gone = append(gone, c)
		}
	}
	if len(added) > 0 {
		parts = append(parts, fmt.Sprintf("%d cells are new (%s)", len(added), some(added)))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("%d of its cells are not in this grid (%s)", len(gone), some(gone)))
	}
	return strings.Join(parts, "; "), sameBase
}

func some(xs []string) string {
	if len(xs) > 2 {
		return strings.Join(xs[:2], ", ") + fmt.Sprintf(" and %d more", len(xs)-2)
	}
	return strings.Join(xs, ", ")
}
