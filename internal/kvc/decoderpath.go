package kvc

import (
	"fmt"
	"strings"
)

// KVC on the decoders people run: which path a KVC request takes on a
// decoder depends on what the decoder offers, and the gateway (from what
// discovery learnt) and the simulator (from --decode-worker-kind) choose it
// with the same function, so a simulated cluster of stock decoders runs
// KVC the way the live gateway would (docs/gateway.md).

// The KVC paths on a decoder, best first: the full extension (admission
// RPC, direct append); do_local_prefill on the session's decoder with the
// router's own admission; delta PD to the session's decoder through its
// radix cache; session-affine plain PD.
const (
	PathExtension    = "extension"
	PathLocalPrefill = "local-prefill"
	PathDeltaPD      = "delta-pd"
	PathPlainPD      = "plain-pd"
)

// DecoderCaps is what a decoder offers KVC: the extension's session cache
// (pdhybrid worker --session-cache, docs/worker-protocol.md), and
// upstream SGLang's decode radix cache
// (--disaggregation-decode-enable-radix-cache) and conditional aggregation
// (--disaggregation-decode-enable-conditional-agg, do_local_prefill).
type DecoderCaps struct {
	SessionCache bool
	DecodeRadix  bool
	CondAgg      bool
}

// Path is the KVC path a request to this decoder takes. Conditional
// aggregation counts only with the decode radix cache: without it SGLang's
// decoder keeps no prefix (a chunk cache), so a local prefill would
// recompute the whole conversation on the decoder every turn, where plain
// PD recomputes only what the prefill worker's own radix cache lacks.
func (c DecoderCaps) Path() string {
	switch {
	case c.SessionCache:
		return PathExtension
	case c.CondAgg && c.DecodeRadix:
		return PathLocalPrefill
	case c.DecodeRadix:
		return PathDeltaPD
	}
	return PathPlainPD
}

// Keeps reports whether the decoder keeps the KV of a request it served
// for later ones: the extension's session cache and the decode radix
// cache do; a stock decoder, or one with conditional aggregation alone,
// frees it (SGLang's chunk cache), so the router must credit it with no
// prefix — else every prompt it was sent, a shared system prompt first,
// draws new sessions to it with nothing there to reuse.
func (c DecoderCaps) Keeps() bool { return c.SessionCache || c.DecodeRadix }

// The decoder kinds, named as the worker flags that make them.
const (
	KindStock       = "stock"
	KindDecodeRadix = "decode-radix"
	KindCondAgg     = "conditional-agg"
	KindCondAggRdx  = "conditional-agg+decode-radix"
	KindExtended    = "extended"
)

// DecoderKinds lists the kinds, stock first.
var DecoderKinds = []string{KindStock, KindDecodeRadix, KindCondAgg, KindCondAggRdx, KindExtended}

// ParseDecoderKind reads a decoder kind.
func ParseDecoderKind(s string) (DecoderCaps, error) {
	switch s {
	case KindStock:
		return DecoderCaps{}, nil
	case KindDecodeRadix:
		return DecoderCaps{DecodeRadix: true}, nil
	case KindCondAgg:
		return DecoderCaps{CondAgg: true}, nil
	case KindCondAggRdx:
		return DecoderCaps{CondAgg: true, DecodeRadix: true}, nil
	case KindExtended:
		return DecoderCaps{SessionCache: true}, nil
	}
	return DecoderCaps{}, fmt.Errorf("unknown decoder kind %q (want one of %s)", s, strings.Join(DecoderKinds, ", "))
}

// RouterAdmit is the router's own admission for a decoder without the
// session cache (there is no admission RPC to ask) of a prompt of input
// tokens: a session the router has pinned to this decoder goes there
// direct when the decoder can prefill it locally with its radix cache
// (path local-prefill) and the append — the prompt less what the router
// believes the decoder holds (a.Resident) — is within τ_append
// (a.MaxAppend), which the extension's decoder checks itself; a larger
// one is refused as that decoder refuses it (real-large-append), so it
// does not stall the decoder's batch. Everything else is a seed through PD
// to this decoder, which keeps the session affine to it (and, with the
// decode radix cache, receives only the delta).
func RouterAdmit(path string, pinned bool, input int, a Action) AdmitReply {
	if pinned && path == PathLocalPrefill && !a.ForceSeed {
		if a.MaxAppend > 0 && a.Resident > 0 && input-a.Resident > a.MaxAppend {
			return AdmitReply{Reason: "real-large-append"}
		}
		return AdmitReply{CanAdmit: true, Direct: true}
	}
	return AdmitReply{CanAdmit: true, Reason: "session-not-resident"}
}

// PathMode labels an execution mode with the path it took on a decoder
// without the extension: "kvcache-direct-to-d-session" on a decoder with
// conditional aggregation is
// "kvcache-direct-to-d-session-via-local-prefill", a seed on a stock
// decoder "pd-router-turn1-seed-via-plain-pd".
func PathMode(mode, path string) string {
	if path != "" && path != PathExtension && mode != "" {
		return mode + "-via-" + path
	}
	return mode
}

// WorkerCaps is what the dispatcher may ask of each worker beyond PD: the
// gateway fills it from discovery, the simulator from its decoder kinds.
// A nil function allows everything.
type WorkerCaps struct {
	// LocalOnD reports whether decoder d prefills a request itself: the
	// extension's direct append, or do_local_prefill (path extension or
	// local-prefill). Without it KVC v3's local seeds, large appends and
	// local fallbacks, and the peers' local prefills, go through P.
	LocalOnD func(d int) bool
	// WholeOnP reports whether prefill worker p serves a request whole
	// (the whole-request extension, kvc_protocol feature serve_whole).
	// Without it KVC v3 keeps sessions off P.
	WholeOnP func(p int) bool
	// KeepsOnD reports whether decoder d keeps what it served
	// (DecoderCaps.Keeps). Without it the decoder's router index is not
	// told of the prompts sent there: the session stays pinned (affine)
	// but no prefix overlap is believed, so new sessions go by load.
	KeepsOnD func(d int) bool
}

// localOnD reports whether decoder d may be asked to prefill a request
// itself.
func (x *Dispatcher) localOnD(d int) bool {
	return x.cfg.Workers.LocalOnD == nil || d < 0 || x.cfg.Workers.LocalOnD(d)
}

// wholeOnP reports whether prefill worker p may be asked to serve a
// request whole.
func (x *Dispatcher) wholeOnP(p int) bool {
	return x.cfg.Workers.WholeOnP == nil || p < 0 || x.cfg.Workers.WholeOnP(p)
}

// keepsOnD reports whether decoder d may be believed to hold what it was
// sent.
func (x *Dispatcher) keepsOnD(d int) bool {
	return x.cfg.Workers.KeepsOnD == nil || d < 0 || x.cfg.Workers.KeepsOnD(d)
}
