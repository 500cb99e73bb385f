package sweep

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Bar draws a sweep's progress on stderr: on a terminal one line redrawn
// (carriage return) at most every 200 ms, otherwise a plain line at most
// every 10 s, so logs stay readable. It takes the wall clock as now, so
// tests can drive it.
type Bar struct {
	W     io.Writer
	TTY   bool
	Now   func() time.Time
	Total int // cells to run in this sweep (finished ones excluded)
	Kept  int // cells already finished, not run again

	mu              sync.Mutex
	start, last     time.Time
	done, failed    int
	running         int
	drawn, finished bool
}

// Start notes the start; a kept cell count is said at once.
func (b *Bar) Start() {
	b.start = b.Now()
	b.last = b.start
	if b.Kept > 0 {
		fmt.Fprintf(b.W, "sweep: %d cells already finished in this folder are kept; %d to run\n", b.Kept, b.Total)
	}
}

// Began notes a cell starting.
func (b *Bar) Began() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running++
	b.draw(false)
}

// Ended notes a cell ending (failed when it did not finish).
func (b *Bar) Ended(failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	b.done++
	if failed {
		b.failed++
	}
	b.draw(b.done == b.Total)
}

func (b *Bar) period() time.Duration {
	if b.TTY {
		return 200 * time.Millisecond
	}
	return 10 * time.Second
}

func (b *Bar) draw(force bool) {
	now := b.Now()
	if !force && now.Sub(b.last) < b.period() {
		return
	}
	b.last = now
	line := b.Line(now.Sub(b.start))
	if b.TTY {
		fmt.Fprintf(b.W, "\r\033[K%s", line)
		b.drawn = true
	} else {
		fmt.Fprintln(b.W, line)
	}
}

// Line is the bar's text after elapsed.
func (b *Bar) Line(elapsed time.Duration) string {
	const width = 24
	fill := 0
	if b.Total > 0 {
		fill = width * b.done / b.Total
	}
	s := fmt.Sprintf("sweep [%s%s] %d/%d cells", strings.Repeat("#", fill), strings.Repeat(".", width-fill), b.done, b.Total)
	if b.running > 0 {
		s += fmt.Sprintf(", %d running", b.running)
	}
	if b.failed > 0 {
		s += fmt.Sprintf(", %d failed", b.failed)
	}
	s += fmt.Sprintf(", %s elapsed", elapsed.Round(100*time.Millisecond))
	if b.done > 0 && b.done < b.Total {
		left := time.Duration(float64(elapsed) * float64(b.Total-b.done) / float64(b.done))
		s += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	return s
}

// Finish ends the redrawn line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn && !b.finished {
		fmt.Fprintln(b.W)
	}
	b.finished = true
}
