package report

import "strings"

// An execution mode's label (kvc's dispatcher writes it on every request)
// is exact but written for the code: pd-router-real-large-append-reseed-
// after-eviction means nothing to someone who serves with vLLM or SGLang.
// ModeWords says it in plain words, for the report's legend.

// modeExact are the labels that do not compose.
var modeExact = map[string]string{
	"pd-disaggregation-router":          "naive PD: prefilled on a prefill worker (P), its KV sent to a decode worker (D), decoded there",
	"dp-colo-router":                    "data-parallel: prefilled and decoded on one colocated worker",
	"kvcache-direct-to-d-session":       "KVC direct append: the session's decoder holds its context and prefills only the new tokens (no P, no KV transfer)",
	"pd-router-turn1-seed":              "KVC seed: a session's first turn prefilled on P, its KV sent to the decoder that keeps the session",
	"pd-router-turn1-d-backpressure":    "plain PD for a session's first turn: the decoders pushed back (busy)",
	"pd-router-no-session":              "plain PD: the request names no session",
	"kvcache-local-seed-on-d":           "KVC v3 local seed: a session's first turn prefilled on its decoder itself (no P)",
	"kvcache-local-reseed-on-d":         "KVC v3 local reseed: the session's context prefilled again on its decoder (no P)",
	"kvcache-direct-to-d-large-append":  "KVC v3: an append over the direct-append limit prefilled on the session's decoder anyway",
	"kvcache-local-fallback-on-d":       "KVC v3: every decoder refused for space; queued on one until room frees (no P)",
	"kvcache-whole-on-p":                "KVC v3: served whole, prefill and decode, on the prefill worker (P as one more colocated worker)",
	"pd-conditional-local-prefill-on-d": "Dynamo's conditional disaggregation: prefilled locally on the decoder",
	"pd-conditional-disagg-router":      "Dynamo's conditional disaggregation: through P as naive PD",
	"pd-prefix-decider-decode-only":     "llm-d's prefix decider: little enough uncached, prefilled on the decoder",
	"pd-prefix-decider-disagg-router":   "llm-d's prefix decider: through P as naive PD",
	"pd-decode-radix-delta-router":      "SGLang's decode radix cache: through P, only the KV the decoder lacks sent",
	"pd-ppd-turn1-router":               "PPD: a session's first turn through P as naive PD",
	"pd-ppd-append-on-d":                "PPD: a later turn's append prefilled on the session's decoder (no P)",
	"pd-ppd-disagg-router":              "PPD: a later turn through P, its SLO weights favouring the decode batch",
	"pd-deflect-prefill-on-d":           "prefill deflection: P would miss the TTFT SLO, so prefilled on a decoder in TBT-sized chunks",
	"pd-deflect-disagg-router":          "prefill deflection: through P as naive PD",
}

// modeWhy are the reasons a KVC request did not go direct to its decoder.
var modeWhy = map[string]string{
	"d-session":            "its decoder asked for the session's context again",
	"session-not-resident": "no decoder holds the session",
	"session-was-evicted":  "its decoder evicted the session",
	"no-direct-info":       "the router could not tell what the decoder holds (a turn still in flight)",
	"real-large-append":    "the new tokens exceed the direct-append limit (--direct-max-uncached-tokens)",
	"other-large-append":   "the session's decoder refused the append (no space, its session cap or backpressure)",
	"policy-no-bypass":     "the routing policy chose another decoder than the session's",
}

// modeSuffix are the refinements a label may end with.
var modeSuffix = []struct{ suffix, words string }{
	{"-after-prefill-backed-eviction", ", after an eviction, from a copy kept on P"},
	{"-after-eviction", ", after an eviction"},
	{"-seed-filter-early-turn", ", too early in the session to seed (--seed-min-turn)"},
	{"-session-cap", "; the decoders were at their session cap"},
	{"-no-d-capacity", "; no decoder had room"},
	{"-d-backpressure", "; the decoders pushed back (busy)"},
}

// modeVia are the KVC paths on a decoder without the extension
// (kvc.PathMode), as the label's last suffix.
var modeVia = []struct{ suffix, words string }{
	{"-via-local-prefill", " (on upstream SGLang: do_local_prefill on a decoder with conditional aggregation and its radix cache)"},
	{"-via-delta-pd", " (on upstream SGLang: PD to the session's decoder, whose radix cache makes P send only the delta)"},
	{"-via-plain-pd", " (on stock SGLang: plain PD to the session's decoder)"},
}

// ModeWords is an execution-mode label in plain words; "" for a label it
// does not know.
func ModeWords(mode string) string {
	for _, v := range modeVia {
		if base, ok := strings.CutSuffix(mode, v.suffix); ok {
			if w := ModeWords(base); w != "" {
				return w + v.words
			}
			return ""
		}
	}
	if w, ok := modeExact[mode]; ok {
		return w
	}
	rest, ok := strings.CutPrefix(mode, "pd-router-")
	if !ok {
		return ""
	}
	tail := ""
	for _, s := range modeSuffix {
		if r, ok := strings.CutSuffix(rest, s.suffix); ok {
			rest, tail = r, s.words
			break
		}
	}
	if why, ok := strings.CutPrefix(rest, "fallback-"); ok {
		if w, ok := modeWhy[why]; ok {
			return "KVC fell back to plain PD through P: " + w + tail
		}
		return ""
	}
	if why, ok := strings.CutSuffix(rest, "-reseed"); ok {
		if w, ok := modeWhy[why]; ok {
			return "KVC reseed: the session's context prefilled on P and sent to a decoder again: " + w + tail
		}
	}
	if rest == "fallback" {
		return "KVC fell back to plain PD through P" + tail
	}
	return ""
}
