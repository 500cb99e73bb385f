package main

import (
	"cmp"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
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
}

var serveCostFlagNames = []string{"profile-model", "hardware", "profile", "chunk-tokens", "link"}

func (f *serveCostFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "profile-model", "qwen3-30b-a3b", "kvcache-centric, pd-ppd, pd-deflect: the built-in model `name` the workers run, whose engine profile prices KVC v4's stall budget (--tpot-slo-ms), a decoder's host-tier answer (load-back against reseed) and the rivals' TTFT and stall estimates, as in the simulator; pdhybrid worker's --model")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "kvcache-centric, pd-ppd, pd-deflect: the built-in hardware `name` the workers run on (h100-80g, h200-141g), for the same cost model; pdhybrid worker's --hardware")
	fs.StringVar(&f.profile, "profile", "", "kvcache-centric, pd-ppd, pd-deflect: the workers' model/hardware profile JSON `file`, replacing --profile-model/--hardware (docs/engine.md)")
	fs.IntVar(&f.chunk, "chunk-tokens", 0, "kvcache-centric, pd-ppd, pd-deflect: the workers' chunked-prefill budget in `tokens` (SGLang --chunked-prefill-size), which the stall cost counts a step overhead per chunk of; 0 = the profile's (SGLang's 8192 where it names none)")
	fs.StringVar(&f.link, "link", "rdma-400g", "kvcache-centric: the profile's `link` P→D KV travels over, which tier costing prices a reseed with (rdma-400g, tcp-loopback, nvlink); pdhybrid worker's --link")
}

func (f *serveCostFlags) check(ck *checks) {
	ck.num("chunk-tokens", between(1, 1<<22).is("a number of tokens").orZero("the profile's"))
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
	return kvc.StallCostOf(p, chunk), tiers, nil
}
