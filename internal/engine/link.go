package engine

import (
	"math"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Link is a KV transfer path with contention: each transfer first pays the
// link's setup latency, then its bytes flow; transfers flowing at the same
// time share the bandwidth equally (processor sharing). Like Worker it has no
// clock: the owner passes the time and asks when it next needs Advance.
//
// Sharing is tracked in "virtual bytes": served is how many bytes every
// flowing transfer has received since the link was made, and a transfer
// finishes when served reaches its finish tag (served at its start + its
// size). Tags never drift with repeated subtraction, and a completion that
// rounding puts at the current instant is still taken then, so the link can
// neither lose a transfer nor spin in place.
type Link struct {
	spec    model.Link
	setup   []*Transfer // paying setup latency, in start order
	flowing []*Transfer
	last    float64 // time served was last brought up to date
	served  float64 // virtual bytes served to each flowing transfer
	done    []*Transfer
	out     []*Transfer // the slice Advance last returned
}

// Transfer is one KV movement.
type Transfer struct {
	Bytes     int64
	Tag       any // the owner's data
	StartedAt float64
	FlowAt    float64 // setup finished, bytes start moving
	DoneAt    float64
	finish    float64 // served value at which it completes
}

// NewLink makes an idle link.
func NewLink(spec model.Link) *Link { return &Link{spec: spec} }

// Spec is the link's description.
func (l *Link) Spec() model.Link { return l.spec }

// Active is the number of transfers in setup or flowing.
func (l *Link) Active() int { return len(l.setup) + len(l.flowing) }

// Start begins a transfer at now. Completions it brings up to date are kept
// for the next Advance, which NextTime then asks for at once.
func (l *Link) Start(now float64, t *Transfer) {
	l.progress(now)
	t.StartedAt = now
	t.FlowAt = now + l.spec.SetupS
	l.setup = append(l.setup, t)
}

// NextTime is when the link next needs Advance: at once if completions are
// waiting to be handed over.
func (l *Link) NextTime() (float64, bool) {
	if len(l.done) > 0 {
		return l.last, true
	}
	t, _, ok := l.next()
	return t, ok
}

// next is the next setup end or flow completion, and whether it is the
// latter.
func (l *Link) next() (at float64, flow, ok bool) {
	at = math.Inf(1)
	for _, t := range l.setup {
		if t.FlowAt < at {
			at, ok = t.FlowAt, true
		}
	}
	if n := len(l.flowing); n > 0 {
		c := l.last + (l.minFinish()-l.served)*float64(n)/l.spec.BandwidthBytes
		c = max(c, l.last)
		if c < at || !ok {
			at, flow, ok = c, true, true
		}
	}
	return at, flow, ok
}

func (l *Link) minFinish() float64 {
	m := math.Inf(1)
	for _, t := range l.flowing {
		m = min(m, t.finish)
	}
	return m
}

// Advance processes everything up to now and returns the transfers that
// completed, in completion order. The slice is valid until the next call.
func (l *Link) Advance(now float64) []*Transfer {
	// Each turn consumes a setup or completes at least one flow, so the
	// loop ends.
	for {
		at, flow, ok := l.next()
		if !ok || at > now {
			break
		}
		due := l.minFinish()
		l.progress(at)
		if flow {
			// The finish that made this event is due now, whatever
			// rounding says (progress may already have taken it).
			l.served = max(l.served, due)
			l.complete(at)
		}
	}
	l.progress(now)
	l.out, l.done = l.done, l.out[:0]
	return l.out
}

// progress brings served up to time t, completes what it covers and moves
// finished setups into the flow.
func (l *Link) progress(t float64) {
	if t > l.last {
		if n := len(l.flowing); n > 0 {
			l.served += (t - l.last) * l.spec.BandwidthBytes / float64(n)
		}
		l.last = t
	}
	l.complete(t)
	kept := l.setup[:0]
	for _, x := range l.setup {
		if x.FlowAt > t {
			kept = append(kept, x)
			continue
		}
		if x.Bytes <= 0 {
			x.DoneAt = t
			l.done = append(l.done, x)
			continue
		}
		x.finish = l.served + float64(x.Bytes)
		l.flowing = append(l.flowing, x)
	}
	clear(l.setup[len(kept):])
	l.setup = kept
}

// complete finishes flowing transfers whose tag has been served (to within
// rounding of the tag itself).
func (l *Link) complete(t float64) {
	kept := l.flowing[:0]
	for _, x := range l.flowing {
		if x.finish-l.served <= 1e-12*x.finish {
			x.DoneAt = t
			l.done = append(l.done, x)
			continue
		}
		kept = append(kept, x)
	}
	clear(l.flowing[len(kept):])
	l.flowing = kept
}
