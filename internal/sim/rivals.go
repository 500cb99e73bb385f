package sim

import (
	"fmt"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The 2026 rivals as baselines (kvc/rivals.go; docs/peer-baselines.md, "The
// 2026 rivals"): PPD (arXiv 2603.13358) and load-aware prefill deflection
// (arXiv 2607.02043), on the peers' cluster (decoders with SGLang's decode
// radix cache and local prefill). The deflection's decoders hold its TBT
// SLO while they prefill as KVC v4's workers hold theirs
// (engine.Config.SliceTPOTS): the paper's chunk-size search, per step.

// The rivals are the control plane's mechanisms of the same names.
const (
	PDPPD     = Mechanism(kvc.MechPPD)
	PDDeflect = Mechanism(kvc.MechDeflect)
)

// Rival holds the rivals' knobs (Peer.Rival).
type Rival struct {
	// TTFTSLOMs and TPOTSLOMs are the SLOs the rivals route by, in ms
	// (0 = the defaults, 2,000 and 50: the tables' goodput SLOs); the
	// deflection reads the TPOT SLO as its TBT SLO.
	TTFTSLOMs float64 `json:"ttft_slo_ms,omitempty"`
	TPOTSLOMs float64 `json:"tpot_slo_ms,omitempty"`
	// TTFTWeight and TPOTWeight are PPD's SLO weights (0 and 0 = 1 and 1).
	TTFTWeight float64 `json:"ppd_ttft_weight,omitempty"`
	TPOTWeight float64 `json:"ppd_tpot_weight,omitempty"`
}

func (r *Rival) defaults(m Mechanism) {
	if !kvc.Mechanism(m).IsRival() {
		return
	}
	d := kvc.RivalConfig{TTFTSLOS: r.TTFTSLOMs / 1000, TPOTSLOS: r.TPOTSLOMs / 1000, TTFTWeight: r.TTFTWeight, TPOTWeight: r.TPOTWeight}.Defaults()
	r.TTFTSLOMs, r.TPOTSLOMs = d.TTFTSLOS*1000, d.TPOTSLOS*1000
	if m == PDPPD {
		r.TTFTWeight, r.TPOTWeight = d.TTFTWeight, d.TPOTWeight
	}
}

func (r *Rival) validate() error {
	for name, v := range map[string]float64{"ttft_slo_ms": r.TTFTSLOMs, "tpot_slo_ms": r.TPOTSLOMs,
		"ppd_ttft_weight": r.TTFTWeight, "ppd_tpot_weight": r.TPOTWeight} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e7 {
			return fmt.Errorf("sim: rival %s %v, expected a finite number in [0, 1e7]", name, v)
		}
	}
	return nil
}

// rivalConfig is the control plane's view: the SLOs in seconds and the
// engine's cost model.
func (c *Config) rivalConfig() kvc.RivalConfig {
	var r Rival
	if c.Peer.Rival != nil {
		r = *c.Peer.Rival
	}
	return kvc.RivalConfig{TTFTSLOS: r.TTFTSLOMs / 1000, TPOTSLOS: r.TPOTSLOMs / 1000, TTFTWeight: r.TTFTWeight,
		TPOTWeight: r.TPOTWeight, Cost: c.stallCost()}
}

// workerSliceTPOTS is the TPOT a worker holds its decode batch to while it
// prefills: KVC v4's, or the deflection's TBT SLO.
func (c *Config) workerSliceTPOTS() float64 {
	if c.Mechanism == PDDeflect && c.Peer.Rival != nil {
		return c.Peer.Rival.TPOTSLOMs / 1000
	}
	return c.sliceTPOTS()
}
