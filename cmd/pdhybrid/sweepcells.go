package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/sweep"
)

// A sweep cell is one `pdhybrid sim` invocation: the grid's base flags,
// then the cell's mechanism, topology, workload and knob values as sim
// flags. It is resolved by sim's own parsing and checks (simCommand,
// simOpts.resolve), so the sweep takes every mechanism, knob and value sim
// takes and refuses the rest with sim's message, and follows sim as it grows.

// sweepOwned are the sim flags the sweep sets itself for each cell.
var sweepOwned = map[string]string{
	"mechanism": "--mechanism", "prefill": "--topology", "decode": "--topology", "colo": "--topology",
	"trace": "--trace", "workload": "--workload", "out": "--out", "force": "--force", "name": "(the cell's folder name)",
	"dump-profile": "(nothing: sweep runs cells)", "help": "(nothing)",
}

// cellArgs are the sim flags of cell c.
func cellArgs(g sweep.Grid, c sweep.Cell) []string {
	var args []string
	for _, b := range g.Base {
		if name, _, _ := strings.Cut(strings.TrimPrefix(b, "--"), "="); !slices.Contains(c.SkipBase, name) {
			args = append(args, b)
		}
	}
	args = append(args, "--mechanism="+c.Mechanism)
	if c.Topology.Colo > 0 {
		args = append(args, fmt.Sprintf("--colo=%d", c.Topology.Colo))
	} else {
		args = append(args, fmt.Sprintf("--prefill=%d", c.Topology.Prefill), fmt.Sprintf("--decode=%d", c.Topology.Decode))
	}
	if c.Workload.Trace != "" {
		args = append(args, "--trace="+c.Workload.Trace)
	} else {
		args = append(args, "--workload="+c.Workload.Name)
	}
	if c.Mechanism == string(sim.PDColo) && !cellSetsPolicy(g, c) {
		// DP as bench runs it: sticky sessions. Round-robin DP loses every
		// session's prefix cache turn after turn, a baseline too weak to
		// compare with (--set pd-colo:policy=default sweeps it).
		args = append(args, "--policy=sticky")
	}
	for _, k := range c.Knobs {
		args = append(args, "--"+k.Name+"="+k.Value)
	}
	return args
}

// cellSetsPolicy reports whether the grid gives cell c a routing policy
// (a knob, or a base flag it keeps).
func cellSetsPolicy(g sweep.Grid, c sweep.Cell) bool {
	for _, k := range c.Knobs {
		if k.Name == "policy" {
			return true
		}
	}
	for _, b := range g.Base {
		if name, _, _ := strings.Cut(strings.TrimPrefix(b, "--"), "="); name == "policy" && !slices.Contains(c.SkipBase, name) {
			return true
		}
	}
	return false
}

// resolved is a cell as sim resolved it.
type resolved struct {
	opts *simOpts
	cfg  sim.Config
	moot map[string]string // flags given that do not apply, with when they would
}

// resolveCell runs sim's parsing and checks on cell c. With tolerant, a
// knob (or the topology) that does not apply to the cell is noted in moot
// rather than refused.
func resolveCell(e *env, g sweep.Grid, c sweep.Cell, tolerant bool) (resolved, error) {
	sc, o := simCommand(e)
	fs := sc.Flags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(cellArgs(g, c)); err != nil {
		return resolved{}, usagef("%v", err)
	}
	ck := newChecks(sc)
	if tolerant {
		ck.tolerate = map[string]bool{"prefill": true, "decode": true}
		for _, k := range c.Knobs {
			ck.tolerate[k.Name] = true
		}
		for _, b := range g.Base {
			name, _, _ := strings.Cut(strings.TrimPrefix(b, "--"), "=")
			ck.tolerate[name] = true
		}
	}
	cfg, _, err := o.resolve(e, ck)
	return resolved{opts: o, cfg: cfg, moot: ck.moot}, err
}

// moot records which knobs did not apply to which mechanisms.
type moot struct {
	by   map[string]map[string]bool // knob → mechanisms it does not apply to
	when map[string]string
	used map[string]bool // knobs that applied to some cell
	base map[string]bool // of by, the base flags (after --)
}

func newMoot() *moot {
	return &moot{by: map[string]map[string]bool{}, when: map[string]string{}, used: map[string]bool{}, base: map[string]bool{}}
}

// fitter trims raw cells to what applies to them (sweep.Fit): a knob sim
// says does not apply to the cell is dropped, and a mechanism that takes no
// prefill/decode split gets the topology's GPUs as colocated workers.
// Dropping one knob can make another moot (breaker knobs after
// --peer-failure), so it repeats until the cell is stable, then checks the
// cell strictly, as `pdhybrid sim` would.
func fitter(e *env, g sweep.Grid, m *moot) sweep.Fit {
	return func(c sweep.Cell) (sweep.Cell, error) {
		raw := c.Name()
		for range len(c.Knobs) + 2 {
			r, err := resolveCell(e, g, c, true)
			if err != nil {
				return c, cellError(raw, err)
			}
			if len(r.moot) == 0 {
				break
			}
			drop := map[string]bool{}
			for n, when := range r.moot {
				switch _, knob := c.Value(n); {
				case n == "prefill" || n == "decode":
					c.Topology = c.Topology.Colocated()
				case knob:
					drop[n] = true
					m.note(n, c.Mechanism, when)
				default: // a base flag
					c.SkipBase = append(c.SkipBase, n)
					m.note(n, c.Workload.Name, when)
					m.base[n] = true
				}
			}
			c = c.Without(drop)
			sort.Strings(c.SkipBase)
		}
		if _, err := resolveCell(e, g, c, false); err != nil {
			return c, cellError(raw, err)
		}
		for _, k := range c.Knobs {
			m.used[k.Name] = true
		}
		for _, b := range g.Base {
			if name, _, _ := strings.Cut(strings.TrimPrefix(b, "--"), "="); !slices.Contains(c.SkipBase, name) {
				m.used[name] = true
			}
		}
		return c, nil
	}
}

func (m *moot) note(knob, mech, when string) {
	if m.by[knob] == nil {
		m.by[knob] = map[string]bool{}
	}
	m.by[knob][mech] = true
	if m.when[knob] == "" {
		m.when[knob] = when
	}
}

// cellError is a cell's problem as a usage error naming the cell.
func cellError(cell string, err error) error {
	var u usageError
	if errors.As(err, &u) {
		return usagef("cell %s: %s", cell, err.Error())
	}
	return fmt.Errorf("cell %s: %w", cell, err)
}

// checkKnobs refuses knobs sim does not have, and flags the sweep sets
// itself, before any cell is resolved. It rewrites the base flags as
// --name=value in name order, so the same flags in another order are the
// same sweep.
func checkKnobs(e *env, g *sweep.Grid) error {
	sc, _ := simCommand(e)
	fs := sc.Flags()
	for _, k := range g.Knobs {
		if by, ok := sweepOwned[k.Name]; ok {
			return usagef("--set %s: the sweep sets --%s itself; use sweep's %s", k.Name, k.Name, by)
		}
		if fs.Lookup(k.Name) == nil {
			msg := fmt.Sprintf("--set %s: pdhybrid sim has no flag --%s", k.Name, k.Name)
			best, bestD := "", 3
			fs.VisitAll(func(f *pflag.Flag) {
				if d := editDistance(k.Name, f.Name); d < bestD && !f.Hidden {
					best, bestD = f.Name, d
				}
			})
			if best != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", best)
			}
			return usageError{msg + "; 'pdhybrid sim --help' lists the knobs"}
		}
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(g.Base); err != nil {
		return usagef("sim flags after --: %v", err)
	}
	if len(fs.Args()) > 0 {
		return usagef("sim flags after --: unexpected argument %q", fs.Args()[0])
	}
	var owned []string
	fs.Visit(func(f *pflag.Flag) {
		if _, ok := sweepOwned[f.Name]; ok {
			owned = append(owned, f.Name)
		}
	})
	if len(owned) > 0 {
		return usagef("sim flags after --: --%s is the sweep's to set; use sweep's %s", owned[0], sweepOwned[owned[0]])
	}
	var dup string
	g.Base = nil
	fs.Visit(func(f *pflag.Flag) {
		g.Base = append(g.Base, "--"+f.Name+"="+f.Value.String())
		for _, k := range g.Knobs {
			if k.Name == f.Name {
				dup = f.Name
			}
		}
	})
	if dup != "" {
		return usagef("--%s: given both as a knob (--set) and after --; give it once", dup)
	}
	return nil
}

// runCell simulates one cell into dir, as `pdhybrid sim --out dir` would,
// writing what the run says to log. An interrupted cell's folder is
// removed, so a later sweep runs it again from the start.
func runCell(ctx context.Context, e *env, g sweep.Grid, c sweep.Cell, dir string, log io.Writer) error {
	if st, _ := sweep.CellState(dir); st == sweep.Partial {
		removeRun(dir)
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return fmt.Errorf("%s holds files a run does not write; remove them", dir)
		}
	}
	var buf bytes.Buffer
	ce := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &buf, now: e.now}
	defer func() { log.Write(buf.Bytes()) }()
	r, err := resolveCell(ce, g, c, false)
	if err != nil {
		return err
	}
	r.cfg.Name = c.Name()
	w, err := openWorkload(ce, &r.opts.f)
	if err != nil {
		return err
	}
	defer w.close()
	res, err := simulate(ctx, ce, r.cfg, w, dir, c.Name())
	var stop *sim.StopError
	switch {
	case res == nil:
		return err
	case errors.As(err, &stop) && errors.Is(err, context.Canceled):
		removeRun(dir)
		return err
	}
	return nil // finished, or stopped at a limit of its own: a result
}

// keptFloors reads the latency floors out's sweep.json holds, by workload
// (none when it has none or cannot be read: they are computed again).
func keptFloors(out string) map[string]sweep.Floor {
	b, err := os.ReadFile(filepath.Join(out, sweep.JSONFile))
	if err != nil {
		return nil
	}
	var t sweep.Table
	if json.Unmarshal(b, &t) != nil {
		return nil
	}
	kept := map[string]sweep.Floor{}
	for _, f := range t.Floors {
		kept[f.Workload] = f
	}
	return kept
}

// openSweepOut makes out ready for the sweep described by m: a new or empty
// folder, or one holding the same sweep (resumed: its finished cells are
// kept). A folder holding another sweep is refused unless force, which
// removes the cells not in this grid (all of them when the base flags
// differ) and keeps the rest; a folder holding anything else is refused.
func openSweepOut(out string, m sweep.Manifest, force bool) (resumed bool, err error) {
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return false, usagef("--out %s: exists and is not a folder", out)
	}
	old, ok, err := sweep.ReadManifest(out)
	if err != nil {
		return false, err
	}
	if !ok {
		ents, err := os.ReadDir(out)
		if err == nil && len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return false, usagef("--out %s: the folder is not empty and holds no sweep (no %s; it has %s); give a new or empty folder",
				out, sweep.ManifestFile, listSome(names))
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return false, err
		}
		return false, m.Write(out)
	}
	diff, sameBase := m.Diff(old)
	if diff == "" {
		return true, m.Write(out)
	}
	if !force {
		return false, usagef("--out %s: holds a different sweep: %s; pass --force to replace it (cells both grids share are kept when the base sim flags are the same), or give another folder", out, diff)
	}
	keep := map[string]bool{}
	if sameBase {
		for _, c := range m.Cells {
			keep[c] = true
		}
	}
	for _, c := range old.Cells {
		if !keep[c] {
			removeRun(filepath.Join(out, c))
		}
	}
	for _, f := range []string{sweep.CSVFile, sweep.JSONFile, sweep.HTMLFile} {
		os.Remove(filepath.Join(out, f))
	}
	return sameBase, m.Write(out)
}

// mootNotes says which knobs did not multiply which mechanisms' cells.
func (m *moot) notes() []string {
	var out []string
	for k, ms := range m.by {
		var names []string
		for n := range ms {
			names = append(names, n)
		}
		sort.Strings(names)
		if m.base[k] {
			out = append(out, fmt.Sprintf("sweep: --%s (after --) is left out of the cells of %s: it applies only %s", k, strings.Join(names, ", "), m.when[k]))
			continue
		}
		out = append(out, fmt.Sprintf("sweep: --%s is left out of the cells of %s where it does not apply (it applies only %s): they run once, not once per value", k, strings.Join(names, ", "), m.when[k]))
	}
	sort.Strings(out)
	return out
}

// profileKnobs are the sim flags that choose the model or how it is
// deployed: a sweep over one of them has a latency floor per profile.
var profileKnobs = map[string]bool{"model-config": true, "model": true, "profile": true, "hardware": true,
	"tp": true, "ep": true, "dp-attention": true, "kv-dtype": true, "engine": true, "context-length": true,
	"swa-full-tokens-ratio": true}

// sweepsProfile reports whether g's knobs change the profile from cell to
// cell.
func sweepsProfile(g sweep.Grid) bool {
	for _, k := range g.Knobs {
		if profileKnobs[k.Name] && len(k.Values) > 1 {
			return true
		}
	}
	return false
}

// sweepFloors is the latency floor of each workload of cells (the first
// cell of a workload gives its profile, chunk and context length; where the
// grid sweeps the model or its deployment, of each workload and profile,
// named "workload (profile)"), for
// sweep.json and the page: what no cell of that workload can be below. A
// workload whose floor cannot be had (a trace with a bad line, whose cells
// failed too) is said on stderr and left out. A workload's floor in kept
// (the last run of the same sweep: the same base flags and traces, so the
// same floor) is taken as it is.
func sweepFloors(e *env, g sweep.Grid, cells []sweep.Cell, kept map[string]sweep.Floor) []sweep.Floor {
	var out []sweep.Floor
	seen := map[string]bool{}
	reused := 0
	defer func() {
		if reused > 0 {
			fmt.Fprintf(e.stderr, "sweep: kept the latency floors of %d workload(s) from the folder's last run of this sweep\n", reused)
		}
	}()
	perProfile := sweepsProfile(g)
	for _, c := range cells {
		ce := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, now: e.now}
		name := c.Workload.Name
		var r resolved
		var err error
		if perProfile {
			// A floor per model and deployment: each cell's profile names it.
			if r, err = resolveCell(ce, g, c, true); err == nil {
				name = fmt.Sprintf("%s (%s)", c.Workload.Name, r.cfg.Profile.Name)
			}
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if f, ok := kept[name]; ok {
			out = append(out, f)
			reused++
			continue
		}
		if !perProfile {
			r, err = resolveCell(ce, g, c, true)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "sweep: no latency floor for %s: %v\n", name, err)
			continue
		}
		st, _, err := workloadFloor(ce, &r.opts.f, r.cfg.Profile, r.cfg.ChunkTokens, r.cfg.MaxInputLen)
		if err != nil {
			fmt.Fprintf(e.stderr, "sweep: no latency floor for %s: %v\n", c.Workload.Name, err)
			continue
		}
		ms := func(q sim.Quartet) [4]float64 { return [4]float64{1e3 * q.Mean, 1e3 * q.P50, 1e3 * q.P90, 1e3 * q.P99} }
		t, x := ms(st.TTFT), ms(st.E2E)
		out = append(out, sweep.Floor{Workload: name, Requests: st.Requests, Uncached: st.Uncached,
			TTFTMean: t[0], TTFTP50: t[1], TTFTP90: t[2], TTFTP99: t[3], E2EMean: x[0], E2EP50: x[1], E2EP90: x[2], E2EP99: x[3]})
	}
	return out
}
