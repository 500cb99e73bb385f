package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// TestAdmissionDetailIsSprintf: the admission and backpressure details
// written without fmt are the strings fmt.Sprintf made, for random replies
// (every mode, awkward floats).
func TestAdmissionDetailIsSprintf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	floats := []float64{0, 1, 0.5, 1e-7, 1e21, 123.456, 2.5e6, math.Inf(1), math.NaN(), -0.0}
	f := func() float64 {
		if rng.IntN(2) == 0 {
			return floats[rng.IntN(len(floats))]
		}
		return rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
	}
	for range 5000 {
		rep := engine.AdmitReply{CanAdmit: rng.IntN(2) == 0, Mode: engine.AdmitMode(rng.IntN(6)), Reason: []string{"", "no-space", "session-cap"}[rng.IntN(3)],
			CachedTokens: rng.IntN(1 << 20), PauseMs: f(), Trimmed: rng.IntN(5) - 1}
		rtt, q := f(), rng.IntN(1000)
		want := fmt.Sprintf("mode=%s can_admit=%t reason=%s cached=%d pause_ms=%g trimmed=%d rtt_ms=%g",
			rep.Mode, rep.CanAdmit, rep.Reason, rep.CachedTokens, rep.PauseMs, rep.Trimmed, 1000*rtt)
		if got := admissionDetail(rep, rtt); got != want {
			t.Fatalf("admission detail %q, Sprintf %q", got, want)
		}
		want = fmt.Sprintf("recommended_pause_ms=%g can_admit=%t queued=%d", rep.PauseMs, rep.CanAdmit, q)
		if got := backpressureDetail(rep, q); got != want {
			t.Fatalf("backpressure detail %q, Sprintf %q", got, want)
		}
	}
}
