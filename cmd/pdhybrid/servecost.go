package main

import (
	"cmp"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// serveCostFlags name the engine profile of the workers a gateway fronts:
// KVC v4's stall budget, the tier costing of answers that name host
// tokens and the 2026 rivals' estimates turn prompt tokens into seconds
// with it, through the same kvc functions the simulator uses
// (kvc.StallCostOf, kvc.TierCostOf).
// serve's --model is already the name /v1/models answers, so the built-in
// model is --profile-model.
type serveCostFlags struct {
	model, hardware, profile, link string
	chunk                          int
	// The decoders' storage tier (HiCache L3), which a storage answer's
	// tier costing prices: a backend preset, or an explicit link.
	storage, prefetch    string
	storageGBps, setupMs float64
	// poolGBps is the decoders' shared storage pool's aggregate bandwidth
	// (their up --hicache-storage-shared-bandwidth), with which a storage
	// answer's storage_queue_ms is priced.
	poolGBps float64
}

var serveCostFlagNames = []string{"profile-model", "hardware", "profile", "chunk-tokens", "link",
	"hicache-storage-backend", "hicache-storage-prefetch-policy", "hicache-storage-bandwidth", "hicache-storage-setup-ms",
	"hicache-storage-shared-bandwidth"}

var (
	storageBWRange    = above(0).upTo(1e6).is("a bandwidth in GB/s").orZero("the backend's")
	storageSetupRange = between(0, 1e4).is("a number of milliseconds")
)

func (f *serveCostFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "profile-model", "qwen3-30b-a3b", "kvcache-centric, pd-ppd, pd-deflect: the built-in model `name` the workers run, whose engine profile prices KVC v4's stall budget (--tpot-slo-ms), a decoder's host-tier answer (load-back against reseed) and the rivals' TTFT and stall estimates, as in the simulator; pdhybrid worker's --model")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "kvcache-centric, pd-ppd, pd-deflect: the built-in hardware `name` the workers run on (h100-80g, h200-141g), for the same cost model; pdhybrid worker's --hardware")
	fs.StringVar(&f.profile, "profile", "", "kvcache-centric, pd-ppd, pd-deflect: the workers' model/hardware profile JSON `file`, replacing --profile-model/--hardware (docs/engine.md)")
	fs.IntVar(&f.chunk, "chunk-tokens", 0, "kvcache-centric, pd-ppd, pd-deflect: the workers' chunked-prefill budget in `tokens` (SGLang --chunked-prefill-size), which the stall cost counts a step overhead per chunk of; 0 = the profile's (SGLang's 8192 where it names none)")
	fs.StringVar(&f.link, "link", "rdma-400g", "kvcache-centric: the profile's `link` P→D KV travels over, which tier costing prices a reseed with (rdma-400g, tcp-loopback, nvlink); pdhybrid worker's --link")
	fs.StringVar(&f.storage, "hicache-storage-backend", "", "kvcache-centric: the decoders' storage KV tier (SGLang HiCache L3; pdhybrid worker's --hicache-storage-backend), whose link tier costing prices a decoder's storage answer with (a prefetch storage→host, then the load-back, against a reseed through P): `mooncake` (37.5 GB/s, 100 µs setup) or hf3fs (6.25 GB/s, 1 ms), the profile's storage link where it names one; unset (and no --hicache-storage-bandwidth): storage answers are not costed, their tokens count as cached")
	fs.StringVar(&f.prefetch, "hicache-storage-prefetch-policy", "best_effort", "kvcache-centric, with a storage link: the decoders' `policy` (pdhybrid worker's --hicache-storage-prefetch-policy): best_effort (a turn admitted at once has received nothing: its storage tokens are costed as computed), wait_complete or timeout (costed as a whole prefetch)")
	fs.Float64Var(&f.storageGBps, "hicache-storage-bandwidth", 0, "kvcache-centric: the decoders' storage link bandwidth in `GB/s` (10^9 bytes/s), replacing --hicache-storage-backend's, or naming a storage link without one; 0 = the backend's")
	fs.Float64Var(&f.poolGBps, "hicache-storage-shared-bandwidth", 0, "kvcache-centric, with a storage link: the decoders' shared storage pool's aggregate bandwidth in `GB/s` (10^9 bytes/s; up --hicache-storage-shared-bandwidth), which tier costing prices a storage answer's prefetch with, after the time the pool is booked ahead (the answer's storage_queue_ms, worker contract 1.4), as in the simulator; 0 = unlimited, the queue not priced")
	fs.Float64Var(&f.setupMs, "hicache-storage-setup-ms", 0, "kvcache-centric, with --hicache-storage-bandwidth: the storage link's setup latency in `milliseconds` ≥ 0 (replacing the backend's); 0 = the backend's, or none without one")
}

func (f *serveCostFlags) check(ck *checks) {
	ck.num("chunk-tokens", between(1, 1<<22).is("a number of tokens").orZero("the profile's"))
	if ck.set("hicache-storage-backend") {
		ck.oneOf("hicache-storage-backend", model.StorageBackends...)
	}
	ck.oneOf("hicache-storage-prefetch-policy", engine.PrefetchPolicies...)
	ck.num("hicache-storage-bandwidth", storageBWRange)
	ck.num("hicache-storage-setup-ms", storageSetupRange)
	ck.only("hicache-storage-setup-ms", f.storageGBps > 0, "with --hicache-storage-bandwidth")
	ck.only("hicache-storage-prefetch-policy", f.storage != "" || f.storageGBps > 0, "with --hicache-storage-backend or --hicache-storage-bandwidth")
	ck.num("hicache-storage-shared-bandwidth", sharedBWRange)
	ck.only("hicache-storage-shared-bandwidth", f.storage != "" || f.storageGBps > 0, "with --hicache-storage-backend or --hicache-storage-bandwidth")
	if ck.set("profile") {
		ck.only("profile-model", false, "without --profile (the profile names its model)")
		ck.only("hardware", false, "without --profile (the profile names its hardware)")
	}
}

// costs loads the profile and builds the control plane's cost model: the
// stall cost always, the tier cost when the profile has a host link (a
// seed answer names host tokens only from a worker with a host tier).
func (f *serveCostFlags) costs() (kvc.StallCost, kvc.TierCost, error) {
	sf := simFlags{model: f.model, hardware: f.hardware, profile: f.profile}
	p, err := sf.loadProfile()
	if err != nil {
		return kvc.StallCost{}, kvc.TierCost{}, err
	}
	if _, ok := p.Links[f.link]; !ok {
		return kvc.StallCost{}, kvc.TierCost{}, usagef("--link %q: profile %s has no such link", f.link, p.Name)
	}
	chunk := f.chunk
	if chunk == 0 {
		chunk = 8192
		if p.Server != nil {
			chunk = cmp.Or(p.Server.ChunkedPrefillSize, 8192)
		}
	}
	tiers, _ := kvc.TierCostOf(p, f.link) // no host link: tier costing off
	if err := f.storageLink(p, &tiers); err != nil {
		return kvc.StallCost{}, kvc.TierCost{}, err
	}
	return kvc.StallCostOf(p, chunk), tiers, nil
}

// storageLink gives the tier cost the decoders' storage link, as the
// simulator's run has it (sim.Config.withTiers): the backend's (the
// profile's storage link or the datasheet preset), with the explicit
// bandwidth and setup over it. No backend and no bandwidth: none (storage
// answers not costed).
func (f *serveCostFlags) storageLink(p *model.Profile, tc *kvc.TierCost) error {
	var l model.Link
	if f.storage != "" {
		var err error
		if l, err = p.StorageLink(f.storage); err != nil {
			return usagef("--hicache-storage-backend: %v", err)
		}
	}
	if f.storageGBps > 0 {
		l.BandwidthBytes = f.storageGBps * 1e9
		if f.setupMs > 0 || f.storage == "" {
			l.SetupS = f.setupMs / 1000
		}
	}
	if l.BandwidthBytes <= 0 {
		return nil
	}
	tc.StorageBandwidth, tc.StorageSetupS = l.BandwidthBytes, l.SetupS
	tc.StorageBestEffort = f.prefetch == "" || f.prefetch == "best_effort"
	tc.StoragePoolBandwidth = f.poolGBps * 1e9
	return nil
}
