// Package sim is the discrete-event simulator: it replays a trace closed-loop
// per session against simulated workers (the engine model) under a virtual
// clock, routes with the control plane (kvc), and records per-request
// metrics, a summary and structural logs. Runs are deterministic: the same
// trace and config give byte-identical output.
package sim

import (
	"cmp"
	"fmt"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Mechanism names a deployment (DESIGN §4).
type Mechanism string

const (
	// PDDisaggregation is naive PD: prefill on P, whole-prompt KV transfer to
	// D, decode on D; D keeps nothing between turns.
	PDDisaggregation Mechanism = "pd-disaggregation"
	// PDColo is data-parallel colocated serving: each worker prefills and
	// decodes with its own radix prefix cache.
	PDColo Mechanism = "pd-colo"
	// KVCacheCentric is KVC: PD with session-aware decoders; a follow-up
	// turn appends directly on the decoder holding its session when the
	// decoder admits it, else it is seeded/reseeded through P, else plain PD.
	KVCacheCentric Mechanism = "kvcache-centric"
)

// Execution-mode labels for the baselines (DESIGN §5).
const (
	ModePDRouter  = "pd-disaggregation-router"
	ModeColoRoute = "dp-colo-router"
)

// ParseMechanism checks a mechanism name.
func ParseMechanism(s string) (Mechanism, error) {
	switch m := Mechanism(s); m {
	case PDDisaggregation, PDColo, KVCacheCentric, PDConditional, PDPrefixDecider, PDDecodeRadix, PDPPD, PDDeflect:
		return m, nil
	}
	return "", fmt.Errorf("unknown mechanism %q (want pd-disaggregation, pd-colo, kvcache-centric, pd-conditional, pd-prefix-decider, pd-decode-radix, pd-ppd or pd-deflect)", s)
}

// Config is everything a run needs besides the trace.
type Config struct {
	Name      string     `json:"name,omitempty"`
	Mechanism Mechanism  `json:"mechanism"`
	Policy    kvc.Policy `json:"policy"`
	// Topology: Prefill and Decode workers for PD; Colo workers for pd-colo.
	Prefill int `json:"prefill,omitempty"`
	Decode  int `json:"decode,omitempty"`
	Colo    int `json:"colo,omitempty"`

	Profile *model.Profile `json:"profile"`
	// Link names the profile's link KV travels over P→D (rdma-400g, ...).
	Link string `json:"link,omitempty"`
	// Memory fractions per role; 0 takes the profile's.
	PrefillMemFraction float64 `json:"prefill_mem_fraction,omitempty"`
	DecodeMemFraction  float64 `json:"decode_mem_fraction,omitempty"`
	ColoMemFraction    float64 `json:"colo_mem_fraction,omitempty"`

	ChunkTokens int  `json:"chunk_tokens"`
	MaxRunning  int  `json:"max_running"`
	MixedChunk  bool `json:"mixed_chunk"`
	// HiCache gives every worker with a prefix cache a host KV tier (nil:
	// none; hicache.go).
	HiCache *HiCache `json:"hicache,omitempty"`

	// Replay.
	TimeScale   float64 `json:"time_scale"`    // trace time is divided by this (2 = twice as fast)
	Concurrency int     `json:"concurrency"`   // max requests in flight; 0 = unlimited
	TimeoutS    float64 `json:"timeout_s"`     // per request, from send; 0 = none
	MaxInputLen int     `json:"max_input_len"` // longer prompts fail with cause; 0 = the model's max context
	IgnoreThink bool    `json:"ignore_think_time"`
	// OutputReuse is "all" (a turn's output KV serves the next turn's
	// prompt, as in live serving) or "sessions" (only where a KVC decoder
	// keeps the session: the seed's trace replays, engine SessionOutputOnly).
	OutputReuse string `json:"output_reuse"`

	// Routing score (kv-aware).
	Alpha  float64 `json:"alpha"`
	FloorK float64 `json:"floor_k"`

	// MaxBacklog stops the run (a StopError, partial results kept) when
	// this many requests are in flight or waiting at once: an overloaded
	// cluster's queues grow without bound, and so would the simulator's
	// memory (about 14 KB a waiting request). 0 takes DefaultMaxBacklog; a
	// negative value removes the limit.
	MaxBacklog int `json:"max_backlog"`
	// SessionIdleForgetS forgets a session idle (no request in flight or
	// waiting) for longer than this many simulated seconds, everywhere
	// the run keeps per-session records (forget.go), so memory follows the
	// live sessions; a later turn of it stops the run with a located
	// error. 0 forgets nothing.
	SessionIdleForgetS float64 `json:"session_idle_forget_s,omitempty"`
	// Warn, when set, is told of conditions a user watching the run should
	// know about as they arise (the same lines end in Summary.Warnings).
	Warn func(string) `json:"-"`

	// KVC holds the kvcache-centric mechanism's knobs.
	KVC KVC `json:"kvc"`
	// Peer holds the peer baselines' knobs (peers.go).
	Peer Peer `json:"peer"`

	// Transport faults (transport.go): a transfer unfinished this long after
	// it started fails its request (0 = never); PeerFailure is windowed (a
	// breaker per decoder in the control plane: BreakerFailures failures
	// within BreakerWindowS open it for BreakerCooldownS) or hair-trigger
	// (the seed: one timeout kills the P→D peer for the run).
	TransferTimeoutS float64 `json:"transfer_timeout_s"`
	PeerFailure      string  `json:"peer_failure"`
	BreakerFailures  int     `json:"breaker_failures"`
	BreakerWindowS   float64 `json:"breaker_window_s"`
	BreakerCooldownS float64 `json:"breaker_cooldown_s"`

	SLO             metrics.SLO `json:"slo"`
	SampleIntervalS float64     `json:"sample_interval_s"` // worker occupancy log period (sim seconds)
	Seed            uint64      `json:"seed"`
	// editDispatch edits the dispatcher's configuration before it is
	// built: the conformance suite runs a row's own (tests only).
	editDispatch func(*kvc.DispatchConfig)
	// recycle is what becomes of a finished request's record and dispatch
	// (recycle.go): reused for a later request (the default), poisoned and
	// checked instead (tests), or left to the collector (tests).
	recycle recycleMode
}

// DefaultMaxBacklog bounds the requests a run holds at once: `pdhybrid sim
// --synth-requests 1000000` (naive PD overloaded) stops at it after 2.4 s
// with a peak RSS of 1.4 GB, about 14 KB per waiting request.
const DefaultMaxBacklog = 100_000

// Defaults fills unset fields with documented defaults.
func (c *Config) Defaults() {
	if c.Policy == "" {
		c.Policy = kvc.PolicyDefault
		if c.Mechanism == KVCacheCentric || c.Mechanism.isPeer() {
			c.Policy = kvc.PolicyKVAware // Algorithm 1; the peers route by KV overlap
		}
	}
	c.KVC.defaults()
	c.Peer.defaults(c.Mechanism)
	if c.PeerFailure == "" {
		c.PeerFailure = PeerWindowed
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = 3
	}
	if c.BreakerWindowS == 0 {
		c.BreakerWindowS = 60
	}
	if c.BreakerCooldownS == 0 {
		c.BreakerCooldownS = 30
	}
	if c.Link == "" {
		c.Link = "rdma-400g"
	}
	// Chunk size and running cap: what SGLang would choose for the model on
	// the GPU, as the profile states it (model.Server), else SGLang's
	// generic defaults.
	var srv model.Server
	if c.Profile != nil && c.Profile.Server != nil {
		srv = *c.Profile.Server
	}
	if c.ChunkTokens == 0 {
		c.ChunkTokens = cmp.Or(srv.ChunkedPrefillSize, 8192)
	}
	if c.MaxRunning == 0 {
		c.MaxRunning = cmp.Or(srv.MaxRunningRequests, 128)
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if c.OutputReuse == "" {
		c.OutputReuse = OutputReuseAll
	}
	if c.Alpha == 0 {
		c.Alpha = 1
	}
	if c.MaxBacklog == 0 {
		c.MaxBacklog = DefaultMaxBacklog
	}
	if c.SampleIntervalS == 0 {
		c.SampleIntervalS = 1
	}
	if c.MaxInputLen == 0 && c.Profile != nil {
		c.MaxInputLen = c.Profile.Model.MaxContext
	}
}

// Validate reports the first thing that makes the config unusable.
// Output reuse (Config.OutputReuse).
const (
	OutputReuseAll      = "all"
	OutputReuseSessions = "sessions"
)

func (c *Config) Validate() error {
	if c.OutputReuse != OutputReuseAll && c.OutputReuse != OutputReuseSessions {
		return fmt.Errorf("sim: output reuse %q, want all or sessions", c.OutputReuse)
	}
	if c.Profile == nil {
		return fmt.Errorf("sim: no model profile")
	}
	switch c.Mechanism {
	case PDDisaggregation:
		if c.Prefill < 1 || c.Decode < 1 {
			return fmt.Errorf("sim: %s needs ≥ 1 prefill and ≥ 1 decode worker (got %d P, %d D)", c.Mechanism, c.Prefill, c.Decode)
		}
		if _, ok := c.Profile.Links[c.Link]; !ok {
			return fmt.Errorf("sim: profile %s has no link %q", c.Profile.Name, c.Link)
		}
	case KVCacheCentric:
		if c.Prefill < 1 || c.Decode < 1 {
			return fmt.Errorf("sim: %s needs ≥ 1 prefill and ≥ 1 decode worker (got %d P, %d D)", c.Mechanism, c.Prefill, c.Decode)
		}
		if _, ok := c.Profile.Links[c.Link]; !ok {
			return fmt.Errorf("sim: profile %s has no link %q", c.Profile.Name, c.Link)
		}
		if err := c.KVC.validate(); err != nil {
			return err
		}
		if err := c.checkKinds(); err != nil {
			return err
		}
	case PDConditional, PDPrefixDecider, PDDecodeRadix, PDPPD, PDDeflect:
		if c.Prefill < 1 || c.Decode < 1 {
			return fmt.Errorf("sim: %s needs ≥ 1 prefill and ≥ 1 decode worker (got %d P, %d D)", c.Mechanism, c.Prefill, c.Decode)
		}
		if _, ok := c.Profile.Links[c.Link]; !ok {
			return fmt.Errorf("sim: profile %s has no link %q", c.Profile.Name, c.Link)
		}
		if err := c.Peer.validate(); err != nil {
			return err
		}
	case PDColo:
		if c.Colo < 1 {
			return fmt.Errorf("sim: %s needs ≥ 1 colocated worker", c.Mechanism)
		}
	default:
		_, err := ParseMechanism(string(c.Mechanism))
		return err
	}
	if _, err := kvc.ParsePolicy(string(c.Policy)); err != nil {
		return err
	}
	if c.TimeScale <= 0 {
		return fmt.Errorf("sim: time scale %v, expected > 0", c.TimeScale)
	}
	if c.Concurrency < 0 || c.TimeoutS < 0 || c.MaxInputLen < 0 {
		return fmt.Errorf("sim: concurrency, timeout and max input length must be ≥ 0")
	}
	if !(c.SessionIdleForgetS >= 0) || math.IsInf(c.SessionIdleForgetS, 0) {
		return fmt.Errorf("sim: session idle forget %v s, expected a finite number of seconds ≥ 0 (0 = never)", c.SessionIdleForgetS)
	}
	if c.PeerFailure != PeerWindowed && c.PeerFailure != PeerHairTrigger {
		return fmt.Errorf("sim: unknown peer-failure mode %q (want windowed or hair-trigger)", c.PeerFailure)
	}
	if !(c.TransferTimeoutS >= 0) || !(c.BreakerWindowS > 0) || !(c.BreakerCooldownS >= 0) || c.BreakerFailures < 0 {
		return fmt.Errorf("sim: transfer timeout %v s and breaker (%d failures in %v s, cooldown %v s) out of range",
			c.TransferTimeoutS, c.BreakerFailures, c.BreakerWindowS, c.BreakerCooldownS)
	}
	if c.SampleIntervalS <= 0 {
		return fmt.Errorf("sim: sample interval %v, expected > 0", c.SampleIntervalS)
	}
	if _, err := c.HiCache.engineConfig(); err != nil {
		return err
	}
	return nil
}
