package main

import (
	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/sim"
)

// peerFlags are the peer baselines' knobs (docs/peer-baselines.md), each
// defaulting to its peer's own default, with the source in its help.
type peerFlags struct {
	strategy                string
	effISL                  int
	effRatio                float64
	prefillBusy, decodeBusy float64
	affinityTTL             float64
	nonCached, promptTokens int
	noKVEvents              bool
	rival                   rivalFlags
}

var (
	conditionalFlagNames = []string{"conditional-strategy", "conditional-eff-isl-threshold", "conditional-eff-isl-ratio",
		"conditional-prefill-busy", "conditional-decode-busy", "conditional-no-kv-events", "conditional-session-affinity-ttl"}
	deciderFlagNames = []string{"decider-non-cached-tokens", "decider-prompt-tokens"}
)

const (
	dynamoSrc = "Dynamo's conditional disaggregation, ai-dynamo/dynamo lib/kv-router/src/conditional_disagg.rs"
	llmdSrc   = "llm-d's prefix-based-pd-decider, llm-d/llm-d-router pkg/epp/framework/plugins/scheduling/profilehandler/disagg"
)

func (p *peerFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.strategy, "conditional-strategy", "isl_bounding", "pd-conditional: when a request skips P and is prefilled on its decoder, the `policy` of "+dynamoSrc+
		": isl_bounding (Dynamo's default: prompt − the decoder's cached prefix below --conditional-eff-isl-threshold and below --conditional-eff-isl-ratio of the prompt), prefill_load (the prefill worker the router would pick is busy, see --conditional-prefill-busy) or isl_or_load (either)")
	fs.IntVar(&p.effISL, "conditional-eff-isl-threshold", 2048, "pd-conditional, isl_bounding: largest effective input (prompt − the decoder's cached prefix) in `tokens`, exclusive, kept on the decoder, in [1, 4194304] (Dynamo's DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_THRESHOLD)")
	fs.Float64Var(&p.effRatio, "conditional-eff-isl-ratio", 0.7, "pd-conditional, isl_bounding: the effective input must also be below this `share` of the prompt, in (0, 1] (Dynamo's DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_RATIO_THRESHOLD)")
	fs.Float64Var(&p.prefillBusy, "conditional-prefill-busy", 4, "pd-conditional, prefill_load: a prefill worker is busy when its active prefill tokens exceed this `multiple` of its batch budget (--chunk-tokens), in (0, 1e6] (Dynamo's router_queue_threshold default, 4.0, times max_num_batched_tokens)")
	fs.Float64Var(&p.decodeBusy, "conditional-decode-busy", 0, "pd-conditional: the decode-busy gate, a `share` of the decoder's pool in [0, 1]: no local prefill when the decoder's active blocks, this request's included, exceed it; 0 = off (Dynamo's default: decode_busy_threshold unset)")
	fs.BoolVar(&p.noKVEvents, "conditional-no-kv-events", false, "pd-conditional: the router estimates each decoder's cache from the prompts it sent there (Dynamo's --no-router-kv-events) instead of the decoders' KV events (Dynamo's default), which also report the previous turn's output")
	fs.Float64Var(&p.affinityTTL, "conditional-session-affinity-ttl", 0, "pd-conditional: session affinity, in `seconds` in [0, 1e7]: a session's turns go to the decoder of its first successful dispatch while the binding was used within this long (a failure drops it); 0 = off (Dynamo's default: --router-session-affinity-ttl-secs unset)")
	fs.IntVar(&p.nonCached, "decider-non-cached-tokens", sim.DefaultNonCachedTokens, "pd-prefix-decider: nonCachedTokens of "+llmdSrc+
		": a request goes through P only when its uncached suffix on the decoder the prefix scorer chose is at least this many `tokens`, in [0, 4194304]; 0 disables disaggregation (the plugin's code default); 512 is the value its README configures")
	p.rival.register(fs)
	fs.IntVar(&p.promptTokens, "decider-prompt-tokens", 0, "pd-prefix-decider: promptTokens of "+llmdSrc+": prompts shorter than this many `tokens` stay on the decoder, in [0, 4194304]; 0 = no such gate (llm-d's default)")
}

func (p *peerFlags) check(ck *checks, conditional, decider bool) {
	ck.oneOf("conditional-strategy", "isl_bounding", "prefill_load", "isl_or_load")
	ck.num("conditional-eff-isl-threshold", between(1, 1<<22).is("a number of tokens"))
	ck.num("conditional-eff-isl-ratio", above(0).upTo(1).is("a share of the prompt"))
	ck.num("conditional-prefill-busy", above(0).upTo(1e6).is("a multiple of the batch budget"))
	ck.num("conditional-decode-busy", between(0, 1).is("a share of the decoder's pool").orZero("off"))
	ck.num("conditional-session-affinity-ttl", between(0, 1e7).is("a number of seconds").orZero("off"))
	ck.num("decider-non-cached-tokens", between(0, 1<<22).is("a number of tokens"))
	ck.num("decider-prompt-tokens", between(0, 1<<22).is("a number of tokens"))
	for _, n := range conditionalFlagNames {
		ck.only(n, conditional, "to --mechanism pd-conditional")
	}
	for _, n := range deciderFlagNames {
		ck.only(n, decider, "to --mechanism pd-prefix-decider")
	}
	ck.only("conditional-eff-isl-threshold", p.strategy != "prefill_load", "with --conditional-strategy isl_bounding or isl_or_load")
	ck.only("conditional-eff-isl-ratio", p.strategy != "prefill_load", "with --conditional-strategy isl_bounding or isl_or_load")
	ck.only("conditional-prefill-busy", p.strategy != "isl_bounding", "with --conditional-strategy prefill_load or isl_or_load")
}

func (p *peerFlags) config() sim.Peer {
	nc := p.nonCached
	if nc == 0 {
		nc = -1 // the flag's 0 is llm-d's "disabled"; the config's is "the default"
	}
	return sim.Peer{Strategy: p.strategy, EffISLThreshold: p.effISL, EffISLRatio: p.effRatio, PrefillBusy: p.prefillBusy,
		DecodeBusy: p.decodeBusy, NonCachedTokens: nc, PromptTokens: p.promptTokens, ApproxOverlap: p.noKVEvents,
		AffinityTTLS: p.affinityTTL}
}
