package kvc

import "fmt"

// The peers as baselines (DESIGN §4, peers.md §0): three published ways of
// serving a follow-up turn with less prefill work, each a mechanism of this
// dispatcher so one simulator runs them against KVC on the same cluster.
// All three run on decoders with SGLang's decode radix cache (the engine's
// DecodeRadix: D keeps what it received and generated; a P→D transfer
// carries only the blocks D lacks), so they differ only in when a request
// skips P:
//
//   - pd-conditional, Dynamo's conditional disaggregation
//     (ai-dynamo/dynamo lib/kv-router/src/conditional_disagg.rs): the
//     decoder is chosen by Dynamo's KV-router cost (pickDynamo: overlap
//     from the decoders' KV events, or the router's belief); the request is
//     prefilled locally on it when the strategy says so (isl_bounding: the
//     effective input — prompt less the decoder's overlap — is < 2,048 tokens
//     and < 0.7 of the prompt; prefill_load: the chosen prefill worker is
//     busy, its active prefill tokens > 4 × its batch budget; isl_or_load:
//     either), unless the decode-busy gate (off by default) finds the
//     decoder's active blocks above a share of its pool.
//   - pd-prefix-decider, llm-d's prefix-based-pd-decider
//     (llm-d/llm-d-router …/profilehandler/disagg/prefix_based_pd_decider.go):
//     the decoder is chosen first by the prefix scorer; the request goes
//     through P only if its uncached suffix there is ≥ nonCachedTokens (0
//     disables disaggregation), and, when promptTokens > 0, the prompt is at
//     least that long.
//   - pd-decode-radix, SGLang's decode radix cache alone
//     (--disaggregation-decode-enable-radix-cache, PR #19746): every request
//     goes through P; only the delta crosses the link.
//
// llm-d's router knows what it sent (its bounded block index: the
// approx-prefix-cache-producer its decider reads); Dynamo's, by default,
// what the decoders report (PeerConfig.DecodeCached). Overlap is counted in
// whole blocks of BlockSize tokens, as both compute it.

const (
	MechConditional   Mechanism = "pd-conditional"
	MechPrefixDecider Mechanism = "pd-prefix-decider"
	MechDecodeRadix   Mechanism = "pd-decode-radix"
)

// IsPeer reports whether m is one of the peer baselines.
func (m Mechanism) IsPeer() bool {
	return m == MechConditional || m == MechPrefixDecider || m == MechDecodeRadix || m.IsRival()
}

// Execution-mode labels of the peers.
const (
	ModeCondLocal     = "pd-conditional-local-prefill-on-d"
	ModeCondPD        = "pd-conditional-disagg-router"
	ModeDeciderLocal  = "pd-prefix-decider-decode-only"
	ModeDeciderPD     = "pd-prefix-decider-disagg-router"
	ModeDecodeRadixPD = "pd-decode-radix-delta-router"
)

// Strategy is Dynamo's conditional-disaggregation policy.
type Strategy string

const (
	StrategyISL     Strategy = "isl_bounding" // Dynamo's default
	StrategyLoad    Strategy = "prefill_load"
	StrategyISLLoad Strategy = "isl_or_load"
)

// ParseStrategy checks a conditional-disaggregation strategy.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case StrategyISL, StrategyLoad, StrategyISLLoad:
		return st, nil
	}
	return "", fmt.Errorf("unknown conditional-disaggregation strategy %q (want isl_bounding, prefill_load or isl_or_load)", s)
}

// PeerConfig holds the peers' knobs, each with its peer's default.
type PeerConfig struct {
	Strategy Strategy
	// EffISLThreshold and EffISLRatio are isl_bounding's bounds (Dynamo:
	// DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_THRESHOLD 2048, _RATIO_THRESHOLD 0.7).
	EffISLThreshold int
	EffISLRatio     float64
	// PrefillBusy: a prefill worker is busy when its active prefill tokens
	// exceed PrefillBusy × PrefillBatchTokens (Dynamo falls back to its
	// router_queue_threshold, default 4.0, times max_num_batched_tokens).
	PrefillBusy        float64
	PrefillBatchTokens int
	// DecodeBusy gates a bypass: the chosen decoder's active blocks with
	// this request's must not exceed DecodeBusy × DecodeKVBlocks (Dynamo's
	// decode_busy_threshold, unset by default: 0 = off).
	DecodeBusy float64
	// NonCachedTokens and PromptTokens are llm-d's prefix-based-pd-decider
	// parameters (tokens; 0 disables disaggregation, 0 disables the gate).
	NonCachedTokens int
	PromptTokens    int
	// AffinityTTLS binds a session to the decoder of its first successful
	// dispatch for this many seconds since the binding's last use (Dynamo's
	// --router-session-affinity-ttl-secs; 0 = off, its default).
	AffinityTTLS float64
	// DecodeCached, when set, is a decoder's own answer to how many prompt
	// tokens it holds for a request: what its KV events tell Dynamo's
	// router (--router-kv-events, Dynamo's default). nil: pd-conditional
	// uses the router's belief of what it sent (--no-router-kv-events).
	DecodeCached func(d int, session string, num int64, blocks []uint64, input int) int
	// Rival holds the 2026 rivals' SLOs, weights and cost model (rivals.go).
	Rival RivalConfig
}

// beginPeer decides a peer baseline's request: pick the decoder the way the
// peer does, then local prefill on it or PD through P.
func (t *Dispatch) beginPeer() {
	x := t.x
	r := &t.r
	bs := max(x.cfg.BlockSize, 1)
	pc := &x.cfg.Peer
	var dd Decision
	if x.cfg.Mechanism == MechConditional {
		dd = t.pickDynamo()
	} else {
		dd = t.pickD(r.key(), func(d int) bool { return !r.avoids(d) })
		if dd.Worker < 0 {
			dd = x.d.pick(&t.dOv, r.key(), r.Blocks)
		}
	}
	d := dd.Worker
	uncached := max(r.Input-dd.Overlap*bs, 0) // Dynamo's eff_isl, llm-d's nonCachedTokens
	t.dBlk = (r.Input + max(r.Output, 1) + bs - 1) / bs
	switch x.cfg.Mechanism {
	case MechDecodeRadix:
		if t.paths() {
			t.note("decode radix: %s holds %d of %d prompt tokens; P sends the rest", x.d.names[d], r.Input-uncached, r.Input)
		}
		t.peerPD(d, ModeDecodeRadixPD)
	case MechPrefixDecider:
		switch {
		case pc.NonCachedTokens == 0:
			t.note("prefix decider: nonCachedTokens 0 disables disaggregation")
		case pc.PromptTokens > 0 && r.Input < pc.PromptTokens:
			if t.paths() {
				t.note("prefix decider: prompt %d < promptTokens %d", r.Input, pc.PromptTokens)
			}
		case uncached < pc.NonCachedTokens:
			if t.paths() {
				t.note("prefix decider: uncached suffix %d on %s < nonCachedTokens %d", uncached, x.d.names[d], pc.NonCachedTokens)
			}
		default:
			if t.paths() {
				t.note("prefix decider: uncached suffix %d on %s ≥ nonCachedTokens %d", uncached, x.d.names[d], pc.NonCachedTokens)
			}
			t.peerPD(d, ModeDeciderPD)
			return
		}
		if !x.localOnD(d) {
			if t.paths() {
				t.note("no local prefill: %s cannot prefill it (no conditional aggregation)", x.d.names[d])
			}
			t.peerPD(d, ModeDeciderPD)
			return
		}
		t.decide(ActLocal, -1, d, ModeDeciderLocal)
	case MechConditional:
		p := t.prefillWorker()
		isl := uncached < pc.EffISLThreshold && float64(uncached)/float64(max(r.Input, 1)) < pc.EffISLRatio
		busy := float64(x.pActive[p]) > pc.PrefillBusy*float64(pc.PrefillBatchTokens)
		var bypass bool
		switch pc.Strategy {
		case StrategyLoad:
			bypass = busy
		case StrategyISLLoad:
			bypass = isl || busy
		default:
			bypass = isl
		}
		if t.paths() {
			t.note("conditional %s: eff_isl %d of %d on %s (isl %t), %s active prefill %d tokens (busy %t)",
				pc.Strategy, uncached, r.Input, x.d.names[d], isl, x.p.names[p], x.pActive[p], busy)
		}
		if bypass && pc.DecodeBusy > 0 && float64(x.dActive[d]+t.dBlk) > pc.DecodeBusy*float64(x.cfg.DecodeKVBlocks) {
			if t.paths() {
				t.note("decode-busy gate: %s has %d active blocks + %d > %g × %d", x.d.names[d], x.dActive[d], t.dBlk, pc.DecodeBusy, x.cfg.DecodeKVBlocks)
			}
			bypass = false
		}
		if bypass && !x.localOnD(d) {
			if t.paths() {
				t.note("no local prefill: %s cannot prefill it (no conditional aggregation)", x.d.names[d])
			}
			bypass = false
		}
		if bypass {
			t.decide(ActLocal, -1, d, ModeCondLocal)
			t.dPre = (uncached + bs - 1) / bs
			return
		}
		t.peerPD(d, ModeCondPD)
	}
}

// peerPD sends the request through P to the peer's chosen decoder d (or,
// when d's transfer breaker is open, the decoder plain PD would use).
func (t *Dispatch) peerPD(d int, mode string) {
	x := t.x
	if !x.breakers[d].allows(t.now) {
		if t.paths() {
			t.note("skip %s: its transfer breaker is open", x.d.names[d])
		}
		t.plainPD(mode)
		t.setPrefillLoad()
		return
	}
	t.decide(ActPD, t.prefillWorker(), d, mode)
	t.setPrefillLoad()
}

// setPrefillLoad is what this request adds to its prefill worker's active
// prefill tokens: its prompt less what P's router believes P holds.
func (t *Dispatch) setPrefillLoad() {
	if t.chosenP < 0 {
		return
	}
	ov := t.pickPAmong(func(p int) bool { return p == t.chosenP }).Overlap
	t.pTok = max(t.r.Input-ov*max(t.x.cfg.BlockSize, 1), 1)
}

// ActiveLoad is the peers' load bookkeeping summed over the pools: prefill
// tokens and decode blocks of requests in flight (both 0 once every request
// has ended; tests hold it to that).
func (x *Dispatcher) ActiveLoad() (prefillTokens, decodeBlocks int) {
	for _, v := range x.pActive {
		prefillTokens += v
	}
	for i, v := range x.dActive {
		decodeBlocks += v + x.dPrefill[i]
	}
	return prefillTokens, decodeBlocks
}

// pickDynamo is the decode-route preview of Dynamo's KV router with its
// default cost (router-concepts.md): for each decoder,
//
//	cost = max(active prefill blocks + incoming blocks − overlap blocks, 0) + active decode blocks + incoming blocks
//
// (prefill load scale and overlap credit 1), lowest cost first, ties to the
// lowest index. With session affinity (AffinityTTLS, off by default) a
// session bound to a decoder within the TTL goes there. The overlap is the
// decoder's own (KV events) unless DecodeCached is nil.
func (t *Dispatch) pickDynamo() Decision {
	x := t.x
	r := &t.r
	bs := max(x.cfg.BlockSize, 1)
	in := (r.Input + bs - 1) / bs
	overlap := func(d int) int {
		switch {
		case x.cfg.Peer.DecodeCached != nil:
			return x.cfg.Peer.DecodeCached(d, r.Session, r.SessionNum, r.Blocks, r.Input) / bs
		case x.d.index != nil:
			return x.d.overlap(&t.dOv, d, r.Blocks)
		}
		return 0
	}
	if s := x.sess(r.key()); x.cfg.Peer.AffinityTTLS > 0 && s != nil && s.bound && !r.avoids(s.boundD) {
		if age := t.now - s.boundAt; age <= x.cfg.Peer.AffinityTTLS {
			if t.paths() {
				t.note("session affinity: bound to %s %.1f s ago", x.d.names[s.boundD], age)
			}
			return Decision{Worker: s.boundD, Overlap: overlap(s.boundD), Sticky: true}
		}
		s.bound = false
	}
	best := Decision{Worker: -1}
	bestCost := 0
	for pass := 0; pass < 2 && best.Worker < 0; pass++ {
		for d := range x.d.names {
			if pass == 0 && r.avoids(d) {
				continue
			}
			ov := overlap(d)
			cost := max(x.dPrefill[d]+in-ov, 0) + x.dActive[d] + in
			if best.Worker < 0 || cost < bestCost {
				best, bestCost = Decision{Worker: d, Overlap: ov}, cost
			}
		}
	}
	return best
}

// bindSession records pd-conditional's session binding when a request is
// accepted: the first successful dispatch binds, later ones refresh it.
func (x *Dispatcher) bindSession(t *Dispatch) {
	if x.cfg.Mechanism != MechConditional || x.cfg.Peer.AffinityTTLS <= 0 {
		return
	}
	s := x.session(t.r.key())
	s.bound, s.boundD, s.boundAt = true, t.chosenD, t.now
}
