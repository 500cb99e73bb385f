package main

import (
	"fmt"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// progress prints how far a run is on stderr. On a terminal it redraws one
// line (carriage return) at most once a second; otherwise it writes a plain
// line at most every 10 s, so logs stay readable. Nothing is printed for a
// run shorter than the first period.
//
// The extent is the scaled trace time of the last request when it is known
// (a trace file), else the number of requests (the built-in workload with
// --synth-requests); with neither, the line shows simulated time and
// requests done without a percentage.
type progress struct {
	e        *env
	label    string
	start    time.Time
	last     time.Time
	printed  bool
	firstS   float64 // scaled trace time of the first request
	endS     float64 // scaled trace time of the last; 0 unknown
	requests int64   // total requests; 0 unknown
}

func newProgress(e *env, label string, w *workload, timeScale float64) *progress {
	p := &progress{e: e, label: label, start: e.now(), requests: w.requests}
	p.last = p.start
	if w.lastTS > 0 {
		p.firstS = w.src.firstTimestamp() / timeScale
		p.endS = w.lastTS / timeScale
	}
	return p
}

func (p *progress) period() time.Duration {
	if p.e.tty {
		return time.Second
	}
	return 10 * time.Second
}

// callback is the sim.Progress to pass to sim.Run.
func (p *progress) callback() sim.Progress {
	return func(done int, simT float64) {
		now := p.e.now()
		if now.Sub(p.last) < p.period() {
			return
		}
		p.last = now
		p.printed = true
		line := p.line(done, simT, now.Sub(p.start))
		if p.e.tty {
			fmt.Fprintf(p.e.stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(p.e.stderr, line)
		}
	}
}

func (p *progress) line(done int, simT float64, elapsed time.Duration) string {
	frac := -1.0
	switch {
	case p.endS > p.firstS:
		frac = (simT - p.firstS) / (p.endS - p.firstS)
	case p.requests > 0:
		frac = float64(done) / float64(p.requests)
	}
	head := fmt.Sprintf("%s: %d requests done, simulated %.0f s", p.label, done, simT)
	el := elapsed.Round(time.Second)
	switch {
	case frac < 0:
		return fmt.Sprintf("%s, %s elapsed", head, el)
	case frac >= 1:
		return fmt.Sprintf("%s: all requests arrived, finishing the last ones (%s elapsed)", head, el)
	case frac <= 0:
		return fmt.Sprintf("%s, %s elapsed", head, el)
	}
	eta := time.Duration(float64(elapsed) * (1 - frac) / frac).Round(time.Second)
	of := "of the trace's time span"
	if p.endS <= p.firstS {
		of = "of the requests"
	}
	return fmt.Sprintf("%s: %.0f%% %s, %s elapsed, about %s left", head, 100*frac, of, el, eta)
}

// finish ends the redrawn line, if one was drawn.
func (p *progress) finish() {
	if p.printed && p.e.tty {
		fmt.Fprintln(p.e.stderr)
	}
}
