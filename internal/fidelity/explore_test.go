package fidelity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	dir := "../../../shared/realruns"
	files, _ := filepath.Glob(dir + "/runs/*.csv")
	for _, f := range files {
		r, err := realrun.Load(f)
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
		t0 := time.Now()
		res, err := Compare(context.Background(), r, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%-40s pool %6d/%6d ttft %.3f/%.3f (%+.0f%%) e2e %.3f/%.3f (%+.0f%%) dec %.2f/%.2f ms fail %d/%d  %.1fs\n", r.Name[16:], res.PoolTokens, res.RealPool,
			res.Sim.TTFT.Mean, res.Real.TTFT.Mean, 100*Err(res.Sim.TTFT.Mean, res.Real.TTFT.Mean),
			res.Sim.E2E.Mean, res.Real.E2E.Mean, 100*Err(res.Sim.E2E.Mean, res.Real.E2E.Mean),
			res.Sim.DecodeS*1e3, res.Real.DecodeS*1e3, res.Sim.Failed, res.Real.Failed, time.Since(t0).Seconds())
	}
}
