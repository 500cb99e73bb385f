package engine

import (
	"math"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Link is a KV transfer path with contention: each transfer first pays the
// link's setup latency, then its bytes flow; transfers flowing at the same
// time share the bandwidth equally (processor sharing). Like Worker it has no
// clock: the owner passes the time and asks when it next needs Advance.
type Link struct {
	spec    model.Link
	setup   []*Transfer // paying setup latency, in start order
	flowing []*Transfer
	last    float64 // time flowing transfers were last progressed
	done    []*Transfer
}

// Transfer is one KV movement.
type Transfer struct {
	Bytes     int64
	Tag       any // the owner's data
	StartedAt float64
	FlowAt    float64 // setup finished, bytes start moving
	DoneAt    float64
	remaining float64
}

// NewLink makes an idle link.
func NewLink(spec model.Link) *Link { return &Link{spec: spec} }

// Spec is the link's description.
func (l *Link) Spec() model.Link { return l.spec }

// Active is the number of transfers in setup or flowing.
func (l *Link) Active() int { return len(l.setup) + len(l.flowing) }

// Start begins a transfer at now.
func (l *Link) Start(now float64, t *Transfer) {
	l.progress(now)
	t.StartedAt = now
	t.FlowAt = now + l.spec.SetupS
	t.remaining = float64(t.Bytes)
	l.setup = append(l.setup, t)
}

// NextTime is when the next transfer finishes setup or completes.
func (l *Link) NextTime() (float64, bool) {
	next, ok := math.Inf(1), false
	for _, t := range l.setup {
		if t.FlowAt < next {
			next, ok = t.FlowAt, true
		}
	}
	if n := len(l.flowing); n > 0 {
		rate := l.spec.BandwidthBytes / float64(n)
		minRem := math.Inf(1)
		for _, t := range l.flowing {
			minRem = min(minRem, t.remaining)
		}
		if at := l.last + minRem/rate; at < next {
			next, ok = at, true
		}
	}
	return next, ok
}

// Advance processes everything up to now and returns the transfers that
// completed, in completion order. The slice is reused on the next call.
func (l *Link) Advance(now float64) []*Transfer {
	l.done = l.done[:0]
	for {
		next, ok := l.NextTime()
		if !ok || next > now {
			break
		}
		l.progress(next)
	}
	l.progress(now)
	return l.done
}

// progress moves flowing bytes forward to time t (no event lies between
// l.last and t other than those handled here) and admits finished setups.
func (l *Link) progress(t float64) {
	if t > l.last && len(l.flowing) > 0 {
		moved := (t - l.last) * l.spec.BandwidthBytes / float64(len(l.flowing))
		kept := l.flowing[:0]
		for _, x := range l.flowing {
			x.remaining -= moved
			// A transfer within a byte of its end is done: float rounding
			// must not leave a phantom event a picosecond later.
			if x.remaining <= 1e-6*float64(x.Bytes)+1 {
				x.remaining = 0
				x.DoneAt = t
				l.done = append(l.done, x)
				continue
			}
			kept = append(kept, x)
		}
		clear(l.flowing[len(kept):])
		l.flowing = kept
	}
	if t > l.last {
		l.last = t
	}
	kept := l.setup[:0]
	for _, x := range l.setup {
		if x.FlowAt <= t {
			if x.Bytes == 0 {
				x.DoneAt = x.FlowAt
				l.done = append(l.done, x)
				continue
			}
			l.flowing = append(l.flowing, x)
			continue
		}
		kept = append(kept, x)
	}
	clear(l.setup[len(kept):])
	l.setup = kept
}
