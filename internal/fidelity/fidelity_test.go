package fidelity

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
)

func TestStatsNearestRank(t *testing.T) {
	var xs []float64
	for i := 1; i <= 100; i++ {
		xs = append(xs, float64(i))
	}
	xs = append(xs, math.NaN())
	s := Of(xs)
	if s.N != 100 || s.Mean != 50.5 || s.P50 != 50 || s.P90 != 90 || s.P99 != 99 {
		t.Fatalf("%+v", s)
	}
	if e := Err(110, 100); math.Abs(e-0.1) > 1e-12 {
		t.Fatalf("Err = %v", e)
	}
	if !math.IsNaN(Err(1, 0)) || !math.IsNaN(Of(nil).Mean) {
		t.Fatal("no real value must give NaN, not a number")
	}
}

// One real run end to end: the Llama-2-7B codegen run replayed with the
// committed coefficients stays within the errors docs/fidelity.md reports
// for it, with margin (a regression bound, not the target).
func TestRealRunEndToEnd(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "realruns")
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*llama-2-7b-tp1-codegen.csv"))
	if len(files) == 0 {
		t.Skip("../shared/realruns absent (a fresh clone has no ../shared)")
	}
	r, err := realrun.Load(files[0])
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadHF(ConfigFile(dir, r))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Deployment(r)
	p, err := d.Profile(a, model.DefaultCoefficients, 16)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compare(context.Background(), r, p, Options{Client: DefaultClientPath})
	if err != nil {
		t.Fatal(err)
	}
	if res.Overloaded || res.Sim.Failed != 0 || res.Real.TTFT.N != 9000 || res.PoolTokens != res.RealPool {
		t.Fatalf("%+v", res)
	}
	for i, e := range res.Errors() {
		if math.Abs(e) > 0.3 {
			t.Errorf("%s error %+.1f %%, want within ±30 %%", Stat[i], 100*e)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, []*Result{res}, true); err != nil || !strings.Contains(b.String(), "| e2e mean |") {
		t.Fatalf("markdown table: %v\n%s", err, b.String())
	}
}
