package main

import (
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// thinSink bounds structural/workers.jsonl: it holds worker samples back
// and, whenever more than limit are held, keeps only every other sampling
// instant, doubling the period. At Flush it writes what is left, in time
// order, so the file is a uniform series of at most limit lines whatever the
// run's length (50,000 requests once wrote 392 MB at 1 s). Requests and
// events pass straight through.
type thinSink struct {
	sim.Sink
	limit   int
	buf     []metrics.WorkerSample
	ord     []int64 // sampling instant of each held sample
	instant int64   // current instant's ordinal (0-based)
	lastT   float64
	started bool
	stride  int64 // keep instants whose ordinal is a multiple of stride
}

func newThinSink(s sim.Sink, limit int) *thinSink {
	return &thinSink{Sink: s, limit: max(limit, 2), stride: 1}
}

func (t *thinSink) Worker(w *metrics.WorkerSample) error {
	if !t.started || w.TimeS != t.lastT {
		if t.started {
			t.instant++
		}
		t.started, t.lastT = true, w.TimeS
	}
	if t.instant%t.stride != 0 {
		return nil
	}
	t.buf = append(t.buf, *w)
	t.ord = append(t.ord, t.instant)
	for len(t.buf) > t.limit {
		t.stride *= 2
		k := 0
		for i := range t.buf {
			if t.ord[i]%t.stride == 0 {
				t.buf[k], t.ord[k] = t.buf[i], t.ord[i]
				k++
			}
		}
		t.buf, t.ord = t.buf[:k], t.ord[:k]
	}
	return nil
}

// Flush writes the held samples to the underlying sink.
func (t *thinSink) Flush() error {
	for i := range t.buf {
		if err := t.Sink.Worker(&t.buf[i]); err != nil {
			return err
		}
	}
	t.buf, t.ord = nil, nil
	return nil
}

// factor is how many sampling periods one kept sample stands for.
func (t *thinSink) factor() int64 { return t.stride }
