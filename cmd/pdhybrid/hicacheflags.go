package main

import (
	"math"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// hicacheFlags are SGLang HiCache's flags, under SGLang's names, for sim,
// bench, sweep (as knobs) and the emulated worker: a host KV tier below
// every worker's prefix cache (engine/hicache.go, docs/engine.md).
type hicacheFlags struct {
	enabled bool
	ratio   float64
	sizeGB  float64
	policy  string
	idle    bool
	trimH   bool
	// The storage tier below host (engine/storage.go).
	storage    string
	storageGB  float64
	prefetchPo string
	shared     bool
	sharedGBps float64
}

var (
	hicacheRatioRange = above(1).upTo(1000).is("a multiple of the HBM KV pool")
	hicacheSizeRange  = above(0).upTo(1 << 20).orZero("size by --hicache-ratio").is("a number of GB")
	storageSizeRange  = above(0).upTo(1 << 30).orZero("4 host pools").is("a number of GB")
	sharedBWRange     = above(0).upTo(1e6).orZero("unlimited").is("a bandwidth in GB/s")
)

func (f *hicacheFlags) register(fs *pflag.FlagSet, who string) {
	fs.BoolVar(&f.enabled, "enable-hierarchical-cache", false, who+": a host-memory KV tier below each worker's prefix cache, as SGLang HiCache's L2: KV evicted from HBM is demoted to host, a later prompt loads it back over the GPU's PCIe link (the profile's host-pcie5) overlapped layer by layer with its prefill, the host pool keeps its own LRU (SGLang --enable-hierarchical-cache; off by default)")
	fs.Float64Var(&f.ratio, "hicache-ratio", engine.DefaultHiCacheRatio, "with --enable-hierarchical-cache: host KV pool size as a `multiple` of the worker's HBM KV pool, in (1, 1000] (SGLang --hicache-ratio)")
	fs.Float64Var(&f.sizeGB, "hicache-size", 0, "with --enable-hierarchical-cache: host KV pool size per worker in `GB` (10^9 bytes), overriding --hicache-ratio; it must hold more than the HBM pool (SGLang --hicache-size); 0 = by --hicache-ratio")
	fs.StringVar(&f.policy, "hicache-write-policy", "write_through", "with --enable-hierarchical-cache: when HBM's KV is copied to host: `write_through` (everything cached, at once), write_through_selective (KV reused from HBM) or write_back (only what HBM evicts, at eviction) (SGLang --hicache-write-policy)")
	fs.BoolVar(&f.idle, "hicache-demote-idle", false, "with --enable-hierarchical-cache: a session trimmed from HBM while none of its requests is on the worker (between turns: tool calls, think time) is written to host first under every write policy, so it is demoted, not dropped (write_through and write_back already do; it changes write_through_selective); off by default")
	fs.StringVar(&f.storage, "hicache-storage-backend", "", "with --enable-hierarchical-cache: a storage KV tier below each host tier, as SGLang HiCache's L3: what host takes is written on to it, a prompt it holds beyond HBM and host is prefetched to host (bytes over the profile's storage link) and loaded as a host hit: `mooncake` (Mooncake store, remote DRAM over RDMA, 37.5 GB/s) or hf3fs (3FS, remote NVMe, 6.25 GB/s a worker); datasheet figures, a profile link storage-mooncake or storage-3fs overrides them (SGLang --hicache-storage-backend; off by default)")
	fs.Float64Var(&f.storageGB, "hicache-storage-size", 0, "with --hicache-storage-backend: the storage KV pool per worker in `GB` (10^9 bytes), more than the host pool (pdhybrid's; SGLang sizes it in the backend's own config); 0 = 4 host pools")
	fs.StringVar(&f.prefetchPo, "hicache-storage-prefetch-policy", "best_effort", "with --hicache-storage-backend: how long a prefill waits for its storage prefetch: `best_effort` (not at all: what has arrived is loaded, the rest computed), wait_complete (all of it) or timeout (all, or 1 s + 0.25 s per 1024 tokens) (SGLang --hicache-storage-prefetch-policy)")
	fs.BoolVar(&f.shared, "hicache-storage-shared", false, "with --hicache-storage-backend (sim, bench, sweep): one storage pool for every worker of the run, as SGLang's L3 is one store for the cluster, sized by --hicache-storage-size (set it: the default is 4 host pools of one worker); each worker reads it over its own link, all of them sharing --hicache-storage-shared-bandwidth; off by default: a pool per worker")
	fs.Float64Var(&f.sharedGBps, "hicache-storage-shared-bandwidth", 0, "with --hicache-storage-shared: the shared pool's aggregate bandwidth in `GB/s` (10^9 bytes/s), which every worker's prefetches share, first booked first served, each also limited by its own link (a store's NICs or disks serve all its clients: 3FS's README reads 40 GiB/s for all its KVCache clients together); 0 = unlimited")
	fs.BoolVar(&f.trimH, "hicache-trim-host-first", false, "with --enable-hierarchical-cache: a session trim that must free HBM takes, of the 8 least recently used sessions it may trim, the oldest whose KV the host tier already holds (its next turn loads back instead of recomputing); LRU when none is held there; off by default")
}

// check validates the flags; the tier applies to every mechanism (a worker
// without a prefix cache, a naive-PD decoder, has nothing to demote).
func (f *hicacheFlags) check(ck *checks) {
	ck.num("hicache-ratio", hicacheRatioRange)
	ck.num("hicache-size", hicacheSizeRange)
	ck.oneOf("hicache-write-policy", engine.WritePolicies...)
	for _, n := range []string{"hicache-ratio", "hicache-size", "hicache-write-policy", "hicache-demote-idle", "hicache-trim-host-first"} {
		ck.only(n, f.enabled, "with --enable-hierarchical-cache")
	}
	ck.only("hicache-storage-backend", f.enabled, "with --enable-hierarchical-cache")
	if ck.set("hicache-storage-backend") {
		ck.oneOf("hicache-storage-backend", model.StorageBackends...)
	}
	ck.num("hicache-storage-size", storageSizeRange)
	ck.oneOf("hicache-storage-prefetch-policy", engine.PrefetchPolicies...)
	for _, n := range []string{"hicache-storage-size", "hicache-storage-prefetch-policy", "hicache-storage-shared"} {
		ck.only(n, f.enabled && f.storage != "", "with --hicache-storage-backend")
	}
	ck.num("hicache-storage-shared-bandwidth", sharedBWRange)
	ck.only("hicache-storage-shared-bandwidth", f.shared, "with --hicache-storage-shared")
	if ck.set("hicache-ratio") && ck.set("hicache-size") {
		ck.fail("--hicache-ratio and --hicache-size: give one (--hicache-size overrides the ratio)")
	}
}

// checkWithProfile checks what the tier needs of the profile: a host link,
// and a host pool larger than HBM's (pool tokens per worker).
func (f *hicacheFlags) checkWithProfile(ck *checks, p *model.Profile, pool int64) {
	if !f.enabled {
		return
	}
	if _, err := p.HostLink(); err != nil {
		ck.fail("--enable-hierarchical-cache: %v", err)
	}
	if f.storage != "" {
		if _, err := p.StorageLink(f.storage); err != nil {
			ck.fail("--hicache-storage-backend: %v", err)
		}
	}
	if f.sizeGB > 0 && pool > 0 {
		if host := int64(f.sizeGB*1e9) / p.Model.KVBytesPerToken(); host <= pool {
			ck.fail("--hicache-size %v: a host pool of %d tokens is no larger than the HBM pool's %d; want more than %.1f GB",
				f.sizeGB, host, pool, float64(pool*p.Model.KVBytesPerToken())/1e9)
		}
	}
}

// config is the engine's tier for these flags.
func (f *hicacheFlags) config() engine.HiCacheConfig {
	if !f.enabled {
		return engine.HiCacheConfig{}
	}
	wp, _ := engine.ParseWritePolicy(f.policy) // checked
	hc := engine.HiCacheConfig{Enabled: true, Ratio: f.ratio, SizeBytes: int64(math.Round(f.sizeGB * 1e9)), WritePolicy: wp, DemoteIdle: f.idle, TrimHostFirst: f.trimH}
	if f.storage != "" {
		pp, _ := engine.ParsePrefetchPolicy(f.prefetchPo) // checked
		hc.Storage = engine.StorageConfig{Enabled: true, Backend: f.storage, SizeBytes: int64(math.Round(f.storageGB * 1e9)), Prefetch: pp}
	}
	return hc
}
