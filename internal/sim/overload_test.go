package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// An overloaded run warns as its backlog builds and stops at the limit with
// a StopError and the partial result, instead of growing without bound.
func TestOverloadStopsAtBacklogLimit(t *testing.T) {
	sc := synth.DefaultAgentic()
	sc.Sessions, sc.ArrivalRate = 0, 2 // far more than 1P1D can serve
	sc.Requests = 20000
	st, err := synth.NewAgentic(sc)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: profile(t), MaxBacklog: 400,
		Warn: func(m string) { warned = append(warned, m) }}
	res, err := Run(context.Background(), cfg, st, nil, nil)
	var stop *StopError
	if !errors.As(err, &stop) || !strings.Contains(stop.Reason, "overload") {
		t.Fatalf("err = %v, want an overload StopError", err)
	}
	if res == nil || res.Summary.Complete || !strings.Contains(res.Summary.StopReason, "--max-backlog") {
		t.Fatalf("partial result %+v, want complete=false with the reason", res)
	}
	if len(warned) < 3 || !strings.Contains(warned[0], "overload: 40 requests") || len(res.Summary.Warnings) != len(warned) {
		t.Fatalf("warnings %q (summary %q), want one at 10%% of the limit and at each doubling", warned, res.Summary.Warnings)
	}
	if res.Replay.MaxBacklog != 400 || res.Replay.Requests >= 20000 {
		t.Fatalf("replay %+v, want a stop at 400 requests held", res.Replay)
	}
}
