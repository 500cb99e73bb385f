package main

import (
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// rivalFlags are the 2026 rivals' knobs (docs/peer-baselines.md, "The 2026
// rivals"): the SLOs both route by and PPD's weights.
type rivalFlags struct {
	ttftSLO, tpotSLO       float64
	ttftWeight, tpotWeight float64
}

var (
	rivalFlagNames = []string{"rival-ttft-slo-ms", "rival-tpot-slo-ms"}
	ppdFlagNames   = []string{"ppd-ttft-weight", "ppd-tpot-weight"}
)

const (
	ppdSrc     = "PPD, Li et al., \"Not All Prefills Are Equal: PPD Disaggregation for Multi-turn LLM Serving\", arXiv 2603.13358"
	deflectSrc = "load-aware prefill deflection, Bharadwaj et al., arXiv 2607.02043"
)

func (r *rivalFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&r.ttftSLO, "rival-ttft-slo-ms", 2000, "pd-ppd, pd-deflect: the TTFT SLO they route by, in `milliseconds` in (0, 1e7] (default 2000, the tables' goodput SLO): pd-deflect sends a request through P while P's estimated TTFT (its queue plus the prompt, from the profile's cost model) is within it, pd-ppd normalises its TTFT gain by it")
	fs.Float64Var(&r.tpotSLO, "rival-tpot-slo-ms", 50, "pd-ppd, pd-deflect: the TPOT SLO, in `milliseconds` in (0, 1e7] (default 50): pd-deflect's TBT SLO (a deflected prefill's chunks are sized so a step fits it, and its decoders hold it while they prefill), pd-ppd normalises the append's stall on the decode batch by it")
	fs.Float64Var(&r.ttftWeight, "ppd-ttft-weight", 1, "pd-ppd ("+ppdSrc+"): the `weight` of TTFT in its per-request choice, in [0, 1e7]: a turn-2+ request is append-prefilled on its decoder when weight × (TTFT via P − TTFT on D) / TTFT SLO ≥ --ppd-tpot-weight × (the append's stall / (output − 1)) / TPOT SLO (default 1)")
	fs.Float64Var(&r.tpotWeight, "ppd-tpot-weight", 1, "pd-ppd: the `weight` of TPOT in its per-request choice, in [0, 1e7] (default 1; "+deflectSrc+" has no weights)")
}

func (r *rivalFlags) check(ck *checks, rival, ppd bool) {
	ck.num("rival-ttft-slo-ms", above(0).upTo(1e7).is("milliseconds"))
	ck.num("rival-tpot-slo-ms", above(0).upTo(1e7).is("milliseconds"))
	ck.num("ppd-ttft-weight", between(0, 1e7).is("a weight"))
	ck.num("ppd-tpot-weight", between(0, 1e7).is("a weight"))
	for _, n := range rivalFlagNames {
		ck.only(n, rival, "to --mechanism pd-ppd or pd-deflect")
	}
	for _, n := range ppdFlagNames {
		ck.only(n, ppd, "to --mechanism pd-ppd")
	}
}

func (p *peerFlags) checkRival(ck *checks, rival, ppd bool) { p.rival.check(ck, rival, ppd) }

// serveArgs are the flags up gives each gateway of a rival: the SLOs,
// PPD's weights, and the workers' hardware for the cost model the rivals
// price prompts with.
func (r *rivalFlags) serveArgs(mech, hardware string) []string {
	args := []string{"--rival-ttft-slo-ms", fmtFloat(r.ttftSLO), "--rival-tpot-slo-ms", fmtFloat(r.tpotSLO), "--hardware", hardware}
	if mech == "pd-ppd" {
		args = append(args, "--ppd-ttft-weight", fmtFloat(r.ttftWeight), "--ppd-tpot-weight", fmtFloat(r.tpotWeight))
	}
	return args
}

// rivalConfig is the run's rival config.
func (p *peerFlags) rivalConfig() *sim.Rival {
	r := p.rival
	return &sim.Rival{TTFTSLOMs: r.ttftSLO, TPOTSLOMs: r.tpotSLO, TTFTWeight: r.ttftWeight, TPOTWeight: r.tpotWeight}
}
