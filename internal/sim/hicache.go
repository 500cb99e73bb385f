package sim

import (
	"cmp"
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// HiCache is a run's host KV tier: every worker with a prefix cache gets
// one (SGLang --enable-hierarchical-cache; engine/hicache.go). Naive PD's
// decoders have no prefix cache and so none.
type HiCache struct {
	// Ratio sizes each host pool as a multiple of its worker's HBM pool
	// (--hicache-ratio); SizeBytes, when > 0, in bytes (--hicache-size).
	Ratio     float64 `json:"ratio,omitempty"`
	SizeBytes int64   `json:"size_bytes,omitempty"`
	// WritePolicy is write_through, write_through_selective or write_back.
	WritePolicy string `json:"write_policy"`
	// DemoteIdle: --hicache-demote-idle (engine.HiCacheConfig.DemoteIdle).
	DemoteIdle bool `json:"demote_idle,omitempty"`
	// TrimHostFirst: --hicache-trim-host-first (engine.HiCacheConfig.TrimHostFirst).
	TrimHostFirst bool `json:"trim_host_first,omitempty"`
	// StorageBackend, when set, gives each host tier a storage tier below
	// it (--hicache-storage-backend: mooncake, hf3fs; engine/storage.go)
	// of StorageSizeBytes (0: engine.DefaultStorageRatio host pools),
	// prefetched under StoragePrefetchPolicy.
	StorageBackend        string `json:"storage_backend,omitempty"`
	StorageSizeBytes      int64  `json:"storage_size_bytes,omitempty"`
	StoragePrefetchPolicy string `json:"storage_prefetch_policy,omitempty"`
	// StorageShared: one storage pool for every worker of the run
	// (--hicache-storage-shared), as SGLang's L3 is one store.
	StorageShared bool `json:"storage_shared,omitempty"`
	// StorageSharedBandwidth is the shared pool's aggregate bandwidth in
	// bytes/s, which every worker's prefetches share
	// (--hicache-storage-shared-bandwidth; engine.StoragePool); 0 unlimited.
	StorageSharedBandwidth float64 `json:"storage_shared_bandwidth,omitempty"`
}

// engineConfig is the tier as the engine takes it (none for nil).
func (h *HiCache) engineConfig() (engine.HiCacheConfig, error) {
	if h == nil {
		return engine.HiCacheConfig{}, nil
	}
	wp, err := engine.ParseWritePolicy(h.WritePolicy)
	if err != nil {
		return engine.HiCacheConfig{}, fmt.Errorf("sim: hierarchical cache: %w", err)
	}
	hc := engine.HiCacheConfig{Enabled: true, Ratio: h.Ratio, SizeBytes: h.SizeBytes, WritePolicy: wp, DemoteIdle: h.DemoteIdle, TrimHostFirst: h.TrimHostFirst}
	if h.StorageBackend != "" {
		pp, err := engine.ParsePrefetchPolicy(cmp.Or(h.StoragePrefetchPolicy, "best_effort"))
		if err != nil {
			return engine.HiCacheConfig{}, fmt.Errorf("sim: hicache storage: %w", err)
		}
		hc.Storage = engine.StorageConfig{Enabled: true, Backend: h.StorageBackend, SizeBytes: h.StorageSizeBytes, Prefetch: pp}
		if h.StorageShared {
			hc.Storage.Pool = engine.NewStoragePool() // every worker's config carries this one
			hc.Storage.Pool.BandwidthBytes = h.StorageSharedBandwidth
		}
	}
	return hc, nil
}

// HostStats are one worker's host-tier counters at the end of a run
// (summary.json's workers.NAME.host; absent without a tier).
type HostStats struct {
	PoolTokens    int64   `json:"pool_tokens"`
	LoadedTokens  int64   `json:"loaded_tokens"` // prompt tokens loaded back instead of computed
	Loads         int64   `json:"loads"`         // prefill steps that loaded
	LoadS         float64 `json:"load_s"`        // link time of those loads (mostly hidden under compute)
	WrittenTokens int64   `json:"written_tokens"`
	WriteSkips    int64   `json:"write_skips"` // writes the full host pool could not take
	EvictedTokens int64   `json:"evicted_tokens"`
	// Storage is the storage tier below (absent without one).
	Storage *StorageStats `json:"storage,omitempty"`
}

// StorageStats are one worker's storage-tier counters (engine/storage.go).
type StorageStats struct {
	PoolTokens       int64   `json:"pool_tokens"`
	Prefetches       int64   `json:"prefetches"`
	PrefetchedTokens int64   `json:"prefetched_tokens"` // into host, then loaded as host hits
	WaitS            float64 `json:"wait_s"`            // prefill steps' waits for prefetches
	WrittenTokens    int64   `json:"written_tokens"`
	WriteSkips       int64   `json:"write_skips"`
	EvictedTokens    int64   `json:"evicted_tokens"`
}

// hostStats reads a worker's host tier (nil without one).
func hostStats(w *engine.Worker) *HostStats {
	if w.HostCapacity() == 0 {
		return nil
	}
	st := w.Stats()
	return &HostStats{PoolTokens: w.HostCapacity(), LoadedTokens: st.HostLoadedTokens, Loads: st.HostLoads, LoadS: st.HostLoadS,
		WrittenTokens: st.HostWrittenTokens, WriteSkips: st.HostWriteSkips, EvictedTokens: st.HostEvictedTokens, Storage: storageStats(w)}
}

func storageStats(w *engine.Worker) *StorageStats {
	if w.StorageCapacity() == 0 {
		return nil
	}
	st := w.Stats()
	return &StorageStats{PoolTokens: w.StorageCapacity(), Prefetches: st.StoragePrefetches, PrefetchedTokens: st.StoragePrefetchedTokens,
		WaitS: st.StorageWaitS, WrittenTokens: st.StorageWrittenTokens, WriteSkips: st.StorageWriteSkips, EvictedTokens: st.StorageEvictedTokens}
}
