package sim

import (
	"fmt"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The peers as baselines (kvc/peers.go; docs/peer-baselines.md): Dynamo's
// conditional disaggregation, llm-d's prefix-based P/D decider and SGLang's
// decode radix cache, each run on the cluster naive PD and KVC run on. Their
// decoders have SGLang's decode radix cache (engine.Config.DecodeRadix); the
// first two also prefill locally on the decoder when their rule says so,
// charged on D's own scheduler interleaved with its decode batch, as KVC's
// direct appends are.

// The peers are the control plane's mechanisms of the same names.
const (
	PDConditional   = Mechanism(kvc.MechConditional)
	PDPrefixDecider = Mechanism(kvc.MechPrefixDecider)
	PDDecodeRadix   = Mechanism(kvc.MechDecodeRadix)
)

// isPeer reports whether m is a peer baseline.
func (m Mechanism) isPeer() bool { return kvc.Mechanism(m).IsPeer() }

// Peer holds the peers' knobs, each defaulting to its peer's own default.
type Peer struct {
	// Strategy is Dynamo's conditional-disaggregation policy: isl_bounding
	// (its default), prefill_load or isl_or_load.
	Strategy string `json:"conditional_strategy,omitempty"`
	// EffISLThreshold (tokens) and EffISLRatio: isl_bounding keeps a
	// request local when prompt − decoder overlap is below both (Dynamo:
	// 2048 and 0.7).
	EffISLThreshold int     `json:"eff_isl_threshold,omitempty"`
	EffISLRatio     float64 `json:"eff_isl_ratio_threshold,omitempty"`
	// PrefillBusy: prefill_load's busy line, in multiples of the prefill
	// worker's batch budget (--chunk-tokens): Dynamo's router_queue_threshold,
	// default 4.0, times max_num_batched_tokens.
	PrefillBusy float64 `json:"prefill_busy_threshold,omitempty"`
	// DecodeBusy is the decode-busy gate: no bypass when the decoder's
	// active blocks with this request's exceed this share of its pool (0 =
	// off, Dynamo's default).
	DecodeBusy float64 `json:"decode_busy_threshold,omitempty"`
	// NonCachedTokens and PromptTokens: llm-d's prefix-based-pd-decider
	// (tokens). NonCachedTokens −1 in a config means 0, "disaggregation
	// disabled" (0 takes the default, 512).
	NonCachedTokens int `json:"non_cached_tokens,omitempty"`
	PromptTokens    int `json:"prompt_tokens,omitempty"`
	// ApproxOverlap: pd-conditional's router estimates each decoder's cache
	// from what it sent (Dynamo's --no-router-kv-events) instead of the
	// decoders' own KV events (its default).
	ApproxOverlap bool `json:"approx_overlap,omitempty"`
	// AffinityTTLS: pd-conditional's session affinity, seconds a binding
	// lasts since its last use (Dynamo's --router-session-affinity-ttl-secs;
	// 0 = off, its default).
	AffinityTTLS float64 `json:"session_affinity_ttl_s,omitempty"`
	// Rival holds the 2026 rivals' knobs (rivals.go); nil for the others,
	// so their run files stay as they were.
	Rival *Rival `json:"rival,omitempty"`
}

// DefaultNonCachedTokens is the threshold llm-d's decider README configures
// (llm-d/llm-d-router pkg/epp/framework/plugins/scheduling/profilehandler/
// disagg/README.md, "nonCachedTokens: 512"); the plugin's own default, 0,
// disables disaggregation.
const DefaultNonCachedTokens = 512

func (p *Peer) defaults(m Mechanism) {
	if kvc.Mechanism(m).IsRival() {
		if p.Rival == nil {
			p.Rival = &Rival{}
		}
		p.Rival.defaults(m)
	}
	switch m {
	case PDConditional:
		if p.Strategy == "" {
			p.Strategy = string(kvc.StrategyISL)
		}
		if p.EffISLThreshold == 0 {
			p.EffISLThreshold = 2048
		}
		if p.EffISLRatio == 0 {
			p.EffISLRatio = 0.7
		}
		if p.PrefillBusy == 0 {
			p.PrefillBusy = 4
		}
	case PDPrefixDecider:
		if p.NonCachedTokens == 0 {
			p.NonCachedTokens = DefaultNonCachedTokens
		}
	}
}

func (p *Peer) validate() error {
	if p.Rival != nil {
		if err := p.Rival.validate(); err != nil {
			return err
		}
	}
	if p.Strategy != "" {
		if _, err := kvc.ParseStrategy(p.Strategy); err != nil {
			return fmt.Errorf("sim: %v", err)
		}
	}
	for name, v := range map[string]float64{"eff_isl_ratio_threshold": p.EffISLRatio, "prefill_busy_threshold": p.PrefillBusy,
		"decode_busy_threshold": p.DecodeBusy, "session_affinity_ttl_s": p.AffinityTTLS} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("sim: peer %s %v, expected a finite number ≥ 0", name, v)
		}
	}
	if p.EffISLRatio > 1 || p.DecodeBusy > 1 {
		return fmt.Errorf("sim: peer eff_isl_ratio_threshold %v and decode_busy_threshold %v must be shares in [0, 1]", p.EffISLRatio, p.DecodeBusy)
	}
	if p.EffISLThreshold < 0 || p.NonCachedTokens < -1 || p.PromptTokens < 0 {
		return fmt.Errorf("sim: peer thresholds out of range (eff_isl_threshold %d ≥ 0, non_cached_tokens %d ≥ −1, prompt_tokens %d ≥ 0)",
			p.EffISLThreshold, p.NonCachedTokens, p.PromptTokens)
	}
	return nil
}

// config is the control plane's view of the knobs.
func (p *Peer) config(chunk int) kvc.PeerConfig {
	st, _ := kvc.ParseStrategy(p.Strategy)
	return kvc.PeerConfig{Strategy: st, EffISLThreshold: p.EffISLThreshold, EffISLRatio: p.EffISLRatio,
		PrefillBusy: p.PrefillBusy, PrefillBatchTokens: chunk, DecodeBusy: p.DecodeBusy,
		NonCachedTokens: max(p.NonCachedTokens, 0), PromptTokens: p.PromptTokens, AffinityTTLS: p.AffinityTTLS}
}

// kvEvents is a decoder's own answer to what it caches for a request (its
// KV events as Dynamo's router sees them), for pd-conditional.
func (s *Sim) kvEvents(d int, session string, num int64, blocks []uint64, input int) int {
	return s.workers[s.decodes[d]].CachedForKey(engine.SessionKey{ID: session, Num: num}, blocks, input)
}
