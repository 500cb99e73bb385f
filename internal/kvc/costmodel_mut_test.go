package kvc

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// The cost model's edges (costmodel.go): no profile is the zero cost; a
// profile without a host link cannot price a host tier, and says so.
func TestCostModelEdges(t *testing.T) {
	if got := StallCostOf(nil, 4096); got != (StallCost{}) {
		t.Errorf("StallCostOf(nil) = %+v, want the zero cost", got)
	}
	if tc, err := TierCostOf(&model.Profile{Name: "bare"}, "nvlink"); err == nil {
		t.Errorf("TierCostOf with no host link = %+v, want an error", tc)
	}
}
