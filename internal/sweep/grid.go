// Package sweep runs a grid of simulations: mechanisms × knob values ×
// workloads × topologies, one run folder per cell, in parallel, resumable,
// and tabulates and plots the cells side by side. It knows nothing of flags
// or of how a cell is simulated: the command resolves each cell through
// `pdhybrid sim`'s own parsing and checks and hands the runner in, so the
// sweep accepts every mechanism and knob sim does, and no list here goes
// stale as sim grows.
package sweep

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Knob is one swept sim flag and the values it takes, in the cells of
// every mechanism or, scoped, only of the mechanisms named.
type Knob struct {
	Name       string   `json:"name"` // sim's flag name, without dashes
	Values     []string `json:"values"`
	Mechanisms []string `json:"mechanisms,omitempty"` // the scope; empty: all
}

// ParseKnobName reads a knob's name as --set and grid files write it:
// "policy" (every mechanism) or "pd-colo:policy", "pd-colo+pd-disaggregation:policy"
// (only those mechanisms' cells).
func ParseKnobName(s string) Knob {
	scope, name, ok := strings.Cut(s, ":")
	if !ok {
		return Knob{Name: strings.TrimLeft(strings.TrimSpace(s), "-")}
	}
	k := Knob{Name: strings.TrimLeft(strings.TrimSpace(name), "-")}
	for _, m := range strings.Split(scope, "+") {
		if m = strings.TrimSpace(m); m != "" {
			k.Mechanisms = append(k.Mechanisms, m)
		}
	}
	return k
}

// Label is the knob as the user wrote it: [mechanisms:]name.
func (k Knob) Label() string {
	if len(k.Mechanisms) == 0 {
		return k.Name
	}
	return strings.Join(k.Mechanisms, "+") + ":" + k.Name
}

// For says whether the knob is swept in mechanism m's cells.
func (k Knob) For(m string) bool { return len(k.Mechanisms) == 0 || slices.Contains(k.Mechanisms, m) }

// Topology is a cluster shape: Prefill × Decode workers for the
// mechanisms that split them; a colocated mechanism gets Colo = Prefill +
// Decode workers instead, the same GPU count.
type Topology struct {
	Prefill int `json:"prefill,omitempty"`
	Decode  int `json:"decode,omitempty"`
	Colo    int `json:"colo,omitempty"`
}

// GPUs is the topology's worker count.
func (t Topology) GPUs() int { return t.Prefill + t.Decode + t.Colo }

// String is "1P3D", or "4C" for 4 colocated workers.
func (t Topology) String() string {
	if t.Colo > 0 {
		return fmt.Sprintf("%dC", t.Colo)
	}
	return fmt.Sprintf("%dP%dD", t.Prefill, t.Decode)
}

// Colocated is the same GPU count as colocated workers.
func (t Topology) Colocated() Topology { return Topology{Colo: t.GPUs()} }

var reTopology = regexp.MustCompile(`^(?i)(\d+)P(\d+)D$`)

// ParseTopology reads "1P3D" (1 prefill, 3 decode workers).
func ParseTopology(s string) (Topology, error) {
	m := reTopology.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Topology{}, fmt.Errorf("topology %q: want <prefill>P<decode>D, such as 1P3D (1 prefill and 3 decode workers; a colocated mechanism gets the 4 GPUs as 4 colocated workers)", s)
	}
	p, _ := strconv.Atoi(m[1])
	d, _ := strconv.Atoi(m[2])
	if p < 1 || d < 1 || p > 1024 || d > 1024 {
		return Topology{}, fmt.Errorf("topology %q: want 1 to 1024 prefill and 1 to 1024 decode workers", s)
	}
	return Topology{Prefill: p, Decode: d}, nil
}

// Workload is a built-in workload (Trace empty) or a trace file.
type Workload struct {
	Name  string `json:"name"`            // the built-in's name, or the trace file's base name
	Trace string `json:"trace,omitempty"` // path of the trace file
}

// TraceWorkload names a trace file by its base name without extension.
func TraceWorkload(path string) Workload {
	base := filepath.Base(path)
	for _, ext := range []string{".jsonl", ".json", ".gz"} {
		base = strings.TrimSuffix(base, ext)
	}
	return Workload{Name: base, Trace: path}
}

// Grid is what a sweep covers. Base are sim flags every cell gets where
// they apply, as --name=value.
type Grid struct {
	Mechanisms []string   `json:"mechanisms"`
	Knobs      []Knob     `json:"knobs,omitempty"`
	Workloads  []Workload `json:"workloads"`
	Topologies []Topology `json:"topologies"`
	Base       []string   `json:"base,omitempty"`
}

// Check reports an empty axis, a repeated value or a knob twice, and two
// workloads of one name (their cells would share folders).
func (g *Grid) Check() error {
	if len(g.Mechanisms) == 0 || len(g.Workloads) == 0 || len(g.Topologies) == 0 {
		return fmt.Errorf("grid: want at least one mechanism, workload and topology")
	}
	if d := dup(g.Mechanisms); d != "" {
		return fmt.Errorf("mechanism %s given twice", d)
	}
	var wn, tn []string
	for _, w := range g.Workloads {
		wn = append(wn, w.Name)
	}
	if d := dup(wn); d != "" {
		return fmt.Errorf("two workloads named %s (trace files are named by their base name): rename one", d)
	}
	for _, t := range g.Topologies {
		tn = append(tn, t.String())
	}
	if d := dup(tn); d != "" {
		return fmt.Errorf("topology %s given twice", d)
	}
	for i, k := range g.Knobs {
		if len(k.Values) == 0 {
			return fmt.Errorf("knob %s: no values", k.Label())
		}
		if d := dup(k.Values); d != "" {
			return fmt.Errorf("knob %s: value %s given twice", k.Label(), d)
		}
		for _, m := range k.Mechanisms {
			if !slices.Contains(g.Mechanisms, m) {
				return fmt.Errorf("knob %s: %s is not one of the grid's mechanisms (%s)", k.Label(), m, strings.Join(g.Mechanisms, ", "))
			}
		}
		for _, o := range g.Knobs[:i] {
			if o.Name != k.Name {
				continue
			}
			for _, m := range g.Mechanisms {
				if k.For(m) && o.For(m) {
					return fmt.Errorf("knob %s given twice for %s: give its values once, comma-separated", k.Name, m)
				}
			}
		}
	}
	return nil
}

func dup(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// Setting is one knob's value in a cell.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cell is one simulation of the grid.
type Cell struct {
	Mechanism string
	Topology  Topology
	Workload  Workload
	Knobs     []Setting // the knobs that apply to this cell, in the grid's (name) order
	// SkipBase names the grid's base flags that do not apply to this cell
	// (--synth-sessions to a trace): left out of its run, not of its name.
	SkipBase []string
}

// Value is the cell's value of knob name, and whether the knob applies.
func (c Cell) Value(name string) (string, bool) {
	for _, s := range c.Knobs {
		if s.Name == name {
			return s.Value, true
		}
	}
	return "", false
}

// Without is the cell with the named knobs dropped.
func (c Cell) Without(names map[string]bool) Cell {
	out := c
	out.Knobs = nil
	for _, s := range c.Knobs {
		if !names[s.Name] {
			out.Knobs = append(out.Knobs, s)
		}
	}
	return out
}

// maxName keeps folder names well under file systems' 255-byte limit.
const maxName = 200

// Name is the cell's folder name, from its values alone:
// mechanism_topology_workload_knob=value_…. Characters a file name should
// not hold become '~', and a name that had any (or was cut short) ends in a
// hash of the full text, so two cells never share a folder.
func (c Cell) Name() string {
	parts := []string{c.Mechanism, c.Topology.String(), c.Workload.Name}
	for _, s := range c.Knobs {
		parts = append(parts, s.Name+"="+s.Value)
	}
	raw := strings.Join(parts, "_")
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._-=+,", r):
			return r
		}
		return '~'
	}, raw)
	if clean == raw && len(raw) <= maxName && raw[0] != '.' {
		return raw
	}
	h := fnv.New64a()
	h.Write([]byte(raw))
	if len(clean) > maxName {
		clean = clean[:maxName]
	}
	return fmt.Sprintf("%s~%012x", strings.TrimLeft(clean, "."), h.Sum64()&(1<<48-1))
}

// Fit trims a raw cell to what applies to it (knobs its mechanism ignores
// dropped, a colocated topology for a colocated mechanism) or says why the
// cell is invalid.
type Fit func(Cell) (Cell, error)

// Expand lists the grid's cells: mechanisms, then topologies, workloads and
// knob values (the first knob slowest), each raw cell trimmed by fit. Cells
// that come out the same (a knob that does not apply, two topologies of one
// GPU count for a colocated mechanism) are run once, where they first
// appear. Knobs are taken in name order, so the cells and their names do
// not depend on the order the knobs were given in; a scoped knob is swept
// only in its mechanisms' cells.
func Expand(g Grid, fit Fit) ([]Cell, error) {
	if err := g.Check(); err != nil {
		return nil, err
	}
	all := append([]Knob(nil), g.Knobs...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	var out []Cell
	seen := map[string]bool{}
	for _, m := range g.Mechanisms {
		var knobs []Knob
		for _, k := range all {
			if k.For(m) {
				knobs = append(knobs, k)
			}
		}
		idx := make([]int, len(knobs))
		for _, t := range g.Topologies {
			for _, w := range g.Workloads {
				for i := range idx {
					idx[i] = 0
				}
				for {
					c := Cell{Mechanism: m, Topology: t, Workload: w}
					for i, k := range knobs {
						c.Knobs = append(c.Knobs, Setting{k.Name, k.Values[idx[i]]})
					}
					fc, err := fit(c)
					if err != nil {
						return nil, err
					}
					if n := fc.Name(); !seen[n] {
						seen[n] = true
						out = append(out, fc)
					}
					if !next(idx, knobs) {
						break
					}
				}
			}
		}
	}
	return out, nil
}

// next advances the odometer idx over the knobs' values, the last fastest;
// false once it wraps.
func next(idx []int, knobs []Knob) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < len(knobs[i].Values) {
			return true
		}
		idx[i] = 0
	}
	return false
}
