package sim

import (
	"context"
	"errors"
	"testing"
)

// TestCanceledRunReturnsPartialResult: a run whose context ends returns
// what it did so far, marked incomplete with the context's cause, and an
// error that is both a *StopError and context.Canceled.
func TestCanceledRunReturnsPartialResult(t *testing.T) {
	p := profile(t)
	cfg := Config{Mechanism: PDColo, Colo: 2, Profile: p}
	ctx, cancel := context.WithCancelCause(context.Background())
	sink := &memSink{}
	progress := func(finished int, _ float64) {
		if finished >= 2048 {
			cancel(errors.New("interrupted by test"))
		}
	}
	res, err := Run(ctx, cfg, agentic(t, 400, 1), sink, progress)
	var stop *StopError
	if !errors.As(err, &stop) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want a StopError wrapping context.Canceled", err)
	}
	if res == nil || res.Summary.Complete || res.Summary.StopReason != "interrupted by test" || !res.Summary.Stopped() {
		t.Fatalf("result %+v", res)
	}
	if res.Summary.Requests < 2048 || res.Summary.Requests != len(sink.recs) || res.Replay.Requests <= res.Summary.Requests {
		t.Fatalf("partial summary %d requests, sink %d, ingested %d", res.Summary.Requests, len(sink.recs), res.Replay.Requests)
	}
	whole, _ := Run(context.Background(), cfg, agentic(t, 20, 1), nil, nil)
	if !whole.Summary.Complete || whole.Summary.Stopped() {
		t.Fatal("a whole run is not marked complete")
	}
}
