package kvc

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
)

// The control plane's configuration: the mechanisms, the seed's code
// differences as explicit options (seed-inventory §5 Δ2–Δ5), and what the
// dispatcher needs to know of one request.

// Mechanism names a deployment (DESIGN §4).
type Mechanism string

const (
	MechPD   Mechanism = "pd-disaggregation" // naive PD
	MechColo Mechanism = "pd-colo"           // data-parallel colocated
	MechKVC  Mechanism = "kvcache-centric"   // KVC: direct-to-D, seed/reseed, fallbacks
)

// DefaultMaxPauseS is the router's default cap on a decoder's
// recommended_pause_ms, in seconds (the seed's --backpressure-max-pause-s).
const DefaultMaxPauseS = 2.0

// Gate says who checks τ_append and the session cap before a direct append.
type Gate string

const (
	GateWorker Gate = "worker" // the decoder's admission RPC decides (ours)
	GateRouter Gate = "router" // the router estimates before the RPC (the seed's code, Δ2)
)

// RejectReset says when a (session, decoder) reject count returns to zero.
type RejectReset string

const (
	ResetDirect RejectReset = "direct" // on a direct-to-D success only (the seed's code)
	ResetAny    RejectReset = "any"    // on any success on that decoder (the spec)
	ResetOff    RejectReset = "off"    // never (v1: a permanent blacklist, F8)
)

// Belief says how the router's picture of decoder residency changes.
type Belief string

const (
	BeliefTrack       Belief = "track"        // follows the workers' eviction reports
	BeliefNeverShrink Belief = "never-shrink" // never forgets (the seed, F9)
)

// DispatchConfig is the control plane's configuration for a run.
type DispatchConfig struct {
	Mechanism Mechanism
	Policy    Policy // decoder choice (Algorithm 1 is kv-aware)
	Options   Options
	// TauReject blacklists a decoder for a session after this many rejects
	// (0 = never); TauAppend is the largest direct append (tokens).
	TauReject int
	TauAppend int
	// MaxRetries is ε, the admission attempts after the first before the
	// fallback to plain PD; −1 takes |D|−1.
	MaxRetries  int
	SeedMinTurn int // turns before this one go plain PD (seed-filter-early-turn)
	Gate        Gate
	Reset       RejectReset
	// RejectWindowS: only a session's refusals by a decoder in the last
	// this many seconds count toward τ_reject (0 = all of them until a
	// reset): the seed's proposed sliding window (P8), so a blacklist
	// heals without a success it may never get.
	RejectWindowS float64
	Belief        Belief
	SessionCap    int // router-gate only: sessions believed on one decoder
	// Breaker guards each decoder against a failing transport (breaker.go).
	Breaker BreakerConfig
	// NoBackpressure ignores the decoders' recommended_pause_ms: no wait
	// and no -d-backpressure label from one (the seed's default,
	// --enable-backpressure off). MaxPauseS caps the wait in seconds when
	// on: 0 takes DefaultMaxPauseS; a negative cap is 0 (a refusal with a
	// pause is labelled backpressure but not waited for).
	NoBackpressure bool
	MaxPauseS      float64
	// SeedMaxInflight caps the seeds in flight to one decoder (the seed's
	// --kvcache-seed-max-inflight-decode; 0 = no cap): a decoder at the cap
	// is passed over for seeds, not for direct appends.
	SeedMaxInflight int
	// HomeHolds keeps a session on its decoder through a refusal there: a
	// turn the home decoder refuses, before the refusals blacklist it,
	// goes plain PD at once instead of along the retry chain, whose next
	// decoder would be seeded with the session and become its new home.
	// With it a session migrates only when its home is blacklisted, so at
	// most (|D|−1)·τ_reject times with the reset on, whatever ε; sessions
	// no decoder holds (first turns, evicted ones) keep the whole chain.
	HomeHolds bool
	// Peer holds the peer baselines' knobs (peers.go); BlockSize is the
	// tokens per block id, DecodeKVBlocks a decoder's pool in blocks.
	Peer           PeerConfig
	BlockSize      int
	DecodeKVBlocks int
	// V3 holds KVC v3's options (v3.go); the zero value is v2.
	V3 V3Config
	// Workers says what each worker can be asked to do (decoderpath.go);
	// its zero value, every worker everything, is the KVC extension
	// everywhere.
	Workers WorkerCaps
}

// ParseGate, ParseReset and ParseBelief check option values.
func ParseGate(s string) (Gate, error) {
	switch g := Gate(s); g {
	case GateWorker, GateRouter:
		return g, nil
	}
	return "", fmt.Errorf("unknown admission gate %q (want worker or router)", s)
}

func ParseReset(s string) (RejectReset, error) {
	switch r := RejectReset(s); r {
	case ResetDirect, ResetAny, ResetOff:
		return r, nil
	}
	return "", fmt.Errorf("unknown reject reset %q (want direct, any or off)", s)
}

func ParseBelief(s string) (Belief, error) {
	switch b := Belief(s); b {
	case BeliefTrack, BeliefNeverShrink:
		return b, nil
	}
	return "", fmt.Errorf("unknown residency belief %q (want track or never-shrink)", s)
}

// Request is what the dispatcher needs to know of one request.
type Request struct {
	Session string
	// SessionNum is the caller's number for Session, 0 for none
	// (engine.Request.SessionNum): passed on to PeerConfig.DecodeCached.
	SessionNum int64
	Turn       int
	Blocks     []uint64 // read until Accepted; the router's belief copies what it keeps
	// SharedBlocks promises that Blocks are never written again, so the
	// router's belief keeps them instead of copying them (the simulator's
	// frozen session chains; radix.Tree.InsertShared).
	SharedBlocks bool
	Input        int
	Output       int
	// Avoid lists decoders (or colocated workers) not to use for this
	// request when another will do: the ones whose failures it is being
	// retried after.
	Avoid []int
	// Parent is the session a sub-agent's session was spawned from
	// (parent.go): its decoder is preferred while Session has none.
	Parent string
}

// SessionKey names a session to the dispatcher: its id and the caller's
// number for it, 0 for none (Request.SessionNum; engine.SessionKey). The
// dispatcher files its session records under it: by number, in a slice,
// when there is one. A caller that numbers a session names it by key in
// every call (the ...Key methods); the gateway numbers none.
type SessionKey = idtable.Key

func (r *Request) key() SessionKey { return SessionKey{ID: r.Session, Num: r.SessionNum} }

func (r *Request) avoids(w int) bool {
	for _, a := range r.Avoid {
		if a == w {
			return true
		}
	}
	return false
}

// Defaults is the control plane's default configuration for a mechanism:
// Algorithm 1 routing, τ_reject 3, τ_append 8192, one admission attempt per
// decoder, seeds from the first turn, the worker's admission gate, resets
// on a direct success and a residency belief that follows the workers (the
// flags' defaults; the gateway and tests start from it).
func Defaults(m Mechanism) DispatchConfig {
	return DispatchConfig{Mechanism: m, Policy: PolicyKVAware, TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1,
		Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack}
}
