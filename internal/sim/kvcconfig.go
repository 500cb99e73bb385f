package sim

import (
	"fmt"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// KVC is the kvcache-centric mechanism's configuration: the seed's knobs
// (seed-inventory §2.3–2.4), with the seed's v2 defaults, and the options
// that make each difference between the seed's code and its spec explicit.
type KVC struct {
	// TauAppend is τ_append, the largest direct append in tokens
	// (--direct-max-uncached-tokens; v2: 8192, v0/v1: 2048).
	TauAppend int `json:"direct_max_uncached_tokens"`
	// TauReject blacklists a decoder for a session after this many
	// admission rejects (τ_reject; 0 takes the seed's 3; -1 = never).
	TauReject int `json:"migration_reject_threshold"`
	// MaxAttempts is the admission attempts (1 + ε retries) before plain
	// PD; 0 = one per decoder (ε = |D|−1, the spec).
	MaxAttempts int `json:"max_attempts"`
	// SeedMinTurn sends turns before it through plain PD (1 = none).
	SeedMinTurn int `json:"seed_min_turn"`
	// Gate, Reset and Belief: worker|router, direct|any|off,
	// track|never-shrink (DispatchConfig).
	Gate  string `json:"admission_gate"`
	Reset string `json:"reject_reset"`
	// RejectWindowS: only refusals of the last this many seconds count
	// toward τ_reject (0 = all since the last reset).
	RejectWindowS float64 `json:"reject_window_s"`
	Belief        string  `json:"residency_belief"`
	// SessionCap is the most sessions one decoder keeps (0 = none).
	SessionCap int `json:"session_cap"`
	// Trim (idle|any), Eviction (session|block|tail), LowWatermark (share of the
	// pool a trim frees beyond the need) and the trim's scheduler stall.
	Trim     string `json:"trim"`
	Eviction string `json:"eviction"`
	// TailMaxWaiting: with Eviction "tail", a trim cuts a tail only while
	// at most this many requests wait in the decoder's queue.
	TailMaxWaiting     int     `json:"tail_trim_max_waiting"`
	LowWatermark       float64 `json:"low_watermark"`
	TrimStallS         float64 `json:"trim_stall_s"`
	TrimStallPerTokenS float64 `json:"trim_stall_per_token_s"`
	// AdmissionRTTS is the admission RPC's round trip (the seed measured
	// about 6 ms).
	AdmissionRTTS float64 `json:"admission_rtt_s"`
	// DToP is the D→P snapshot sync mode (off, passive, on-evict, active;
	// dtop.go); DToPDeltaTokens the active mode's growth between pushes;
	// SnapshotBufBytes each prefill worker's snapshot buffer (the seed's
	// SGLANG_SNAPSHOT_LINK_BUF_BYTES, 8 GiB).
	// PrefillBackup is release-after-transfer or capacity-backup
	// (engine/backup.go).
	PrefillBackup string `json:"prefill_backup_policy"`
	// PrefillPriorityEviction makes prefill workers evict the prompts of
	// seeds and reseeds (a decoder keeps the session) before plain-PD
	// prompts (engine/priority.go; the seed's
	// --kvcache-prefill-priority-eviction).
	PrefillPriorityEviction bool `json:"prefill_priority_eviction"`
	// SeedMaxInflight caps seeds in flight per decoder (0 = none).
	SeedMaxInflight int `json:"seed_max_inflight_decode"`
	// HomeHolds sends a turn its session's decoder refuses plain PD at
	// once, the session staying pinned there (kvc.DispatchConfig).
	HomeHolds bool `json:"home_holds"`
	// Backpressure is on or off ("" takes on; the seed's
	// --enable-backpressure was off by default): when on, a decoder's
	// admission reply carries recommended_pause_ms once the KV it holds
	// reaches BackpressureHighWater of its pool (0 takes 0.95) or its queue
	// is long (engine.Worker's pauseHint), and the router waits that long,
	// at most BackpressureMaxPauseMs (nil takes 2000, the seed's 2 s),
	// before its next attempt. BackpressureTransferQueue counts the
	// requests whose KV transfer to the decoder has not landed in the queue
	// the pause grows with (the seed's transfer_queue_depth).
	Backpressure              string   `json:"backpressure"`
	BackpressureHighWater     float64  `json:"backpressure_high_water"`
	BackpressureMaxPauseMs    *float64 `json:"backpressure_max_pause_ms"`
	BackpressureTransferQueue bool     `json:"backpressure_transfer_queue"`

	DToP             string `json:"d_to_p_sync"`
	DToPDeltaTokens  int    `json:"d_to_p_delta_tokens"`
	SnapshotBufBytes int64  `json:"snapshot_buf_bytes"`

	// V3 is KVC v3's options (kvcv3.go); the zero value is v2.
	V3 KVCv3 `json:"v3"`

	// DecodeWorkerKind is what the decoders offer (kvc.DecoderKinds):
	// one kind for all, or a comma-separated list with one per decoder;
	// "" is extended, the KVC extension (decoderkind.go).
	DecodeWorkerKind string `json:"decode_worker_kind,omitempty"`
	// PrefillWorkerKind is what the prefill workers offer: extended (the
	// whole-request extension and the snapshot ingest RPCs; "" is it) or
	// stock (neither: KVC v3 keeps sessions off P).
	PrefillWorkerKind string `json:"prefill_worker_kind,omitempty"`
}

func (k *KVC) defaults() {
	if k.TauAppend == 0 {
		k.TauAppend = 8192
	}
	if k.TauReject == 0 {
		k.TauReject = 3
	}
	if k.SeedMinTurn == 0 {
		k.SeedMinTurn = 1
	}
	if k.Gate == "" {
		k.Gate = string(kvc.GateWorker)
	}
	if k.Reset == "" {
		k.Reset = string(kvc.ResetDirect)
	}
	if k.Belief == "" {
		k.Belief = string(kvc.BeliefTrack)
	}
	if k.Trim == "" {
		k.Trim = "idle"
	}
	if k.Eviction == "" {
		k.Eviction = "session"
	}
	if k.AdmissionRTTS == 0 {
		k.AdmissionRTTS = 0.006
	}
	if k.PrefillBackup == "" {
		k.PrefillBackup = "release-after-transfer"
	}
	if k.DToP == "" {
		k.DToP = DToPOff
	}
	if k.DToPDeltaTokens == 0 {
		k.DToPDeltaTokens = 1024
	}
	if k.SnapshotBufBytes == 0 {
		k.SnapshotBufBytes = 8 << 30
	}
	if k.Backpressure == "" {
		k.Backpressure = "on"
	}
	if k.BackpressureHighWater == 0 {
		k.BackpressureHighWater = engine.DefaultHighWater
	}
	if k.BackpressureMaxPauseMs == nil {
		ms := 1000 * kvc.DefaultMaxPauseS
		k.BackpressureMaxPauseMs = &ms
	}
}

func (k *KVC) validate() error {
	if err := k.V3.validate(); err != nil {
		return err
	}
	if _, err := kvc.ParseGate(k.Gate); err != nil {
		return err
	}
	if _, err := kvc.ParseReset(k.Reset); err != nil {
		return err
	}
	if _, err := kvc.ParseBelief(k.Belief); err != nil {
		return err
	}
	if k.Trim != "idle" && k.Trim != "any" {
		return fmt.Errorf("sim: unknown trim policy %q (want idle or any)", k.Trim)
	}
	if k.PrefillBackup != "release-after-transfer" && k.PrefillBackup != "capacity-backup" {
		return fmt.Errorf("sim: unknown prefill backup policy %q (want release-after-transfer or capacity-backup)", k.PrefillBackup)
	}
	switch k.DToP {
	case DToPOff, DToPPassive, DToPOnEvict, DToPActive:
	default:
		return fmt.Errorf("sim: unknown D→P sync mode %q (want off, passive, on-evict or active)", k.DToP)
	}
	if k.DToPDeltaTokens < 1 || k.SnapshotBufBytes < 1 {
		return fmt.Errorf("sim: D→P delta %d tokens and snapshot buffer %d bytes must be ≥ 1", k.DToPDeltaTokens, k.SnapshotBufBytes)
	}
	if k.TailMaxWaiting < 0 {
		return fmt.Errorf("sim: KVC tail_trim_max_waiting %d, expected requests ≥ 0", k.TailMaxWaiting)
	}
	if k.Eviction != "session" && k.Eviction != "block" && k.Eviction != "tail" {
		return fmt.Errorf("sim: unknown eviction granularity %q (want session, block or tail)", k.Eviction)
	}
	for name, v := range map[string]float64{"reject window": k.RejectWindowS, "low watermark": k.LowWatermark, "trim stall": k.TrimStallS,
		"trim stall per token": k.TrimStallPerTokenS, "admission RTT": k.AdmissionRTTS} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("sim: KVC %s %v, expected a finite number ≥ 0", name, v)
		}
	}
	if k.Backpressure != "on" && k.Backpressure != "off" {
		return fmt.Errorf("sim: KVC backpressure %q, want on or off", k.Backpressure)
	}
	if hw := k.BackpressureHighWater; math.IsNaN(hw) || hw <= 0 || hw > 1 {
		return fmt.Errorf("sim: KVC backpressure high water %v, expected a share of the pool in (0, 1]", hw)
	}
	if p := k.BackpressureMaxPauseMs; p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0) {
		return fmt.Errorf("sim: KVC backpressure max pause %v ms, expected a finite number ≥ 0", *p)
	}
	if k.LowWatermark >= 1 {
		return fmt.Errorf("sim: KVC low watermark %v, expected a share of the pool < 1", k.LowWatermark)
	}
	if k.SeedMaxInflight < 0 {
		return fmt.Errorf("sim: KVC seed-max-inflight-decode %d, expected ≥ 0 (0 = no cap)", k.SeedMaxInflight)
	}
	if k.TauAppend < 1 || k.TauReject < -1 || k.SessionCap < 0 || k.SeedMinTurn < 1 || k.MaxAttempts < 0 {
		return fmt.Errorf("sim: KVC thresholds out of range (τ_append %d ≥ 1, τ_reject %d ≥ 0, session cap %d ≥ 0, seed-min-turn %d ≥ 1, attempts %d ≥ 0)",
			k.TauAppend, k.TauReject, k.SessionCap, k.SeedMinTurn, k.MaxAttempts)
	}
	return nil
}

// sessionConfig is what a KVC decoder's engine needs.
func (k *KVC) sessionConfig() engine.SessionConfig {
	sc := engine.SessionConfig{Enabled: true, Cap: k.SessionCap, LowWatermark: k.LowWatermark,
		TrimStallS: k.TrimStallS, TrimStallPerTokenS: k.TrimStallPerTokenS, ReportPaths: k.DToP == DToPOnEvict, DumpOnEvict: k.DToP == DToPOnEvict,
		NoPauseHint: k.Backpressure == "off", HighWater: k.BackpressureHighWater, PauseCountsTransfers: k.BackpressureTransferQueue}
	if k.Trim == "any" {
		sc.Trim = engine.TrimAny
	}
	sc.BypassTokens = k.V3.PrefillBypassTokens
	switch k.Eviction {
	case "block":
		sc.Eviction = engine.EvictBlock
	case "tail":
		sc.TrimTail, sc.TailMaxWaiting = true, k.TailMaxWaiting
	}
	return sc
}

// dispatchConfig is the control plane's configuration for the run.
func (c *Config) dispatchConfig() kvc.DispatchConfig {
	mech := kvc.MechPD
	switch c.Mechanism {
	case PDColo:
		mech = kvc.MechColo
	case KVCacheCentric:
		mech = kvc.MechKVC
	case PDConditional, PDPrefixDecider, PDDecodeRadix, PDPPD, PDDeflect:
		mech = kvc.Mechanism(c.Mechanism)
	}
	k := c.KVC
	gate, _ := kvc.ParseGate(k.Gate)
	reset, _ := kvc.ParseReset(k.Reset)
	belief, _ := kvc.ParseBelief(k.Belief)
	retries := -1 // |D|−1
	if k.MaxAttempts > 0 {
		retries = k.MaxAttempts - 1
	}
	tau := max(k.TauReject, 0) // kvc: 0 = never
	maxPause := 0.0            // kvc: 0 takes its default
	if p := k.BackpressureMaxPauseMs; p != nil {
		maxPause = *p / 1000
		if maxPause == 0 {
			maxPause = -1 // kvc: a cap of 0
		}
	}
	peer := c.Peer.config(c.ChunkTokens)
	peer.Rival = c.rivalConfig()
	return kvc.DispatchConfig{Mechanism: mech, Policy: c.Policy, TauReject: tau, TauAppend: k.TauAppend,
		MaxRetries: retries, SeedMinTurn: k.SeedMinTurn, Gate: gate, Reset: reset, RejectWindowS: k.RejectWindowS, Belief: belief, SessionCap: k.SessionCap,
		Breaker: c.breaker(), SeedMaxInflight: k.SeedMaxInflight, Peer: peer, V3: c.withTiers(k.V3.config(k.AdmissionRTTS, c.transferTokens(), c.stallCost())),
		NoBackpressure: k.Backpressure == "off", MaxPauseS: maxPause, HomeHolds: k.HomeHolds}
}

// transferTokens is what moving one token's KV over the run's link costs,
// in prefill tokens: the link's time per token over the prefill's.
func (c *Config) transferTokens() float64 {
	if c.Profile == nil || c.Profile.Timing.PrefillPerTokenS <= 0 {
		return 0
	}
	l, ok := c.Profile.Links[c.Link]
	if !ok || l.BandwidthBytes <= 0 {
		return 0
	}
	return float64(c.Profile.Model.KVBytesPerToken()) / l.BandwidthBytes / c.Profile.Timing.PrefillPerTokenS
}

// stallCost is the engine's prefill cost as KVC v4's stall budget counts
// it (kvc.StallCostOf), with the run's chunk budget.
func (c *Config) stallCost() kvc.StallCost { return kvc.StallCostOf(c.Profile, c.ChunkTokens) }

// breaker is the control plane's breaker: windowed mode only (with
// hair-trigger the seed's router knew nothing of dead peers).
func (c *Config) breaker() kvc.BreakerConfig {
	if c.PeerFailure != PeerWindowed {
		return kvc.BreakerConfig{}
	}
	return kvc.BreakerConfig{Failures: c.BreakerFailures, WindowS: c.BreakerWindowS, CooldownS: c.BreakerCooldownS}
}
