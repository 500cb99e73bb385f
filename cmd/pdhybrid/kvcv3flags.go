package main

import (
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// kvcV3Flags are KVC v3's options (docs/kvc-v3.md). --kvc-preset v3 (the
// default) sets the values chosen from the sweep there; --kvc-preset v2
// leaves them all off, which is the seed's KVC v2; each flag given
// overrides its preset value. v3 is the default because v2 routes every new
// session that shares a system prompt to one decoder (docs/kvc.md, "v2's
// pile-up") and v3 beats it on every bench figure but TPOT p99.
type kvcV3Flags struct {
	preset            string
	budget, margin    int
	coldRoute, inline bool
	fallback, typed   bool
	wholeP, coldP     bool
	pHosts            bool
	balanceStarts     bool
	pHostQueue        int
	balanceHalfLife   float64
	bypass            int
	pBypass           int  // the prefill workers' bypass (engine.Config.PrefillBypassTokens)
	pBypassAhead      bool // in a step of its own, before the long prompt's next chunk
	order             string
	maxWait           float64
	coldInflight      int
	countTransfer     bool
	tpotSLO           float64 // KVC v4's decode isolation, ms (kvc/v4.go)
	maxPWait          float64 // with tpotSLO: P's queue in seconds past which the budget yields
	ttftSLO           float64 // with tpotSLO: the TTFT through P past which the budget yields (ms)
	soonerRatio       float64 // with ttftSLO: how much sooner D must be for the budget to yield when both miss
	longPrefill       float64 // with ttftSLO: P's own prefill in seconds past which the budget yields when both miss
	stayClass         int     // with tpotSLO: the size class of P's queue a hosted turn's stay reads
	coldTrim          float64 // with coldRoute: the weight of the sessions a cold placement pushes out (sim only)
	homeReseed        bool    // with tpotSLO: a held large append reseeded back to its decoder when the others would trim (sim only)
}

// The v3 preset's values, chosen from the sweep in docs/kvc-v3.md.
const (
	// v3Budget: with the bypass and shortest-first admission a decoder can
	// take more local prefill without stalling its direct appends: 262,144
	// and 393,216 score 63-64 of 72 at half-lives of 30-60 s, 131,072 61-63,
	// 65,536 46-49 (docs/kvc-v3.md).
	v3Budget    = 262144
	v3Margin    = 0
	v3ColdRoute = true
	v3Inline    = true
	v3Fallback  = true
	v3Typed     = true
	v3WholeP    = true
	v3PHosts    = true
	// v3BalanceStarts and v3PHostQueue: 45 of 72 statistics at a mean
	// ratio of 0.993, against 31 at 0.998 without (docs/kvc-v3.md).
	v3BalanceStarts = true
	v3PHostQueue    = 16384
	// v3BalanceHalfLife: 30 s with the final budget, 64 of 72 (45 and 60 s
	// 63, 20 s 59); before the bypass 30-120 s scored 53-55, none 47
	// (docs/kvc-v3.md).
	v3BalanceHalfLife = 30
	// v3Bypass: 256-1,024 tokens scored 57 of 72, 4,096 56, none 55
	// (docs/kvc-v3.md).
	v3Bypass = 512
	// v3Order and v3MaxWait: shortest-first with a 30 s bound scored 61 of
	// 72 (10-120 s: 61), without a bound 63 at the cost of a 4,755 s wait
	// on the overloaded BLIS spec (docs/kvc-v3.md).
	v3Order   = "shortest"
	v3MaxWait = 30
	// v3ColdInflight: 6,144 scored best of 6,144, 8,192 and 12,288 in the sweep (docs/kvc-v3.md).
	v3ColdInflight = 6144
	// v4TPOTSLO: the v4 preset is v3's with decode isolation at this TPOT
	// in milliseconds (docs/kvc-v4.md).
	v4TPOTSLO = 12
	// v4MaxPWait: seconds of prefill queued on P past which a prefill over
	// its decoder's stall budget runs there anyway (docs/kvc-v4.md).
	v4MaxPWait = 20
	// v4TTFTSLO: the TTFT in milliseconds that a prefill over its
	// decoder's stall budget runs there to meet when P would miss it: the
	// goodput SLO of docs/kvc-v4.md's table, chosen over 1,000 and 5,000
	// and over a rule that runs it there whenever it would be sooner
	// (docs/kvc-v4.md, "The TTFT escape").
	v4TTFTSLO = 2000
	// v4SoonerRatio: a prefill that misses the TTFT SLO both ways runs on
	// its decoder when that is at least this many times sooner than P.
	// Over the 24 groups of docs/kvc-v4.md, 2 lowered v4's TTFT p99 on every
	// WEKA group and raised the groups with TPOT p99 within 1.25× naive
	// PD's from 14 to 15; 1.25 and 1.5 raised TPOT p99 on 5 and 3 groups,
	// 4 moved less (docs/kvc-v4.md, "The TTFT tail on WEKA and Mooncake").
	v4SoonerRatio = 2
	// v4PBypass: the v4 preset's prefill workers let a prompt of at most
	// this many uncached tokens ride past a long chunked one, and run the
	// hosted sessions' turns among them in a step of their own before its
	// next chunk (--p-prefill-bypass-ahead). Over the 24 groups of
	// docs/kvc-v4.md 2,048 raised the groups where v4 has the highest
	// goodput from 9 to 10 and lowered TTFT p99 on 5, worse on none; 1,024
	// and 3,072 moved less or mixed, 4,096 and 8,192 tipped the overloaded
	// groups workload at 8 GPUs into local fallbacks (docs/kvc-v4.md,
	// "Tried: P's held prompts apart from its hosted sessions' turns").
	v4PBypass = 2048
)

var kvcV3FlagNames = []string{"kvc-preset", "d-prefill-budget", "local-prefill-margin", "cold-route", "inline-admission", "local-fallback", "typed-rejects", "whole-on-p", "cold-on-p", "p-hosts-sessions", "balance-starts", "p-host-queue-tokens", "balance-half-life", "cold-route-inflight-tokens", "count-transfer", "prefill-bypass-tokens", "p-prefill-bypass-tokens", "p-prefill-bypass-ahead", "prefill-order", "prefill-max-wait", "tpot-slo-ms", "isolation-max-p-wait", "isolation-ttft-slo-ms", "isolation-sooner-ratio", "isolation-long-prefill", "isolation-stay-class-tokens", "cold-route-trim-weight", "isolation-home-reseed"}

// register adds every v3 flag (sim, bench, sweep).
func (v *kvcV3Flags) register(fs *pflag.FlagSet) {
	v.registerLive(fs)
	fs.BoolVar(&v.countTransfer, "count-transfer", false, "kvcache-centric (v3), with --d-prefill-budget: the placement of a session's first turn counts, beside the prefill worker's queue, the P→D transfer of the whole prompt a prefill through P costs, in prefill tokens from the profile's link and timing (off by default)")
	fs.IntVar(&v.bypass, "prefill-bypass-tokens", 0, "kvcache-centric (v3): a decoder's step that continues a long chunked prefill (a local seed, a large append) also takes the waiting requests whose uncached prompt fits in this many `tokens`, in [0, 16777216], in their queue order, so a direct append of a few hundred tokens does not wait seconds behind it; the step computes at most the chunk budget plus this (default 0: SGLang's order; the v3 preset: 512; live: the decode workers' --prefill-bypass-tokens)")
	fs.IntVar(&v.pBypass, "p-prefill-bypass-tokens", 0, "kvcache-centric (v3/v4): a prefill worker's step that continues a long chunked prefill (a prompt it prefills for a decoder) also takes the waiting requests whose uncached prompt fits in this many `tokens`, in [0, 16777216], in their queue order, so a turn of a session it serves whole does not wait out the long prompt's remaining chunks (default 0: SGLang's order, also in the v3 preset; the v4 preset: 2048; docs/kvc-v4.md)")
	fs.BoolVar(&v.pBypassAhead, "p-prefill-bypass-ahead", false, "kvcache-centric (v3/v4), with --p-prefill-bypass-tokens: those requests run in a prefill step of their own before the long prompt's next chunk instead of in it, never two such steps in a row; only the turns of sessions it serves whole, the prompts it prefills for decoders ride in the chunk (off by default and in the v3 preset, on in the v4 preset; docs/kvc-v4.md)")
	fs.StringVar(&v.order, "prefill-order", "fcfs", "kvcache-centric (v3): how the prefill workers and decoders admit their waiting requests: `fcfs` (arrival order, SGLang's) or shortest (fewest uncached prompt tokens first, so a short prompt does not wait behind every larger one; see --prefill-max-wait) (the v3 preset: shortest; live: the workers' --prefill-order)")
	fs.Float64Var(&v.maxWait, "prefill-max-wait", 0, "kvcache-centric (v3), with --prefill-order shortest: a request waiting longer than this many `seconds`, in [0, 86400], goes first, in arrival order, which bounds what shortest-first costs the largest prompts; 0 = no bound (default 0; the v3 preset: 30)")
	fs.Float64Var(&v.coldTrim, "cold-route-trim-weight", 0, "kvcache-centric (v3/v4), with --cold-route: each token of the sessions a cold placement would push out of a decoder's KV pool, by the router's book of what each decoder holds pinned (the least recently used idle sessions, whole, until the room holds the prompt and its output), adds this many tokens to that decoder's cold-routing cost, a `factor` in [0, 1000]; the book needs the decoders' eviction reports, so the simulator only (default 0: off, also in the v3 and v4 presets; docs/kvc-v4.md)")
	fs.BoolVar(&v.homeReseed, "isolation-home-reseed", false, "kvcache-centric, with --tpot-slo-ms: an append over --direct-max-uncached-tokens that the stall budget holds off its session's decoder is reseeded through the prefill worker back to that decoder, instead of to the next decoder Algorithm 1 names, when by the router's book of what each decoder holds pinned every other decoder would push a session out of its KV pool to take it; the book needs the decoders' eviction reports, so the simulator only (off by default, also in the v4 preset; docs/kvc-v4.md)")
	fs.BoolVar(&v.inline, "inline-admission", false, "kvcache-centric (v3): the first admission check rides on the request to the decoder, with no round trip before it; a refusal or seed answer pays --admission-rtt before the next step (off in v2, on in the v3 preset)")
}

// registerLive adds the v3 flags the gateway takes: all but
// --count-transfer (the gateway knows no link or timing) and
// --inline-admission (its admission RPC is the real round trip).
func (v *kvcV3Flags) registerLive(fs *pflag.FlagSet) {
	fs.StringVar(&v.preset, "kvc-preset", "v3", "kvcache-centric: `preset` of the v3 options below: v2 (all off: the seed's KVC v2), v4 (v3 with --tpot-slo-ms 12 --isolation-max-p-wait 20 --isolation-ttft-slo-ms 2000 --isolation-sooner-ratio 2, and in the simulator --p-prefill-bypass-tokens 2048 --p-prefill-bypass-ahead: decode isolation, docs/kvc-v4.md; the gateway prices it with the workers' profile, --hardware and --profile-model or --profile) or v3 (the default: the values docs/kvc-v3.md chose from its sweep: --d-prefill-budget 262144 --cold-route --inline-admission --local-fallback --typed-rejects --whole-on-p --p-hosts-sessions --balance-starts --balance-half-life 30 --p-host-queue-tokens 16384 --cold-route-inflight-tokens 6144, and in the simulator --inline-admission --prefill-bypass-tokens 512 --prefill-order shortest --prefill-max-wait 30); a flag given overrides its preset value")
	fs.IntVar(&v.budget, "d-prefill-budget", 0, "kvcache-centric (v3): the stall budget, in `tokens` in [0, 16777216]: a decoder prefills a seed, reseed or an append over --direct-max-uncached-tokens itself, keeping the session, when the prefill tokens queued on it with this request stay within this and below the prefill worker's queue (see --local-prefill-margin); 0 = never (v2; the v3 preset: 262144)")
	fs.IntVar(&v.margin, "local-prefill-margin", 0, "kvcache-centric (v3), with --d-prefill-budget: the decoder's queue with the request plus this many `tokens`, in [-16777216, 16777216], must not exceed the prefill worker's queue with it; negative favours the decoder (default 0, as in the v3 preset)")
	fs.BoolVar(&v.coldRoute, "cold-route", false, "kvcache-centric (v3): a session no decoder holds goes to the decoder with the least queued prefill tokens less its believed overlap with the prompt, instead of Algorithm 1's score (P7; off in v2, on in the v3 preset)")
	fs.IntVar(&v.coldInflight, "cold-route-inflight-tokens", 0, "kvcache-centric (v3), with --cold-route: each request in flight on a decoder adds this many `tokens`, in [0, 16777216], to its cold-routing cost, so new sessions spread over the decode batches and not only over the prefill queues (default 0; the v3 preset: 6144)")
	v.registerMore(fs)
}

func (v *kvcV3Flags) registerMore(fs *pflag.FlagSet) {
	fs.Float64Var(&v.soonerRatio, "isolation-sooner-ratio", 0, "kvcache-centric, with --isolation-ttft-slo-ms: a prefill over its decoder's stall budget also runs there when through the prefill worker it would miss the TTFT SLO and on the decoder it would take at most 1/this of P's time, though it misses the SLO there too, a `factor` in [0, 1000]; 0 = never (default 0; the v4 preset: 2)")
	fs.Float64Var(&v.longPrefill, "isolation-long-prefill", 0, "kvcache-centric, with --isolation-ttft-slo-ms: a prefill over its decoder's stall budget also runs there when through the prefill worker it would miss the TTFT SLO, on the decoder it would be no later, and its own prefill would hold P longer than this many `seconds`, in [0, 86400], delaying every request queued behind it there; 0 = never (default 0, also in the v4 preset: measured in docs/kvc-v4.md and not kept)")
	fs.IntVar(&v.stayClass, "isolation-stay-class-tokens", 0, "kvcache-centric, with --tpot-slo-ms: a turn of a session served whole on a prefill worker that needs at most this many `tokens` there, in [0, 16777216], stays there while the prefill queued there by requests needing at most as many (the queue a shortest-first P with --p-prefill-bypass-tokens makes it wait in) is no longer than the least-loaded decoder's with the whole prompt, instead of P's whole queue; 0 = P's whole queue (default 0, also in the v4 preset; docs/kvc-v4.md)")
	fs.Float64Var(&v.tpotSLO, "tpot-slo-ms", 0, "kvcache-centric (v3/v4): decode isolation: every GPU that decodes (decoders, prefill workers serving sessions whole) is held to this TPOT in `milliseconds`, in [0, 1000000]: it keeps a stall budget of (SLO − a decode step) × (the mean output − 1) seconds, refilled at (SLO − step)/SLO seconds a second, and a local seed, reseed, large append or a session P would host goes there only while the prefill's time from the profile's cost model fits it (else through P); direct appends and P's prefills draw from it too; and KVC's workers size each prefill chunk to the smallest stall budget of the requests decoding there, decoding instead when none fits, so a long prefill on a GPU no longer stalls its batch past the SLO (docs/kvc-v4.md); 0 = off (default 0; the v4 preset: 12)")
	fs.Float64Var(&v.ttftSLO, "isolation-ttft-slo-ms", 0, "kvcache-centric, with --tpot-slo-ms: a prefill over its decoder's stall budget still runs there when through the prefill worker (its queue and the prefill, from the profile's cost model) it would miss this TTFT in `milliseconds`, in [0, 1000000], and on the decoder (its queue and the prefill) it would meet it: isolation would cost the request its TTFT SLO for a stall the workers' slicing still bounds (prefill deflection's trigger, arXiv 2607.02043); 0 = never (default 0; the v4 preset: 2000)")
	fs.Float64Var(&v.maxPWait, "isolation-max-p-wait", 0, "kvcache-centric, with --tpot-slo-ms: a prefill over its decoder's stall budget still runs there when the prefill worker has more than this many `seconds` of prefill queued (from the profile's cost model), in [0, 86400]: the queue would cost the request more TTFT than the stall costs the decode batch; 0 = never (default 0; the v4 preset: 20)")
	fs.BoolVar(&v.coldP, "cold-on-p", false, "kvcache-centric (v3), with --whole-on-p: a new session's first turn is served whole on the prefill worker when its queued prefill tokens are no more than every decoder's, and the session stays there as --whole-on-p says (P as one more colocated worker; off by default)")
	fs.BoolVar(&v.pHosts, "p-hosts-sessions", false, "kvcache-centric (v3), with --whole-on-p: a new session's first turn is served whole on the prefill worker while it serves fewer requests whole than every decoder has in flight, or while its prefill queue is empty and it hosts fewer sessions than every decoder; the session stays there as --whole-on-p says: P hosts its share of the sessions as one more colocated worker (off in v2, on in the v3 preset)")
	fs.BoolVar(&v.balanceStarts, "balance-starts", false, "kvcache-centric (v3): new sessions spread by the count of sessions each GPU started, as DP's round robin does: cold routing's ties go to the decoder that started the fewest, and with --p-hosts-sessions a prefill worker starts a session while it has started at most its equal share of them (one in |P|+|D|) and has at most --p-host-queue-tokens of prefill queued, instead of the in-flight rule (off in v2, on in the v3 preset)")
	fs.Float64Var(&v.balanceHalfLife, "balance-half-life", 0, "kvcache-centric (v3), with --balance-starts: cold routing's ties go first to the decoder that took the fewest requests lately, counted with this half-life in `seconds`, in [0, 86400], then to the one that started the fewest sessions (default 0: sessions started only; the v3 preset: 30)")
	fs.IntVar(&v.pHostQueue, "p-host-queue-tokens", 0, "kvcache-centric (v3), with --balance-starts and --p-hosts-sessions: the most prefill `tokens` queued on a prefill worker, in [0, 16777216], for it to start a new session as its host, so that the cold prompts it prefills for the decoders do not wait behind its own sessions (default 0: only an idle prefill queue; the v3 preset: 16384)")
	fs.BoolVar(&v.wholeP, "whole-on-p", false, "kvcache-centric (v3), with --local-fallback: such a request is served whole (prefill and decode) on the prefill worker instead when its queued prefill tokens are fewer than the least-loaded decoder's (an idle P takes decode work), and so is a request falling back to plain PD for another reason when the prefill worker caches all but --direct-max-uncached-tokens of its prompt (off in v2, on in the v3 preset)")
	fs.BoolVar(&v.fallback, "local-fallback", false, "kvcache-centric (v3): a request every decoder refused for space queues on the session's decoder, or else the one with the least queued prefill tokens (budget and margin aside: it waits for a decoder's KV either way) instead of going through P as plain PD (off in v2, on in the v3 preset)")
	fs.BoolVar(&v.typed, "typed-rejects", false, "kvcache-centric (v3): a no-space refusal does not count toward --migration-reject-threshold, only refusals about the session itself (P8; off in v2, on in the v3 preset)")
}

func (v *kvcV3Flags) check(ck *checks) {
	ck.oneOf("kvc-preset", "v2", "v3", "v4")
	if v.preset == "v4" && !ck.set("tpot-slo-ms") {
		v.tpotSLO = v4TPOTSLO
	}
	if v.preset == "v4" && !ck.set("isolation-max-p-wait") && v.tpotSLO > 0 {
		v.maxPWait = v4MaxPWait
	}
	if v.preset == "v4" && !ck.set("isolation-ttft-slo-ms") && v.tpotSLO > 0 {
		v.ttftSLO = v4TTFTSLO
	}
	if v.preset == "v4" && !ck.set("isolation-sooner-ratio") && v.ttftSLO > 0 {
		v.soonerRatio = v4SoonerRatio
	}
	if v.preset == "v4" && !ck.set("p-prefill-bypass-tokens") {
		v.pBypass = v4PBypass
	}
	if v.preset == "v4" && !ck.set("p-prefill-bypass-ahead") && v.pBypass > 0 {
		v.pBypassAhead = true
	}
	if v.preset == "v3" || v.preset == "v4" {
		// In this order: an option whose base flag is off stays off.
		for _, o := range []struct {
			flag  string
			apply func()
		}{
			{"d-prefill-budget", func() { v.budget = v3Budget }},
			{"local-prefill-margin", func() { v.margin = v3Margin }},
			{"cold-route", func() { v.coldRoute = v3ColdRoute }},
			{"inline-admission", func() { v.inline = v3Inline }},
			{"prefill-bypass-tokens", func() { v.bypass = v3Bypass }},
			{"prefill-order", func() { v.order = v3Order }},
			{"prefill-max-wait", func() {
				if v.order == "shortest" {
					v.maxWait = v3MaxWait
				}
			}},
			{"local-fallback", func() { v.fallback = v3Fallback }},
			{"typed-rejects", func() { v.typed = v3Typed }},
			{"whole-on-p", func() { v.wholeP = v3WholeP }},
			{"p-hosts-sessions", func() { v.pHosts = v3PHosts && v.wholeP }},
			{"balance-starts", func() { v.balanceStarts = v3BalanceStarts }},
			{"balance-half-life", func() {
				if v.balanceStarts {
					v.balanceHalfLife = v3BalanceHalfLife
				}
			}},
			{"p-host-queue-tokens", func() {
				if v.balanceStarts && v.pHosts {
					v.pHostQueue = v3PHostQueue
				}
			}},
			{"cold-route-inflight-tokens", func() {
				if v.coldRoute {
					v.coldInflight = v3ColdInflight
				}
			}},
		} {
			if !ck.set(o.flag) {
				o.apply()
			}
		}
	}
	ck.num("d-prefill-budget", between(0, 1<<24).is("a number of tokens").orZero("never"))
	ck.num("local-prefill-margin", between(-(1<<24), 1<<24).is("a number of tokens"))
	ck.only("local-prefill-margin", v.budget > 0, "with --d-prefill-budget above 0")
	ck.only("count-transfer", v.budget > 0, "with --d-prefill-budget above 0")
	ck.only("whole-on-p", v.fallback, "with --local-fallback")
	ck.only("cold-on-p", v.wholeP, "with --whole-on-p")
	ck.only("p-hosts-sessions", v.wholeP, "with --whole-on-p")
	ck.num("balance-half-life", between(0, 86400).is("seconds"))
	ck.only("balance-half-life", v.balanceStarts, "with --balance-starts")
	ck.num("p-host-queue-tokens", between(0, 1<<24).is("a number of tokens"))
	ck.only("p-host-queue-tokens", v.balanceStarts && v.pHosts, "with --balance-starts and --p-hosts-sessions")
	ck.num("cold-route-inflight-tokens", between(0, 1<<24).is("a number of tokens"))
	ck.only("cold-route-inflight-tokens", v.coldRoute, "with --cold-route")
}

// checkV4 checks --tpot-slo-ms and its escapes (sim, bench, sweep, serve).
func (v *kvcV3Flags) checkV4(ck *checks) {
	ck.num("tpot-slo-ms", between(0, 1e6).is("milliseconds").orZero("off"))
	ck.only("tpot-slo-ms", v.budget > 0, "with --d-prefill-budget above 0 (the v3 or v4 preset)")
	ck.num("isolation-max-p-wait", between(0, 86400).is("seconds").orZero("never"))
	ck.only("isolation-max-p-wait", v.tpotSLO > 0, "with --tpot-slo-ms above 0")
	ck.num("isolation-ttft-slo-ms", between(0, 1e6).is("milliseconds").orZero("never"))
	ck.only("isolation-ttft-slo-ms", v.tpotSLO > 0, "with --tpot-slo-ms above 0")
	ck.num("isolation-sooner-ratio", between(0, 1000).is("a factor").orZero("never"))
	ck.only("isolation-sooner-ratio", v.ttftSLO > 0, "with --isolation-ttft-slo-ms above 0")
	ck.num("isolation-long-prefill", between(0, 86400).is("seconds").orZero("never"))
	ck.only("isolation-long-prefill", v.ttftSLO > 0, "with --isolation-ttft-slo-ms above 0")
	ck.num("isolation-stay-class-tokens", between(0, 1<<24).is("a number of tokens").orZero("one queue"))
	ck.only("isolation-stay-class-tokens", v.tpotSLO > 0, "with --tpot-slo-ms above 0")
}

// checkSim checks the flags only register adds: the workers' scheduler
// options, which the gateway does not configure (the emulated workers take
// their own).
func (v *kvcV3Flags) checkSim(ck *checks) {
	ck.num("prefill-bypass-tokens", between(0, 1<<24).is("a number of tokens"))
	ck.num("cold-route-trim-weight", between(0, 1000).is("a factor").orZero("off"))
	ck.only("cold-route-trim-weight", v.coldRoute, "with --cold-route")
	ck.only("isolation-home-reseed", v.tpotSLO > 0, "with --tpot-slo-ms above 0")
	ck.num("p-prefill-bypass-tokens", between(0, 1<<24).is("a number of tokens"))
	ck.only("p-prefill-bypass-ahead", v.pBypass > 0, "with --p-prefill-bypass-tokens above 0")
	ck.oneOf("prefill-order", "fcfs", "shortest")
	ck.num("prefill-max-wait", between(0, 86400).is("seconds"))
	ck.only("prefill-max-wait", v.order == "shortest", "with --prefill-order shortest")
}

// live is the gateway's v3 configuration: the same options, with no
// inline admission and no transfer cost (registerLive), and v4's decode
// isolation and tier costing priced by the workers' cost model, as the
// simulator's config prices them (sim.KVCv3.config, sim.Config.withTiers).
func (v *kvcV3Flags) live(cost kvc.StallCost, tiers kvc.TierCost) kvc.V3Config {
	return kvc.V3Config{Isolation: kvc.DecodeIsolation{TPOTSLOS: v.tpotSLO / 1000, Cost: cost, MaxPWaitS: v.maxPWait, TTFTSLOS: v.ttftSLO / 1000, SoonerRatio: v.soonerRatio, LongPrefillS: v.longPrefill, StayClassTokens: v.stayClass}, Tiers: tiers,
		DBudgetTokens: v.budget, Margin: v.margin, ColdRoute: v.coldRoute, ColdInflightTokens: v.coldInflight,
		LocalFallback: v.fallback, TypedRejects: v.typed, WholeOnP: v.wholeP, ColdOnP: v.coldP, PHosts: v.pHosts,
		BalanceStarts: v.balanceStarts, PHostQueueTokens: v.pHostQueue, BalanceHalfLifeS: v.balanceHalfLife}
}

func (v *kvcV3Flags) config() sim.KVCv3 {
	return sim.KVCv3{Preset: v.preset, DBudgetTokens: v.budget, MarginTokens: v.margin, ColdRoute: v.coldRoute, ColdInflightTokens: v.coldInflight, CountTransfer: v.countTransfer, Inline: v.inline, PrefillBypassTokens: v.bypass, PPrefillBypassTokens: v.pBypass, PPrefillBypassAhead: v.pBypassAhead,
		PrefillOrder: v.order, PrefillMaxWaitS: v.maxWait,
		LocalFallback: v.fallback, TypedRejects: v.typed, WholeOnP: v.wholeP, ColdOnP: v.coldP, PHosts: v.pHosts,
		BalanceStarts: v.balanceStarts, PHostQueueTokens: v.pHostQueue, BalanceHalfLifeS: v.balanceHalfLife, TPOTSLOMs: v.tpotSLO, IsolationMaxPWaitS: v.maxPWait, IsolationTTFTSLOMs: v.ttftSLO, IsolationSoonerRatio: v.soonerRatio, IsolationLongPrefillS: v.longPrefill, IsolationStayClassTokens: v.stayClass, ColdTrimWeight: v.coldTrim, IsolationHomeReseed: v.homeReseed}
}
