package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// workload is an opened request stream: a trace file, standard input or the
// built-in generator, with what is known of its size beforehand.
type workload struct {
	src   *watchSource
	desc  string // for messages and summary.json "workload"
	close func() error
	// Known extent, for progress: the last request's trace time (files:
	// read from the end of the file), or the number of requests (the
	// built-in workload with --synth-requests). Zero when unknown.
	lastTS   float64
	requests int64
}

// openWorkload opens the flags' workload and reads its first request: a
// workload without any is an error before anything else happens.
func openWorkload(e *env, f *simFlags) (*workload, error) {
	w := &workload{close: func() error { return nil }}
	var src sim.Source
	var lasts *sim.SessionLasts // a trace file's sessions' last requests
	if f.trace == "" && f.workload != "agentic" {
		st, desc, err := presetWorkload(f)
		if err != nil {
			return nil, usagef("--workload %s: %v", f.workload, err)
		}
		src, w.desc = st, desc
	} else if f.trace == "" {
		cfg := synth.DefaultAgentic()
		cfg.Seed = f.seed
		if f.synthReqs > 0 {
			cfg.Requests = f.synthReqs
			cfg.Sessions = 0
			w.requests = f.synthReqs
		}
		if f.synthSess > 0 {
			cfg.Sessions = f.synthSess
		}
		if f.synthRate > 0 {
			cfg.ArrivalRate = f.synthRate
		}
		st, err := synth.NewAgentic(cfg)
		if err != nil {
			return nil, usagef("built-in workload: %v", err)
		}
		desc := fmt.Sprintf("built-in agentic workload (seed %d, sessions arriving at %.3g/s", cfg.Seed, cfg.ArrivalRate)
		if cfg.Sessions > 0 {
			desc += fmt.Sprintf(", %d sessions", cfg.Sessions)
		}
		if cfg.Requests > 0 {
			desc += fmt.Sprintf(", first %d requests", cfg.Requests)
		}
		src, w.desc = st, desc+")"
	} else {
		var in io.Reader
		name := f.trace
		if f.trace == "-" {
			in, name = e.stdin, "standard input"
		} else {
			file, err := os.Open(f.trace)
			if err != nil {
				return nil, err
			}
			in, w.close = file, file.Close
			w.lastTS = lastTimestamp(file)
			lasts = scanSessionEnds(file, name, f.blockSize)
		}
		rd, err := trace.NewReader(in, name, f.blockSize)
		if err != nil {
			w.close()
			return nil, err
		}
		if err := rd.NotJSON(); err != nil {
			w.close()
			return nil, err
		}
		if rd.Header().BlockSize <= 0 {
			w.close()
			return nil, usagef("--trace %s: no header line: give its block size with --block-size", f.trace)
		}
		src, w.desc = lasts.Source(rd), name
	}
	w.src = &watchSource{Source: src}
	if err := w.src.peek(); err != nil {
		w.close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s holds no requests: nothing to simulate", w.desc)
		}
		return nil, err
	}
	return w, nil
}

// watchSource passes a source through, holding its first request back (to
// tell an empty workload before the run) and noting the trace time span and
// count of what the simulator read.
type watchSource struct {
	sim.Source
	first       trace.Request
	held        bool
	firstLast   bool // the held request is its session's last (sim.SessionEnds)
	last        bool // the request Next gave last is its session's last
	firstLine   int  // the held request's line
	line        int  // the line of the request Next gave last
	n           int64
	firstTS     float64
	lastTS      float64
	sawDistinct bool
}

func (w *watchSource) peek() error {
	if err := w.Source.Next(&w.first); err != nil {
		return err
	}
	w.held, w.firstLine, w.firstLast = true, w.srcLine(), w.srcLast()
	return nil
}

// runSource is what the simulator reads: the source, with its
// sim.SessionEnds passed through when it has one (a generator), so the
// simulator closes each session after its last turn.
func (w *watchSource) runSource() sim.Source {
	if _, ok := w.Source.(sim.SessionEnds); ok {
		return endsSource{w}
	}
	return w
}

// endsSource is a watchSource whose source knows sessions' last turns.
type endsSource struct{ *watchSource }

func (e endsSource) LastOfSession() bool { return e.last }

func (w *watchSource) srcLast() bool {
	e, ok := w.Source.(sim.SessionEnds)
	return ok && e.LastOfSession()
}

// located is a source that says where its requests come from (a trace
// file's reader).
type located interface {
	File() string
	Line() int
}

// File and Line pass the source's location through, so the simulator's
// checks name the trace file and the line of the request they refuse (a
// generator's requests are numbered from 1).
func (w *watchSource) File() string {
	if l, ok := w.Source.(located); ok {
		return l.File()
	}
	return "built-in workload"
}

func (w *watchSource) Line() int { return w.line }

func (w *watchSource) srcLine() int {
	if l, ok := w.Source.(located); ok {
		return l.Line()
	}
	return int(w.n) + 1
}

func (w *watchSource) Next(r *trace.Request) error {
	if w.held {
		*r = w.first
		w.first = trace.Request{}
		w.held = false
		w.line, w.last = w.firstLine, w.firstLast
	} else if err := w.Source.Next(r); err != nil {
		return err
	} else {
		w.line, w.last = w.srcLine(), w.srcLast()
	}
	if w.n == 0 {
		w.firstTS = r.Timestamp
	} else if r.Timestamp != w.lastTS {
		w.sawDistinct = true
	}
	w.lastTS = r.Timestamp
	w.n++
	return nil
}

// firstTimestamp is the first request's trace time (known after peek).
func (w *watchSource) firstTimestamp() float64 {
	if w.held {
		return w.first.Timestamp
	}
	return w.firstTS
}

// requestRate is the offered rate in requests per second of scaled trace
// time over what was read; 0 with fewer than two distinct timestamps.
func (w *watchSource) requestRate(timeScale float64) float64 {
	if !w.sawDistinct || w.lastTS <= w.firstTS || w.n < 2 {
		return 0
	}
	return float64(w.n) / ((w.lastTS - w.firstTS) / timeScale)
}

// lastTimestamp reads the timestamp of the last line of a sorted canonical
// trace file from its end, without reading the file; 0 when it cannot (not
// a regular file, an odd last line). It leaves the file at offset 0.
//
// It reads a small tail first and a larger one only while the tail holds
// no whole last line: a trace's lines are a few hundred bytes, and reading
// (and allocating) megabytes of tail was a few milliseconds of every run.
func lastTimestamp(f *os.File) float64 {
	defer f.Seek(0, io.SeekStart)
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return 0
	}
	const maxTail = 4 << 20 // longer than any line a reader accepts in practice
	for n := min(st.Size(), 16<<10); ; n = min(2*n, st.Size(), maxTail) {
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, st.Size()-n); err != nil && !errors.Is(err, io.EOF) {
			return 0
		}
		buf = bytes.TrimRight(buf, " \t\r\n")
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 && n < st.Size() {
			if n == maxTail {
				return 0 // the last line starts before the longest tail read
			}
			continue
		}
		return lineTimestamp(buf[i+1:])
	}
}

// lineTimestamp is a JSON line's "timestamp", 0 when it has none.
func lineTimestamp(line []byte) float64 {
	var r struct {
		Timestamp *float64 `json:"timestamp"`
	}
	if json.Unmarshal(line, &r) != nil || r.Timestamp == nil {
		return 0
	}
	return *r.Timestamp
}

// scanSessionEnds reads a trace file once before the run to learn which
// request is each session's last (sim.ScanSessionEnds), so the simulator
// drops a session's records once it has ended; the file is rewound. Nil
// when that cannot be told (not a regular file, or a problem the run's own
// read reports with its line).
func scanSessionEnds(f *os.File, name string, blockSize int) *sim.SessionLasts {
	defer f.Seek(0, io.SeekStart)
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	rd, err := trace.NewReader(f, name, blockSize)
	if err != nil || rd.NotJSON() != nil {
		return nil
	}
	l, err := sim.ScanSessionEnds(rd)
	if err != nil {
		return nil
	}
	return l
}

// presetWorkload opens a built-in workload other than the agentic default:
// BLIS's agentic spec or the seed's two workloads (docs/workloads.md).
func presetWorkload(f *simFlags) (sim.Source, string, error) {
	switch f.workload {
	case "groups":
		c := synth.DefaultGroups()
		if f.changedSeed {
			c.Seed = f.seed
		}
		g, err := synth.NewGroups(c)
		return g, fmt.Sprintf("built-in groups workload (BLIS's agentic spec, seed %d)", c.Seed), err
	case "seed-swe", "seed-inferact":
		c := synth.DefaultSeedSWE()
		if f.workload == "seed-inferact" {
			c = synth.DefaultSeedInferact()
		}
		if f.changedSeed {
			c.Seed = f.seed
		}
		g, err := synth.NewSeedWorkload(c)
		return g, fmt.Sprintf("built-in %s workload (seed %d)", f.workload, c.Seed), err
	}
	return nil, "", fmt.Errorf("unknown workload (want agentic, groups, seed-swe or seed-inferact)")
}
