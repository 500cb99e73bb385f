package kvc

// The 2026 rivals as baselines (issue 24; docs/peer-baselines.md, "The 2026
// rivals"): two published ways of prefilling on decoders, each a mechanism
// of this dispatcher on the peers' cluster (decoders with SGLang's decode
// radix cache and local prefill), so they differ from the peers only in
// when a request skips P:
//
//   - pd-ppd, PPD disaggregation (Li et al., "Not All Prefills Are Equal:
//     PPD Disaggregation for Multi-turn LLM Serving", arXiv 2603.13358):
//     turn 1 goes through P; a turn-2+ request (by its turn number, and
//     its decoder already holds part of its prompt) is append-prefilled on that decoder when the
//     SLO-weighted gain beats the harm: w_ttft·(TTFT via P − TTFT on D)/TTFT
//     SLO ≥ w_tpot·(the append's stall spread over a decode)/TPOT SLO. The
//     paper's published text stored here gives the rule's shape (turn 2+,
//     local on the decode node, configurable SLO weights) but not its
//     formula; this is that shape with the engine's cost model.
//   - pd-deflect, load-aware prefill deflection (Bharadwaj et al.,
//     "Towards Load-Aware Prefill Deflection for Disaggregated LLM
//     Serving", arXiv 2607.02043): every request's TTFT on P is estimated
//     (P's queue plus its own prefill); within the TTFT SLO it goes
//     through P; over it, each decoder is searched for the largest chunk
//     whose mixed step stays within the TBT SLO, and the request is
//     deflected to the decoder with the lowest such TTFT when that beats P.
//
// Both need the engine's cost model (RivalConfig.Cost) to turn tokens into
// seconds: the simulator's profile, or in the live gateway the workers'
// (StallCostOf, costmodel.go), as for KVC v4.

const (
	MechPPD     Mechanism = "pd-ppd"
	MechDeflect Mechanism = "pd-deflect"
)

// Execution-mode labels of the rivals.
const (
	ModePPDTurn1   = "pd-ppd-turn1-router"
	ModePPDLocal   = "pd-ppd-append-on-d"
	ModePPDPD      = "pd-ppd-disagg-router"
	ModeDeflectD   = "pd-deflect-prefill-on-d"
	ModeDeflectPD  = "pd-deflect-disagg-router"
	minDeflectStep = 16 // tokens: a decoder whose TBT slack fits fewer per step takes no deflection
)

// IsRival reports whether m is one of the 2026 rivals.
func (m Mechanism) IsRival() bool { return m == MechPPD || m == MechDeflect }

// RivalConfig holds the rivals' SLOs, PPD's weights and the cost model.
type RivalConfig struct {
	TTFTSLOS, TPOTSLOS     float64 // seconds; TPOT is the deflection's TBT
	TTFTWeight, TPOTWeight float64 // PPD's SLO weights
	Cost                   StallCost
}

// Rival defaults: the SLOs of the goodput the tables count (docs/kvc-v4.md,
// ttft:2000 tpot:50) and PPD's weights equal.
const (
	DefaultRivalTTFTSLOS = 2.0
	DefaultRivalTPOTSLOS = 0.050
)

// Defaults fills what is unset (0) with the rivals' defaults.
func (rc RivalConfig) Defaults() RivalConfig {
	if rc.TTFTSLOS <= 0 {
		rc.TTFTSLOS = DefaultRivalTTFTSLOS
	}
	if rc.TPOTSLOS <= 0 {
		rc.TPOTSLOS = DefaultRivalTPOTSLOS
	}
	if rc.TTFTWeight <= 0 && rc.TPOTWeight <= 0 {
		rc.TTFTWeight, rc.TPOTWeight = 1, 1
	}
	return rc
}

// queueS is the time n queued prefill tokens of other requests take: one
// step overhead per chunk and the per-token work (their attention depends
// on contexts the router does not know, and is left out).
func (c StallCost) queueS(n int) float64 {
	if n <= 0 {
		return 0
	}
	chunks := 1
	if c.ChunkTokens > 0 {
		chunks = (n + c.ChunkTokens - 1) / c.ChunkTokens
	}
	return float64(chunks)*c.OverheadS + c.PerTokenS*float64(n)
}

// ttftViaP is the TTFT P's router expects for this request on prefill
// worker p: P's active prefill tokens, then the prompt less P's overlap.
func (t *Dispatch) ttftViaP(p int) float64 {
	c := &t.x.cfg.Peer.Rival.Cost
	ov := t.pickPAmong(func(q int) bool { return q == p }).Overlap * max(t.x.cfg.BlockSize, 1)
	ov = min(ov, max(t.r.Input-1, 0))
	return c.queueS(t.x.pActive[p]) + c.PrefillS(t.r.Input-ov, ov)
}

// rivalStart is what both rivals do first: the session's decoder (or
// the kv-aware pick when none holds it) and the decode blocks the request
// will take there.
func (t *Dispatch) rivalStart() (bs int, rc RivalConfig, dd Decision) {
	x, r := t.x, &t.r
	bs = max(x.cfg.BlockSize, 1)
	rc = x.cfg.Peer.Rival.Defaults()
	dd = t.pickD(r.key(), func(d int) bool { return !r.avoids(d) })
	if dd.Worker < 0 {
		dd = x.d.pick(&t.dOv, r.key(), r.Blocks)
	}
	t.dBlk = (r.Input + max(r.Output, 1) + bs - 1) / bs
	return bs, rc, dd
}

// beginPPD: turn 1 through P; turn 2+ on its decoder when the weighted
// gain in TTFT beats the weighted harm to the decode batch's TPOT.
func (t *Dispatch) beginPPD() {
	x, r := t.x, &t.r
	bs, rc, dd := t.rivalStart()
	d := dd.Worker
	held := min(dd.Overlap*bs, max(r.Input-1, 0))
	if r.Turn <= 1 || held == 0 { // a first turn may share a prefix with other sessions: it is still turn 1
		t.note("ppd: turn %d, %s holds %d of the prompt: through P", r.Turn, x.d.names[d], held)
		t.peerPD(d, ModePPDTurn1)
		return
	}
	p := t.prefillWorker()
	app := r.Input - held
	viaP := t.ttftViaP(p)
	stall := rc.Cost.PrefillS(app, held)
	onD := rc.Cost.queueS(x.dPrefill[d]*bs) + stall
	gain := (viaP - onD) / rc.TTFTSLOS
	harm := 0.0
	if x.dActive[d] > 0 { // a batch decodes there: the append stalls it
		harm = stall / float64(max(r.Output-1, 1)) / rc.TPOTSLOS
	}
	local := rc.TTFTWeight*gain >= rc.TPOTWeight*harm && viaP > onD
	if t.paths() {
		t.note("ppd: append %d on %s (holds %d): TTFT via P %.3f s, on D %.3f s; gain %.3f·%g vs harm %.3f·%g",
			app, x.d.names[d], held, viaP, onD, gain, rc.TTFTWeight, harm, rc.TPOTWeight)
	}
	if !local || !x.localOnD(d) {
		t.peerPD(d, ModePPDPD)
		return
	}
	t.decide(ActLocal, -1, d, ModePPDLocal)
	t.dPre = (app + bs - 1) / bs
}

// deflectChunk is the largest chunk of a prefill after p tokens whose
// step fits the TBT SLO (0 when not even minDeflectStep tokens fit).
func (rc *RivalConfig) deflectChunk(p int) int {
	c := rc.Cost
	fits := func(n int) bool {
		return c.OverheadS+c.PerTokenS*float64(n)+c.AttnS*float64(n)*(float64(p)+float64(n)/2) <= rc.TPOTSLOS
	}
	hi := c.ChunkTokens
	if hi <= 0 {
		hi = 1 << 20
	}
	if !fits(minDeflectStep) {
		return 0
	}
	lo := minDeflectStep
	for lo < hi { // the largest n ≤ ChunkTokens with fits(n)
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// deflectTTFT is the TTFT of a prefill of n tokens after p cached on a
// decoder with q tokens of local prefill queued: each step at most the TBT
// SLO, in chunks sized at the end of the prompt (the costliest).
func (rc *RivalConfig) deflectTTFT(n, p, q int) (float64, bool) {
	c := rc.deflectChunk(p + n + q)
	if c == 0 {
		return 0, false
	}
	steps := (n + q + c - 1) / c
	return float64(steps) * rc.TPOTSLOS, true
}

// beginDeflect: through P while P meets the TTFT SLO; else to the decoder
// whose TBT-bounded chunked prefill gives the lowest TTFT, when it beats P.
func (t *Dispatch) beginDeflect() {
	x, r := t.x, &t.r
	bs, rc, dd := t.rivalStart()
	p := t.prefillWorker()
	viaP := t.ttftViaP(p)
	if viaP <= rc.TTFTSLOS {
		if t.paths() {
			t.note("deflect: TTFT via %s %.3f s within the SLO %.3f s", x.p.names[p], viaP, rc.TTFTSLOS)
		}
		t.peerPD(dd.Worker, ModeDeflectPD)
		return
	}
	best, bestS, bestN := -1, viaP, 0
	for d := range x.d.names {
		if r.avoids(d) || !x.localOnD(d) {
			continue
		}
		ov := 0
		if x.d.index != nil {
			ov = min(x.d.overlap(&t.dOv, d, r.Blocks)*bs, max(r.Input-1, 0))
		}
		s, ok := rc.deflectTTFT(r.Input-ov, ov, x.dPrefill[d]*bs)
		if ok && s < bestS {
			best, bestS, bestN = d, s, r.Input-ov
		}
	}
	if t.paths() {
		t.note("deflect: TTFT via %s %.3f s over the SLO %.3f s; best decoder %d at %.3f s", x.p.names[p], viaP, rc.TTFTSLOS, best, bestS)
	}
	if best < 0 {
		t.peerPD(dd.Worker, ModeDeflectPD)
		return
	}
	t.decide(ActLocal, -1, best, ModeDeflectD)
	t.dPre = (bestN + bs - 1) / bs
}
