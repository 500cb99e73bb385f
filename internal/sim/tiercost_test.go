package sim

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// A run's storage tier reaches the control plane's tier cost and the
// engine's pool as its flags say: Mooncake's link (37.5 GB/s + 100 µs),
// the prefetch policy (best_effort or not), whether the pool is shared,
// and the shared pool's aggregate bandwidth (the cost's only when shared).
func TestStorageTierReachesCostAndPool(t *testing.T) {
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy     string
		shared     bool
		bw         float64
		bestEffort bool
	}{
		{"", false, 0, true},
		{"wait_complete", false, 0, false},
		{"timeout", true, 40e9, false},
		{"wait_complete", false, 40e9, false}, // a pool of each worker's own: no aggregate link
	} {
		cfg := &Config{Profile: p, Link: "rdma-400g", HiCache: &HiCache{Ratio: 2, WritePolicy: "write_through",
			StorageBackend: "mooncake", StoragePrefetchPolicy: c.policy, StorageShared: c.shared, StorageSharedBandwidth: c.bw}}
		tc := cfg.withTiers(kvc.V3Config{}).Tiers
		if tc.StorageBandwidth != 37.5e9 || tc.StorageSetupS != 100e-6 || tc.StorageBestEffort != c.bestEffort || tc.StorageShared != c.shared ||
			tc.StoragePoolBandwidth != map[bool]float64{true: c.bw}[c.shared] {
			t.Fatalf("%+v: tier cost %+v", c, tc)
		}
		hc, err := cfg.HiCache.engineConfig()
		if err != nil {
			t.Fatal(err)
		}
		if (hc.Storage.Pool != nil) != c.shared || c.shared && hc.Storage.Pool.BandwidthBytes != c.bw {
			t.Fatalf("%+v: engine pool %+v", c, hc.Storage.Pool)
		}
	}
}
