package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// kvcFlags are the kvcache-centric mechanism's knobs (DESIGN §5; the seed's
// names where it had one). Defaults are the seed's KVC v2.
type kvcFlags struct {
	tauAppend, tauReject, retries, seedMinTurn, sessionCap int
	seedMaxInflight, dToPDelta, tailMaxWaiting             int
	dToP, backup, decodeKind                               string
	snapshotBufGiB                                         float64
	gate, reset, belief, trim, eviction                    string
	lowWatermark, trimStall, trimStallTok, rttMs           float64
	rejectWindow                                           float64
	v3                                                     kvcV3Flags
	priorityEviction, homeHolds                            bool
	backpressure, bpTransfers                              bool
	bpHighWater, bpMaxPauseMs                              float64
}

var kvcFlagNames = []string{"direct-max-uncached-tokens", "migration-reject-threshold", "kvc-max-attempts", "seed-min-turn",
	"session-cap", "admission-gate", "reject-reset", "reject-window", "residency-belief", "trim", "eviction", "tail-trim-max-waiting", "low-watermark",
	"trim-stall", "trim-stall-per-token", "admission-rtt", "seed-max-inflight-decode", "d-to-p-sync", "d-to-p-delta-tokens",
	"snapshot-buf", "prefill-backup", "prefill-priority-eviction", "backpressure", "backpressure-high-water",
	"backpressure-max-pause-ms", "backpressure-transfer-queue", "home-holds", "decode-worker-kind"}

// The D→P flags' help, shared by sim (every mode) and serve (the modes the
// gateway runs).
const (
	dToPModeHelp     = "kvcache-centric: D→P snapshot sync `mode`: off, "
	dToPPassiveHelp  = "passive (on a reseed, from the decoder that last held the session: the seed's)"
	dToPOnEvictHelp  = "on-evict (a decoder pushes a session as it evicts it, and keeps its KV pinned until the dump ended)"
	dToPActiveHelp   = "active (a decoder pushes after direct appends once the session grew by --d-to-p-delta-tokens)"
	dToPDeltaHelp    = "kvcache-centric, --d-to-p-sync active: session growth in `tokens` between pushes"
	dToPDeltaDefault = 1024
)

func (k *kvcFlags) register(fs *pflag.FlagSet) {
	k.v3.register(fs)
	fs.IntVar(&k.tauAppend, "direct-max-uncached-tokens", 8192, "kvcache-centric: τ_append, the largest append in `tokens` a decoder takes directly (the seed's v0/v1: 2048)")
	fs.IntVar(&k.tauReject, "migration-reject-threshold", 3, "kvcache-centric: τ_reject, admission `rejects` of a session by a decoder before the router skips that decoder for it; 0 = never")
	fs.IntVar(&k.retries, "kvc-max-attempts", 0, "kvcache-centric: admission `attempts` (1 + ε retries) before falling back to plain PD; 0 = one per decoder (ε = decoders − 1, the spec)")
	fs.IntVar(&k.seedMinTurn, "seed-min-turn", 1, "kvcache-centric: first `turn` that may seed a decoder; earlier turns go plain PD")
	fs.IntVar(&k.sessionCap, "session-cap", 0, "kvcache-centric: most `sessions` one decoder keeps; 0 = no cap")
	fs.StringVar(&k.gate, "admission-gate", "worker", "kvcache-centric: who checks τ_append and the session cap: `worker` (the decoder's admission RPC) or router (the router's estimate, the seed's code)")
	fs.Float64Var(&k.rejectWindow, "reject-window", 0, "kvcache-centric: only a session's refusals by a decoder in the last this many `seconds`, in [0, 86400], count toward --migration-reject-threshold, so a blacklist heals without the success it may never get (the seed's proposed sliding window, P8); 0 = every refusal since the last reset (default 0)")
	fs.StringVar(&k.reset, "reject-reset", "direct", "kvcache-centric: when a (session, decoder) reject count returns to 0: `direct` (a direct-to-D success, the seed's code), any (any success, the spec), off (never, the seed's v1)")
	fs.BoolVar(&k.homeHolds, "home-holds", false, "kvcache-centric: a turn its session's decoder refuses (before the refusals reach τ_reject) goes plain PD at once, the session staying pinned there, instead of along the retry chain, whose next decoder would be seeded and become its home; a session then moves only when its decoder is blacklisted. Off: the spec's retry chain")
	fs.StringVar(&k.belief, "residency-belief", "track", "kvcache-centric: the router's picture of decoder residency: `track` (follows eviction reports) or never-shrink (the seed)")
	fs.StringVar(&k.trim, "trim", "idle", "kvcache-centric: which sessions a decoder's trim may evict: `idle` (no request running, the seed) or any")
	fs.StringVar(&k.eviction, "eviction", "session", "kvcache-centric: eviction `granularity`: session (a whole session at once, the seed), block (LRU nibbles the oldest blocks) or tail (a trim cuts the least recently used session's last blocks, as many as the room needs, and the session stays resident on the rest)")
	fs.IntVar(&k.tailMaxWaiting, "tail-trim-max-waiting", 8, "kvcache-centric, with --eviction tail: a trim cuts a session's tail only while at most this many `requests` wait in the decoder's queue, in [0, 1048576]; a longer queue wants whole sessions' KV and the trim frees whole sessions (default 8)")
	fs.Float64Var(&k.lowWatermark, "low-watermark", 0, "kvcache-centric: `share` of a decoder's pool a trim frees beyond the need, in [0, 1)")
	fs.Float64Var(&k.trimStall, "trim-stall", 0, "kvcache-centric: scheduler stall per trimmed session in `seconds` (the seed's trim blocked the scheduler loop)")
	fs.Float64Var(&k.trimStallTok, "trim-stall-per-token", 0, "kvcache-centric: scheduler stall per freed token in `seconds`")
	fs.IntVar(&k.seedMaxInflight, "seed-max-inflight-decode", 0, "kvcache-centric: most `seeds` in flight to one decoder; a decoder at it is passed over for seeds (not for direct appends); 0 = no cap (the seed's -1)")
	fs.StringVar(&k.dToP, "d-to-p-sync", "off", dToPModeHelp+dToPPassiveHelp+", "+dToPOnEvictHelp+", "+dToPActiveHelp)
	fs.IntVar(&k.dToPDelta, "d-to-p-delta-tokens", dToPDeltaDefault, dToPDeltaHelp)
	fs.Float64Var(&k.snapshotBufGiB, "snapshot-buf", 8, "kvcache-centric: each prefill worker's snapshot buffer in `GiB` (the seed's SGLANG_SNAPSHOT_LINK_BUF_BYTES)")
	fs.StringVar(&k.backup, "prefill-backup", "release-after-transfer", "kvcache-centric: what a prefill worker does with a seed's KV after the transfer: `release-after-transfer` (back to its radix cache) or capacity-backup (keep it pinned for the session: a seed-time snapshot of at most min(4, max(1, pool / (2·prompt))) sessions, the seed's)")
	fs.BoolVar(&k.priorityEviction, "prefill-priority-eviction", false, "kvcache-centric: a prefill worker's cache evicts first the prompts of seeds and reseeds, which a decoder keeps, before plain-PD prompts, whose sessions come back through P (the seed's --kvcache-prefill-priority-eviction, off by default and on in all its KVC runs)")
	fs.Float64Var(&k.rttMs, "admission-rtt", 6, "kvcache-centric: admission RPC round trip in `milliseconds` (the seed measured about 6)")
	fs.StringVar(&k.decodeKind, "decode-worker-kind", "extended", "kvcache-centric: what the decoders offer, and so the path KVC takes on them (docs/gateway.md): `kind` extended (the KVC extension: admission RPC, direct appends), conditional-agg+decode-radix (upstream SGLang's --disaggregation-decode-enable-conditional-agg with --disaggregation-decode-enable-radix-cache: do_local_prefill with the router's own admission), decode-radix (delta PD to the session's decoder), conditional-agg (alone: plain PD) or stock (session-affine plain PD); one for every decoder, or a comma-separated list with one per decoder")
	k.registerBackpressure(fs)
}

// registerBackpressure adds the backpressure flags: the decoders'
// recommended_pause_ms and the router's cap on it.
func (k *kvcFlags) registerBackpressure(fs *pflag.FlagSet) {
	fs.BoolVar(&k.backpressure, "backpressure", true, "kvcache-centric: a decoder's admission reply carries recommended_pause_ms once the KV it holds reaches --backpressure-high-water of its pool or its queue reaches a quarter of --max-running (10 ms per queued request, plus 10), and the router waits that long, at most --backpressure-max-pause-ms, before its next attempt (a refusal with a pause is labelled -d-backpressure); --backpressure=false: no pause and no such label (the seed's --enable-backpressure, off by default there)")
	fs.Float64Var(&k.bpHighWater, "backpressure-high-water", engine.DefaultHighWater, "kvcache-centric, with --backpressure: the `share` of a decoder's KV pool, in (0, 1], held for requests and sessions (its evictable prefix cache not counted) from which its admission replies carry a pause")
	fs.Float64Var(&k.bpMaxPauseMs, "backpressure-max-pause-ms", 1000*kvc.DefaultMaxPauseS, "kvcache-centric, with --backpressure: the router's cap on a decoder's recommended pause, in `milliseconds` ≥ 0 (the seed's --backpressure-max-pause-s 2.0); 0 = never wait (a refusal with a pause is still labelled -d-backpressure)")
	fs.BoolVar(&k.bpTransfers, "backpressure-transfer-queue", false, "kvcache-centric, with --backpressure: the queue a decoder's pause grows with also counts the requests whose KV transfer to it has not landed (the seed's transfer_queue_depth; off by default: ours counts the requests waiting for admission or a KV reservation)")
}

func (k *kvcFlags) check(ck *checks, on bool) {
	ck.num("direct-max-uncached-tokens", between(1, 1<<22).is("a number of tokens"))
	ck.num("migration-reject-threshold", between(0, 1e6).is("a number of rejects"))
	ck.num("seed-min-turn", between(1, 1e9).is("a turn number"))
	ck.num("session-cap", between(0, 1e9).is("a number of sessions"))
	ck.num("low-watermark", between(0, 1).openTop().is("a share of the pool"))
	ck.num("trim-stall", between(0, 3600).is("a number of seconds"))
	ck.num("trim-stall-per-token", between(0, 1).is("a number of seconds"))
	ck.num("admission-rtt", between(0, 60000).is("a number of milliseconds"))
	ck.num("kvc-max-attempts", between(1, 1024).is("a number of attempts").orZero("one per decoder"))
	ck.num("seed-max-inflight-decode", between(0, 1e6).is("a number of seeds").orZero("no cap"))
	ck.oneOf("d-to-p-sync", "off", "passive", "on-evict", "active")
	ck.num("d-to-p-delta-tokens", between(1, 1<<30).is("a number of tokens"))
	ck.num("snapshot-buf", above(0).upTo(1024).is("a number of GiB"))
	ck.only("d-to-p-delta-tokens", k.dToP == "active", "with --d-to-p-sync active")
	ck.only("snapshot-buf", k.dToP != "off", "with --d-to-p-sync")
	ck.num("tail-trim-max-waiting", between(0, 1<<20).is("a number of requests"))
	ck.only("tail-trim-max-waiting", k.eviction == "tail", "with --eviction tail")
	ck.oneOf("prefill-backup", "release-after-transfer", "capacity-backup")
	ck.oneOf("admission-gate", "worker", "router")
	ck.oneOf("reject-reset", "direct", "any", "off")
	ck.num("reject-window", between(0, 86400).is("seconds"))
	ck.oneOf("residency-belief", "track", "never-shrink")
	ck.oneOf("trim", "idle", "any")
	ck.oneOf("eviction", "session", "block", "tail")
	ck.num("backpressure-high-water", above(0).upTo(1).is("a share of the pool"))
	ck.num("backpressure-max-pause-ms", between(0, 3.6e6).is("a number of milliseconds").orZero("never wait"))
	for _, n := range []string{"backpressure-high-water", "backpressure-max-pause-ms", "backpressure-transfer-queue"} {
		ck.only(n, k.backpressure, "with --backpressure")
	}
	for _, kind := range strings.Split(k.decodeKind, ",") {
		if _, err := kvc.ParseDecoderKind(kind); err != nil {
			ck.fail("--decode-worker-kind %q: want one of %s, or a comma-separated list with one per decoder", k.decodeKind, strings.Join(kvc.DecoderKinds, ", "))
			break
		}
	}
	k.v3.check(ck)
	k.v3.checkSim(ck)
	k.v3.checkV4(ck)
	for _, n := range append(kvcFlagNames, kvcV3FlagNames...) {
		ck.only(n, on, "to --mechanism kvcache-centric")
	}
}

func (k *kvcFlags) config() sim.KVC {
	maxPause := k.bpMaxPauseMs
	tau := k.tauReject
	if tau == 0 {
		tau = -1 // the flag's 0 is "never"; the config's is "the default"
	}
	return sim.KVC{TauAppend: k.tauAppend, TauReject: tau, MaxAttempts: k.retries, SeedMinTurn: k.seedMinTurn,
		Gate: k.gate, Reset: k.reset, RejectWindowS: k.rejectWindow, Belief: k.belief, SessionCap: k.sessionCap, Trim: k.trim, Eviction: k.eviction, TailMaxWaiting: k.tailMaxWaiting,
		LowWatermark: k.lowWatermark, TrimStallS: k.trimStall, TrimStallPerTokenS: k.trimStallTok, AdmissionRTTS: k.rttMs / 1000,
		SeedMaxInflight: k.seedMaxInflight, PrefillBackup: k.backup, DToP: k.dToP, DToPDeltaTokens: k.dToPDelta,
		SnapshotBufBytes: int64(k.snapshotBufGiB * (1 << 30)), V3: k.v3.config(), PrefillPriorityEviction: k.priorityEviction,
		Backpressure: map[bool]string{true: "on", false: "off"}[k.backpressure], BackpressureHighWater: k.bpHighWater,
		BackpressureMaxPauseMs: &maxPause, BackpressureTransferQueue: k.bpTransfers, HomeHolds: k.homeHolds, DecodeWorkerKind: k.decodeKind}
}

// transportFlags are the P→D transport's fault knobs (any mechanism with a
// transfer: naive PD and KVC).
type transportFlags struct {
	timeout            float64
	peerFailure        string
	failures           int
	windowS, cooldownS float64
}

var transportFlagNames = []string{"transfer-timeout", "peer-failure", "breaker-failures", "breaker-window", "breaker-cooldown"}

func (x *transportFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&x.timeout, "transfer-timeout", 0, "fail a request whose P→D KV transfer is still unfinished after this many `seconds` (mooncake's default is 30; the seed raised it to 1800); 0 = never")
	fs.StringVar(&x.peerFailure, "peer-failure", "windowed", "what a transfer timeout does next: `windowed` (a circuit breaker per decoder routes around it and probes it back) or hair-trigger (the seed's mooncake: the P→D peer is dead for the rest of the run)")
	fs.IntVar(&x.failures, "breaker-failures", 3, "windowed: transfer `failures` within --breaker-window that open a decoder's breaker")
	fs.Float64Var(&x.windowS, "breaker-window", 60, "windowed: the breaker's window in `seconds`")
	fs.Float64Var(&x.cooldownS, "breaker-cooldown", 30, "windowed: `seconds` an open breaker holds traffic back before one probe")
}

func (x *transportFlags) check(ck *checks, transfers bool) {
	ck.num("transfer-timeout", between(0, 1e6).is("a number of seconds").orZero("never"))
	ck.oneOf("peer-failure", "windowed", "hair-trigger")
	ck.num("breaker-failures", between(1, 1e6).is("a number of failures"))
	ck.num("breaker-window", above(0).upTo(1e9).is("a number of seconds"))
	ck.num("breaker-cooldown", between(0, 1e9).is("a number of seconds"))
	for _, n := range transportFlagNames {
		ck.only(n, transfers, "to mechanisms that transfer KV from P to D (pd-disaggregation, kvcache-centric, the peers)")
	}
	ck.only("breaker-failures", x.peerFailure == "windowed", "with --peer-failure windowed")
	ck.only("breaker-window", x.peerFailure == "windowed", "with --peer-failure windowed")
	ck.only("breaker-cooldown", x.peerFailure == "windowed", "with --peer-failure windowed")
}

func (x *transportFlags) apply(c *sim.Config) {
	c.TransferTimeoutS, c.PeerFailure = x.timeout, x.peerFailure
	c.BreakerFailures, c.BreakerWindowS, c.BreakerCooldownS = x.failures, x.windowS, x.cooldownS
}
