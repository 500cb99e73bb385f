package sim

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// KVCv3 holds KVC v3's options (kvc/v3.go, docs/kvc-v3.md); the zero value
// is KVC v2. Preset names the preset the command line started from ("v2"
// or "v3"), for the record.
type KVCv3 struct {
	Preset string `json:"preset,omitempty"`
	// DBudgetTokens: the most prefill tokens queued on one decoder for it
	// to prefill a seed, reseed or large append itself (0 = never, v2).
	DBudgetTokens int `json:"d_prefill_budget_tokens"`
	// MarginTokens: the decoder's queue with the request, plus this, must
	// not exceed the prefill worker's with it.
	MarginTokens int `json:"local_prefill_margin_tokens"`
	// ColdRoute: a session no decoder holds goes to the decoder with the
	// least queued prefill work less its believed overlap (P7).
	ColdRoute bool `json:"cold_route_least_loaded"`
	// ColdInflightTokens: each request in flight on a decoder adds this
	// many tokens to its cold-routing cost.
	ColdInflightTokens int `json:"cold_route_inflight_tokens"`
	// CountTransfer: the placement counts the P→D transfer of a prompt
	// through P, in prefill tokens from the profile's link and timing.
	CountTransfer bool `json:"count_transfer"`
	// Inline: the first admission check rides on the request (no round
	// trip before it; a refusal or seed answer pays one).
	Inline bool `json:"inline_admission"`
	// LocalFallback: a request every decoder refused for space queues on
	// the least-loaded decoder (within the budget) instead of plain PD.
	LocalFallback bool `json:"local_fallback"`
	// TypedRejects: no-space refusals do not count toward τ_reject (P8).
	TypedRejects bool `json:"typed_rejects"`
	// WholeOnP: with LocalFallback, such a request is served whole on the
	// prefill worker when its queue is the shorter.
	WholeOnP bool `json:"whole_on_p"`
	// ColdOnP: with WholeOnP, a new session may start whole on P too.
	ColdOnP bool `json:"cold_on_p"`
	// PHosts: with WholeOnP, a new session starts whole on P while P
	// serves fewer requests whole than every decoder has in flight.
	PHosts bool `json:"p_hosts_sessions"`
	// BalanceStarts: new sessions spread by the count each GPU started
	// (cold routing's ties; with PHosts, P's equal share while its prefill
	// queue is at most PHostQueueTokens).
	BalanceStarts    bool `json:"balance_session_starts"`
	PHostQueueTokens int  `json:"p_host_queue_tokens"`
	// BalanceHalfLifeS: with BalanceStarts, cold routing's ties go first
	// to the decoder with the fewest recent requests, at this half-life.
	BalanceHalfLifeS float64 `json:"balance_half_life_s"`
	// PrefillBypassTokens: a KVC decoder's step that continues a long
	// chunked prefill also takes waiting requests whose uncached prompt
	// fits in this many tokens (engine.SessionConfig.BypassTokens).
	PrefillBypassTokens int `json:"prefill_bypass_tokens"`
	// PPrefillBypassTokens: the same on KVC's prefill workers, so that a
	// hosted session's short turn rides past a long prompt P prefills for
	// a decoder (engine.Config.PrefillBypassTokens; 0 = none).
	PPrefillBypassTokens int `json:"p_prefill_bypass_tokens,omitempty"`
	// PPrefillBypassAhead: those requests run in a step of their own
	// before the long prompt's next chunk (engine.Config.PrefillBypassAhead).
	PPrefillBypassAhead bool `json:"p_prefill_bypass_ahead,omitempty"`
	// PrefillOrder: how KVC's workers (prefill and decode) admit their
	// waiting requests: "fcfs" (arrival order, SGLang's; "" too) or
	// "shortest" (fewest uncached tokens first; engine.Config.ShortestFirst),
	// with PrefillMaxWaitS bounding the wait (0 = no bound).
	PrefillOrder    string  `json:"prefill_order,omitempty"`
	PrefillMaxWaitS float64 `json:"prefill_max_wait_s"`
	// TPOTSLOMs is KVC v4's decode isolation (kvc/v4.go): every GPU's
	// decode batch is held to this TPOT in milliseconds, each prefill
	// placed there drawing from a stall budget derived from it (0 = off).
	TPOTSLOMs float64 `json:"tpot_slo_ms,omitempty"`
	// IsolationMaxPWaitS: with TPOTSLOMs, a prefill over its decoder's
	// stall budget still runs there when the prefill worker has more than
	// this many seconds of prefill queued (0 = never).
	IsolationMaxPWaitS float64 `json:"isolation_max_p_wait_s,omitempty"`
	// IsolationTTFTSLOMs: with TPOTSLOMs, a prefill over its decoder's
	// budget runs there anyway when through P it would miss this TTFT
	// (ms) and on the decoder it would meet it (0 = never).
	IsolationTTFTSLOMs float64 `json:"isolation_ttft_slo_ms,omitempty"`
	// IsolationSoonerRatio: with IsolationTTFTSLOMs, kvc.DecodeIsolation.SoonerRatio.
	IsolationSoonerRatio float64 `json:"isolation_sooner_ratio,omitempty"`
	// IsolationLongPrefillS: with IsolationTTFTSLOMs, kvc.DecodeIsolation.LongPrefillS.
	IsolationLongPrefillS float64 `json:"isolation_long_prefill_s,omitempty"`
	// IsolationStayClassTokens: with TPOTSLOMs, kvc.DecodeIsolation.StayClassTokens.
	IsolationStayClassTokens int `json:"isolation_stay_class_tokens,omitempty"`
	// IsolationHomeReseed: with TPOTSLOMs, kvc.DecodeIsolation.HomeReseed.
	IsolationHomeReseed bool `json:"isolation_home_reseed,omitempty"`
	// ColdTrimWeight: with ColdRoute, kvc.V3Config.ColdTrimWeight.
	ColdTrimWeight float64 `json:"cold_route_trim_weight,omitempty"`
}

func (v *KVCv3) validate() error {
	if v.Preset != "" && v.Preset != "v2" && v.Preset != "v3" && v.Preset != "v4" {
		return fmt.Errorf("sim: unknown KVC preset %q (want v2, v3 or v4)", v.Preset)
	}
	if !(v.IsolationMaxPWaitS >= 0 && v.IsolationMaxPWaitS <= 86400) {
		return fmt.Errorf("sim: KVC isolation_max_p_wait_s %v, expected seconds in [0, 86400] (0 = never)", v.IsolationMaxPWaitS)
	}
	if !(v.IsolationSoonerRatio >= 0 && v.IsolationSoonerRatio <= 1000) {
		return fmt.Errorf("sim: KVC isolation_sooner_ratio %v, expected a factor in [0, 1000] (0 = off)", v.IsolationSoonerRatio)
	}
	if !(v.IsolationLongPrefillS >= 0 && v.IsolationLongPrefillS <= 86400) {
		return fmt.Errorf("sim: KVC isolation_long_prefill_s %v, expected seconds in [0, 86400] (0 = never)", v.IsolationLongPrefillS)
	}
	if !(v.TPOTSLOMs >= 0 && v.TPOTSLOMs <= 1e6) {
		return fmt.Errorf("sim: KVC tpot_slo_ms %v, expected milliseconds in [0, 1000000] (0 = off)", v.TPOTSLOMs)
	}
	if v.DBudgetTokens < 0 || v.DBudgetTokens > 1<<24 {
		return fmt.Errorf("sim: KVC d_prefill_budget_tokens %d, expected tokens in [0, 16777216] (0 = off)", v.DBudgetTokens)
	}
	if v.MarginTokens < -(1<<24) || v.MarginTokens > 1<<24 {
		return fmt.Errorf("sim: KVC local_prefill_margin_tokens %d, expected tokens in [-16777216, 16777216]", v.MarginTokens)
	}
	if !(v.BalanceHalfLifeS >= 0 && v.BalanceHalfLifeS <= 86400) {
		return fmt.Errorf("sim: KVC balance_half_life_s %v, expected seconds in [0, 86400]", v.BalanceHalfLifeS)
	}
	if v.PrefillOrder != "" && v.PrefillOrder != "fcfs" && v.PrefillOrder != "shortest" {
		return fmt.Errorf("sim: KVC prefill_order %q, want fcfs or shortest", v.PrefillOrder)
	}
	if !(v.PrefillMaxWaitS >= 0 && v.PrefillMaxWaitS <= 86400) {
		return fmt.Errorf("sim: KVC prefill_max_wait_s %v, expected seconds in [0, 86400]", v.PrefillMaxWaitS)
	}
	if v.PrefillBypassTokens < 0 || v.PrefillBypassTokens > 1<<24 {
		return fmt.Errorf("sim: KVC prefill_bypass_tokens %d, expected tokens in [0, 16777216]", v.PrefillBypassTokens)
	}
	if v.IsolationStayClassTokens < 0 || v.IsolationStayClassTokens > 1<<24 {
		return fmt.Errorf("sim: KVC isolation_stay_class_tokens %d, expected tokens in [0, 16777216] (0 = one queue)", v.IsolationStayClassTokens)
	}
	if v.PPrefillBypassTokens < 0 || v.PPrefillBypassTokens > 1<<24 {
		return fmt.Errorf("sim: KVC p_prefill_bypass_tokens %d, expected tokens in [0, 16777216]", v.PPrefillBypassTokens)
	}
	if v.PHostQueueTokens < 0 || v.PHostQueueTokens > 1<<24 {
		return fmt.Errorf("sim: KVC p_host_queue_tokens %d, expected tokens in [0, 16777216]", v.PHostQueueTokens)
	}
	if !(v.ColdTrimWeight >= 0 && v.ColdTrimWeight <= 1000) {
		return fmt.Errorf("sim: KVC cold_route_trim_weight %v, expected a factor in [0, 1000] (0 = off)", v.ColdTrimWeight)
	}
	if v.ColdInflightTokens < 0 || v.ColdInflightTokens > 1<<24 {
		return fmt.Errorf("sim: KVC cold_route_inflight_tokens %d, expected tokens in [0, 16777216]", v.ColdInflightTokens)
	}
	return nil
}

// config is the control plane's view; rtt is the admission round trip an
// inline check's refusal pays, xfer the transfer cost of a token in prefill
// tokens, cost the engine's prefill cost for v4's stall budget.
func (v *KVCv3) config(rtt, xfer float64, cost kvc.StallCost) kvc.V3Config {
	if !v.CountTransfer {
		xfer = 0
	}
	return kvc.V3Config{Isolation: kvc.DecodeIsolation{TPOTSLOS: v.TPOTSLOMs / 1000, Cost: cost, MaxPWaitS: v.IsolationMaxPWaitS, TTFTSLOS: v.IsolationTTFTSLOMs / 1000, SoonerRatio: v.IsolationSoonerRatio, LongPrefillS: v.IsolationLongPrefillS, StayClassTokens: v.IsolationStayClassTokens, HomeReseed: v.IsolationHomeReseed}, TransferTokens: xfer, DBudgetTokens: v.DBudgetTokens, Margin: v.MarginTokens, ColdRoute: v.ColdRoute, ColdInflightTokens: v.ColdInflightTokens, ColdTrimWeight: v.ColdTrimWeight, Inline: v.Inline, RTTS: rtt,
		LocalFallback: v.LocalFallback, TypedRejects: v.TypedRejects, WholeOnP: v.WholeOnP, ColdOnP: v.ColdOnP, PHosts: v.PHosts,
		BalanceStarts: v.BalanceStarts, PHostQueueTokens: v.PHostQueueTokens, BalanceHalfLifeS: v.BalanceHalfLifeS}
}

// sliceTPOTS is the TPOT KVC v4's workers hold their decode batches to
// while they prefill (engine.Config.SliceTPOTS): --tpot-slo-ms, for KVC
// only.
func (c *Config) sliceTPOTS() float64 {
	if c.Mechanism != KVCacheCentric {
		return 0
	}
	return c.KVC.V3.TPOTSLOMs / 1000
}

// pPrefillBypass is the bypass room of a KVC prefill worker
// (engine.Config.PrefillBypassTokens): --p-prefill-bypass-tokens, for
// KVC's prefill workers only.
func (c *Config) pPrefillBypass(role engine.Role) int {
	if c.Mechanism != KVCacheCentric || role != engine.RolePrefill {
		return 0
	}
	return c.KVC.V3.PPrefillBypassTokens
}

// pPrefillBypassAhead: --p-prefill-bypass-ahead, for KVC's prefill workers.
func (c *Config) pPrefillBypassAhead(role engine.Role) bool {
	return c.pPrefillBypass(role) > 0 && c.KVC.V3.PPrefillBypassAhead
}
