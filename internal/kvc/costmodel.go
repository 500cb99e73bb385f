package kvc

import "github.com/pdhybrid/pdhybrid/internal/model"

// The control plane's cost model from the engine's profile, one function
// for every caller: the simulator builds v4's stall budget and tier
// costing from its run's profile, and the gateway from the profile of the
// workers it fronts (serve --model/--hardware/--profile), so that both
// place a prefill by the same seconds.

// StallCtxTokens is the context of the decode step v4's budget is measured
// against: an agentic turn's (the WEKA sessions' median prompt is ~30K).
const StallCtxTokens = 32768

// StallCostOf is the engine's prefill cost as v4's stall budget counts it:
// the profile's prefill terms, the workers' chunk budget, and one decode
// step of a single sequence at StallCtxTokens of context (the budget is
// the TPOT left over that step). A nil profile is the zero cost.
func StallCostOf(p *model.Profile, chunkTokens int) StallCost {
	if p == nil {
		return StallCost{}
	}
	t := p.Timing
	return StallCost{OverheadS: t.PrefillStepS(), PerTokenS: t.PrefillPerTokenS, AttnS: t.PrefillAttnS,
		ChunkTokens: chunkTokens, DecodeStepS: t.DecodeStepS(p.Model, 1, StallCtxTokens)}
}

// TierCostOf is the engine's cost of moving a prefix between tiers: the
// host link the engine loads back over (model.Profile.HostLink), the P→D
// link named xferLink, the model's KV bytes and layers. It fails when the
// profile has no host link.
func TierCostOf(p *model.Profile, xferLink string) (TierCost, error) {
	host, err := p.HostLink()
	if err != nil {
		return TierCost{}, err
	}
	xfer := p.Links[xferLink]
	return TierCost{KVBytesPerToken: p.Model.KVBytesPerToken(), Layers: p.Model.Layers,
		HostBandwidth: host.BandwidthBytes, HostSetupS: host.SetupS, XferBandwidth: xfer.BandwidthBytes, XferSetupS: xfer.SetupS}, nil
}
