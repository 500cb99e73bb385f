package gateway

import (
	"net/http"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The TTFT histogram observes the time to the first token relayed, not the
// whole answer's: for a streamed answer of 200 tokens its sum is below the
// e2e histogram's, which the relay guarantees (the first event is written
// before the other 199). A TTFT that observed e2e (a mutant the manual
// round left alive) makes them equal.
func TestTTFTObservesFirstToken(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	gw, _ := start(t, testConfig(kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}))
	a := generate(t, gw.URL, map[string]any{"input_ids": ids(7000, 600), "session_id": "s", "stream": true,
		"sampling_params": map[string]any{"max_new_tokens": 200}})
	if a.status != http.StatusOK || len(a.outputIDs) != 200 || !a.done {
		t.Fatalf("streamed answer %+v", a)
	}
	fams := scrape(t, gw.URL)
	ttft, ok1 := sample(fams, "pdhybrid_time_to_first_token_seconds", map[string]string{"mode": a.mode})
	e2e, ok2 := sample(fams, "pdhybrid_e2e_request_latency_seconds", map[string]string{"mode": a.mode})
	if !ok1 || !ok2 || ttft.Histogram.GetSampleCount() != 1 || e2e.Histogram.GetSampleCount() != 1 {
		t.Fatalf("want one TTFT and one e2e observation for mode %s", a.mode)
	}
	if f, e := ttft.Histogram.GetSampleSum(), e2e.Histogram.GetSampleSum(); !(f < e) {
		t.Fatalf("TTFT %v s, e2e %v s: the first token's time must be below the whole answer's", f, e)
	}
}
