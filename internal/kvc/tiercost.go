package kvc

// Tier costing (issue 24): a session whose prefix a decoder keeps on its
// host tier is not free to append to. The engine loads the host's blocks
// back over the GPU's host link in the first prefill step of the turn,
// layer by layer beside that step's compute (engine/hicache.go's hiStepS:
// the step takes the longer of the two plus one layer's share of the
// shorter), and that step stalls the decoder's batch like any prefill. The
// other way to the same decoder is a reseed through P: P computes what its
// own cache lacks and the KV crosses the P→D link. With TierCost set, a
// decoder's answer that it would append from its host tier is costed both
// ways with the engine's own model, and the cheaper one that v4's stall
// budget allows runs.

// TierCost is the engine's cost model of moving a prefix between tiers.
// The zero value is off: host-tier prefixes count as cached, as before.
type TierCost struct {
	KVBytesPerToken int64
	Layers          int
	// HostBandwidth (bytes/s) and HostSetupS are the GPU↔host link
	// (model.Profile.HostLink); XferBandwidth and XferSetupS the P→D link.
	HostBandwidth, HostSetupS float64
	XferBandwidth, XferSetupS float64
	// StorageBandwidth and StorageSetupS are the storage link a decoder
	// prefetches over (model.Profile.StorageLink; 0 without a storage tier:
	// storage answers are then not costed).
	StorageBandwidth, StorageSetupS float64
	// StorageBestEffort: the storage tier's prefetch policy is best_effort,
	// under which a request admitted the moment it arrives has received
	// nothing from storage (engine/storage.go): its storage tokens are
	// costed as computed, not prefetched.
	StorageBestEffort bool
	// StorageShared: one storage pool for every decoder (SGLang's L3 as one
	// store), so a session only storage holds is tied to no decoder
	// (SessionStored).
	StorageShared bool
	// StoragePoolBandwidth is that shared pool's aggregate bandwidth in
	// bytes/s (--hicache-storage-shared-bandwidth; 0 unlimited): a prefetch
	// waits for those booked on it before, which a storage answer says
	// (AdmitReply.StorageQueueS).
	StoragePoolBandwidth float64
	// ShortestFirst and BypassTokens are how the decoders order their
	// queues (engine.Config.ShortestFirst, SessionConfig.BypassTokens): a
	// prompt admitted shortest first, or one the bypass takes past a long
	// chunked prefill, is not behind the decoder's queued prefill, so its
	// prefetch is not priced as overlapping that queue (overlapS).
	ShortestFirst bool
	BypassTokens  int
}

// On reports whether tier costing is configured.
func (c TierCost) On() bool { return c.HostBandwidth > 0 && c.KVBytesPerToken > 0 }

// LoadS is the host link's time for tokens of KV (model.Link.TransferS).
func (c TierCost) LoadS(tokens int) float64 {
	if tokens <= 0 || c.HostBandwidth <= 0 {
		return 0
	}
	return c.HostSetupS + float64(int64(tokens)*c.KVBytesPerToken)/c.HostBandwidth
}

// PrefetchS is the storage link's time for tokens of KV: the prefetch
// storage→host a storage answer waits for before its load-back, over the
// decoder's own link alone (PrefetchDoneS adds a shared pool's queue).
func (c TierCost) PrefetchS(tokens int) float64 {
	if tokens <= 0 || c.StorageBandwidth <= 0 {
		return 0
	}
	return c.StorageSetupS + float64(int64(tokens)*c.KVBytesPerToken)/c.StorageBandwidth
}

// StorageQuote is a storage answer's prefetch as tier costing prices it:
// the storage tokens, the seconds the shared pool's aggregate link is
// booked ahead of it (AdmitReply.StorageQueueS) and the seconds the request
// is expected to wait in the decoder's queue before it is admitted (its
// prefetch runs meanwhile, from its arrival, as the engine runs it).
type StorageQuote struct {
	Tokens             int
	PoolQueueS, AheadS float64
}

// PrefetchDoneS is when, from the request's arrival, the last of tokens
// of KV has arrived from storage: over the decoder's own link, or, with a
// shared pool of known aggregate bandwidth, after the prefetches booked on
// it before (poolQueueS) and its own bytes at that bandwidth when that is
// later (the engine's storageTier.reserve, first booked first served).
func (c TierCost) PrefetchDoneS(tokens int, poolQueueS float64) float64 {
	own := c.PrefetchS(tokens)
	if own == 0 || c.StoragePoolBandwidth <= 0 {
		return own
	}
	return max(own, max(poolQueueS, 0)+float64(int64(tokens)*c.KVBytesPerToken)/c.StoragePoolBandwidth+c.StorageSetupS)
}

// StoragePrefetch is what q's prefetch adds to the decoder's prefill step:
// waitS, how long the step waits for pages beyond the request's expected
// queue (under wait_complete the rest of the prefetch, done − ahead, 0 when
// it arrives while the request queues), and arrived, the storage tokens
// that are loaded rather than computed: all of them, or under best_effort
// (which waits for nothing) those that arrive while the request queues,
// pages evenly from the link's setup to the prefetch's end (the engine's
// arrivedTokens); the rest are computed.
func (c TierCost) StoragePrefetch(q StorageQuote) (waitS float64, arrived int) {
	if q.Tokens <= 0 {
		return 0, 0
	}
	done := c.PrefetchDoneS(q.Tokens, q.PoolQueueS)
	if !c.StorageBestEffort {
		return max(done-max(q.AheadS, 0), 0), q.Tokens
	}
	since, span := q.AheadS-c.StorageSetupS, done-c.StorageSetupS
	switch {
	case since <= 0 || span <= 0:
		return 0, 0
	case since >= span:
		return 0, q.Tokens
	}
	return 0, int(float64(q.Tokens) * since / span)
}

// QuoteS is a prefill of n new tokens after p cached ones of which host
// are loaded back from host and q.Tokens prefetched from storage first,
// in two parts: waitS, what the request waits for its pages past its
// expected queue, in the queue (the engine, as SGLang's scheduler, leaves
// a prefetching request waiting and runs others: engine/storagepark.go),
// and stepS, the prefill itself, which loads host + the arrived storage
// tokens beside its first chunk and computes the storage tokens that did
// not arrive (StoragePrefetch). Only stepS stalls the decode batch.
func (c TierCost) QuoteS(s StallCost, n, p, host int, q StorageQuote) (waitS, stepS float64) {
	if q.Tokens <= 0 {
		return 0, c.PrefillWithLoadS(s, n, p, host)
	}
	wait, got := c.StoragePrefetch(q)
	miss := q.Tokens - got
	return wait, c.PrefillWithLoadS(s, n+miss, p-miss, host+got)
}

// PrefillWithQuoteS is QuoteS's two parts together: from the request's
// expected admission to its prefill's end.
func (c TierCost) PrefillWithQuoteS(s StallCost, n, p, host int, q StorageQuote) float64 {
	wait, step := c.QuoteS(s, n, p, host, q)
	return wait + step
}

// PrefillWithTiersS is PrefillWithQuoteS for a request admitted the moment
// it arrives on an unqueued pool: the step waits for the whole prefetch,
// or under best_effort computes every storage token.
func (c TierCost) PrefillWithTiersS(s StallCost, n, p, host, storage int) float64 {
	return c.PrefillWithQuoteS(s, n, p, host, StorageQuote{Tokens: storage})
}

// TransferS is the P→D link's time for tokens of KV.
func (c TierCost) TransferS(tokens int) float64 {
	if tokens <= 0 || c.XferBandwidth <= 0 {
		return 0
	}
	return c.XferSetupS + float64(int64(tokens)*c.KVBytesPerToken)/c.XferBandwidth
}

// PrefillWithLoadS is what a prefill of n new tokens after p cached ones
// takes when host of the p are loaded back from the host tier first: the
// load rides on the first chunk's step, overlapped layer by layer as the
// engine overlaps it (max(c + l/L, l + c/L) for a chunk of c seconds and a
// load of l over L layers); the other chunks run as without a load.
func (c TierCost) PrefillWithLoadS(s StallCost, n, p, host int) float64 {
	total := s.PrefillS(n, p)
	if host <= 0 {
		return total
	}
	n1 := max(n, 1)
	if s.ChunkTokens > 0 && n1 > s.ChunkTokens {
		n1 = s.ChunkTokens
	}
	c1 := s.PrefillS(n1, p)
	l := c.LoadS(host)
	layers := float64(max(c.Layers, 1))
	return total - c1 + max(c1+l/layers, l+c1/layers)
}

// tierChoice is the two costs of a host-tier answer, in seconds from now
// to the prefill's end: the load-back on the decoder and the reseed
// through P (P's queue, its prefill of what it lacks, the transfer).
type tierChoice struct {
	loadS, reseedS float64
	fits           bool // v4: the load-back's stall fits the decoder's budget
}

// v3TierCosts costs decoder d's host-tier direct answer rep against a
// reseed through prefill worker p.
func (t *Dispatch) v3TierCosts(d, p int, rep AdmitReply) tierChoice {
	x := t.x
	tc, sc := x.cfg.V3.Tiers, x.iso().Cost
	x.ensureLoad()
	n := max(t.r.Input-rep.CachedTokens, 1)
	queued := sc.PrefillS(x.load.d[d], 0)
	wait, stall := tc.QuoteS(sc, n, rep.CachedTokens, rep.HostTokens, tc.quote(rep, tc.overlapS(queued, n)))
	ch := tierChoice{loadS: queued + wait + stall, fits: true}
	pu := t.pUncached(p)
	ch.reseedS = sc.PrefillS(x.load.p[p], 0) + sc.PrefillS(pu, t.r.Input-pu) + tc.TransferS(t.r.Input)
	if x.v4On() && x.v4Decoding(false, d) && stall > x.v4Level(x.v4Bucket(false, d), t.now) && !t.v4PBusy() {
		ch.fits = false
	}
	return ch
}

// v3TierPlace decides a host-tier direct answer from d: the load-back runs
// (it returns false, and the direct append goes on) unless the reseed
// through P is cheaper or v4's budget refuses the load-back's stall; then
// it seeds through P to d and reports true. A decoder whose transfer
// breaker is open, or at its seed cap, keeps the load-back.
func (t *Dispatch) v3TierPlace(d int, rep AdmitReply) bool {
	x := t.x
	if !lowerTier(rep, x.cfg.V3.Tiers) || !x.v3Counts() || !x.cfg.V3.Tiers.On() || x.p == nil || x.v3NoP() {
		return false
	}
	p := t.prefillWorker()
	if p < 0 || !x.breakers[d].allows(t.now) || x.cfg.SeedMaxInflight > 0 && x.seeding[d] >= x.cfg.SeedMaxInflight {
		return false
	}
	ch := t.v3TierCosts(d, p, rep)
	through := !ch.fits || ch.reseedS < ch.loadS
	if t.paths() {
		t.note("tier costing: %s holds %d of %d cached tokens on %s: load-back %.3f s%s, reseed through %s %.3f s: %s",
			x.d.names[d], rep.HostTokens+rep.StorageTokens, rep.CachedTokens, rep.Tier, ch.loadS, verdict(ch.fits, "", " (over its stall budget)"),
			x.p.names[p], ch.reseedS, verdict(through, "through P", "load back"))
	}
	if !through {
		t.tiered(d, rep, x.cfg.V3.Tiers.pricedStorage(rep))
		return false
	}
	t.decide(ActSeed, p, d, ModeHostReseed)
	return true
}

// loadStallS is the stall of a prefill of n tokens after p cached ones on
// the decoder that loads t.host of them back from host and t.prefetch
// from storage, as quoted when the placement was chosen (tiered): the
// step, not the prefetch it waited for in the queue (QuoteS).
func (t *Dispatch) loadStallS(n, p int) float64 {
	_, step := t.x.cfg.V3.Tiers.QuoteS(t.x.iso().Cost, n, p, t.host,
		StorageQuote{Tokens: t.prefetch, PoolQueueS: t.stQueueS, AheadS: t.stAheadS})
	return step
}

// tiered records the tiers a prefill on decoder d reads from, as answered
// in rep: host tokens to load back and storage tokens to prefetch, with
// the shared pool's queue the answer named and the prefill queued on d
// now (the time the prefetch runs before admission).
func (t *Dispatch) tiered(d int, rep AdmitReply, storage int) {
	t.host, t.prefetch, t.stQueueS, t.stAheadS = rep.HostTokens, storage, 0, 0
	if storage > 0 {
		x := t.x
		x.ensureLoad()
		n := max(t.r.Input-rep.CachedTokens, 1)
		t.stQueueS, t.stAheadS = rep.StorageQueueS, x.cfg.V3.Tiers.overlapS(x.iso().Cost.PrefillS(x.load.d[d], 0), n)
	}
}

// overlapS is how long a prefetch is priced to run while its request of
// n uncached tokens queues on a decoder with queued seconds of prefill
// ahead: all of it in arrival order; none when the decoder admits it
// sooner (shortest first, or past a long chunked prefill by the bypass),
// where it waits for the step in progress only, which the router does not
// know: priced as admitted at once (nothing arrives under best_effort, the
// whole prefetch is waited for under wait_complete).
func (c TierCost) overlapS(queued float64, n int) float64 {
	if c.ShortestFirst || n <= c.BypassTokens {
		return 0
	}
	return queued
}

// untiered forgets what tiered recorded (the placement went elsewhere).
func (t *Dispatch) untiered() { t.host, t.prefetch, t.stQueueS, t.stAheadS = 0, 0, 0, 0 }

// quote is rep's storage part as priced (pricedStorage) for a request
// expected to wait ahead seconds before admission.
func (c TierCost) quote(rep AdmitReply, ahead float64) StorageQuote {
	return StorageQuote{Tokens: c.pricedStorage(rep), PoolQueueS: rep.StorageQueueS, AheadS: ahead}
}

// lowerTier reports whether a direct answer loads its prefix from a tier
// below HBM that tier costing prices: host, or storage when the storage
// link is known; a storage answer with a host part (a partial host hit
// the storage pool extends) has that part priced even when it is not.
func lowerTier(rep AdmitReply, c TierCost) bool {
	switch rep.Tier {
	case TierHost:
		return rep.HostTokens > 0
	case TierStorage:
		return rep.StorageTokens > 0 && c.StorageBandwidth > 0 || rep.HostTokens > 0
	}
	return false
}

// pricedStorage is the storage tokens of an answer tier costing prices as
// a prefetch: all of them when the storage link is known, none when it is
// not (they count as cached, as for a gateway that knows no storage).
func (c TierCost) pricedStorage(rep AdmitReply) int {
	if c.StorageBandwidth <= 0 {
		return 0
	}
	return rep.StorageTokens
}

// ModeHostReseed is a session its decoder kept on host reseeded through P
// because the reseed cost less than the load-back, or the load-back's stall
// was over the decoder's budget.
const ModeHostReseed = "pd-router-host-tier-reseed"

// TierTokens is the router's belief of where a session's prefix is and how
// many of its tokens each tier holds: hbm, host, storage (0 when the tier
// is none; the tokens once the request in flight ends are not yet known,
// 0). A storage belief may carry a host part too (a partial host hit).
func (x *Dispatcher) TierTokens(session string) (tier string, hbm, host, storage int) {
	s := x.sess(SessionKey{ID: session})
	tier = x.Tier(session)
	switch tier {
	case TierHBM:
		return tier, s.resident, 0, 0
	case TierHost:
		return tier, 0, s.hostTok, 0
	case TierStorage:
		return tier, 0, s.hostTok, s.storeTok
	}
	return tier, 0, 0, 0
}
