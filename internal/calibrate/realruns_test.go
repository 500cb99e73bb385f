package calibrate

import (
	"math"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/fidelity"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
)

// A cross-validation split: a run is held out when its name contains any
// of the texts; "llama-2-7b" must not catch the 70B runs.
func TestSplitRealRunsByName(t *testing.T) {
	var runs []RealRun
	for _, n := range []string{"x-llama-2-7b-tp1-codegen", "x-llama-2-70b-tp4-general", "x-mixtral-8x7b-tp2-roleplay"} {
		runs = append(runs, RealRun{Run: &realrun.Run{Name: n}})
	}
	fit, held := SplitRealRuns(runs, []string{"llama-2-7b", ""})
	if len(held) != 1 || held[0].Run.Name != "x-llama-2-7b-tp1-codegen" || len(fit) != 2 {
		t.Fatalf("held %d, fit %d: want the 7B run alone held out", len(held), len(fit))
	}
	if fit, held := SplitRealRuns(runs, nil); len(fit) != 3 || len(held) != 0 {
		t.Fatalf("no hold-out: fit %d, held %d", len(fit), len(held))
	}
}

func TestPickKnobs(t *testing.T) {
	ks, err := pickKnobs([]string{"gemm_eff", "client.delay_s"})
	if err != nil || len(ks) != 2 || ks[0].name != "gemm_eff" || ks[1].name != "client.delay_s" {
		t.Fatalf("%v, %v", ks, err)
	}
	if _, err := pickKnobs([]string{"gemm"}); err == nil || !strings.Contains(err.Error(), "gemm_eff") {
		t.Fatalf("an unknown name must be refused, naming the valid ones: %v", err)
	}
	if ks, _ := pickKnobs(nil); len(ks) != len(knobs) {
		t.Fatalf("no names: %d knobs, want all %d", len(ks), len(knobs))
	}
}

// The objective counts a run's TTFT p99 (half weight): a run off only at
// p99 scores worse than a run that matches.
func TestScoreCountsTTFTP99(t *testing.T) {
	side := func(p99 float64) fidelity.Side {
		s := fidelity.Stats{Mean: 1, P50: 1, P90: 1, P99: p99}
		return fidelity.Side{TTFT: s, E2E: s}
	}
	exact := Score([]*fidelity.Result{{Real: side(2), Sim: side(2)}})
	off := Score([]*fidelity.Result{{Real: side(2), Sim: side(3)}})
	if exact != 0 || math.Abs(off-0.5*0.5/3.5) > 1e-12 {
		t.Fatalf("score exact %v, p99 50 %% off %v; want 0 and %v", exact, off, 0.5*0.5/3.5)
	}
}
