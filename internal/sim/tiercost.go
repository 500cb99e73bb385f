package sim

import "github.com/pdhybrid/pdhybrid/internal/kvc"

// withTiers gives KVC v3's placement the engine's tier costs when the run
// has a host tier (kvc.TierCostOf): the host link the engine loads back
// over, the P→D link, the model's KV bytes and layers. Without a host tier
// it leaves v3 as it is, so a run with tiers off is unchanged. A storage
// tier below host adds its link, so a decoder's storage answer is costed.
func (c *Config) withTiers(v kvc.V3Config) kvc.V3Config {
	if c.HiCache == nil || c.Profile == nil {
		return v
	}
	tc, err := kvc.TierCostOf(c.Profile, c.Link)
	if err != nil {
		return v // validated: a host tier needs the link
	}
	if b := c.HiCache.StorageBackend; b != "" {
		if l, err := c.Profile.StorageLink(b); err == nil { // validated with the engine's config
			tc.StorageBandwidth, tc.StorageSetupS = l.BandwidthBytes, l.SetupS
			tc.StorageBestEffort = c.HiCache.StoragePrefetchPolicy == "" || c.HiCache.StoragePrefetchPolicy == "best_effort"
			tc.StorageShared = c.HiCache.StorageShared
			if tc.StorageShared {
				tc.StoragePoolBandwidth = c.HiCache.StorageSharedBandwidth
			}
		}
	}
	if c.Mechanism == KVCacheCentric {
		// The decoders' queue order (sim.go, sessionConfig).
		tc.ShortestFirst, tc.BypassTokens = c.KVC.V3.PrefillOrder == "shortest", c.KVC.V3.PrefillBypassTokens
	}
	v.Tiers = tc
	return v
}
