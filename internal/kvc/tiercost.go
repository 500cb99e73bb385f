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
// storage→host a storage answer waits for before its load-back. It costs
// the whole prefetch, as the engine's wait_complete policy charges it from
// the request's arrival; the time the request queues meanwhile (which the
// engine overlaps) is not subtracted, nor best_effort's shorter wait.
func (c TierCost) PrefetchS(tokens int) float64 {
	if tokens <= 0 || c.StorageBandwidth <= 0 {
		return 0
	}
	return c.StorageSetupS + float64(int64(tokens)*c.KVBytesPerToken)/c.StorageBandwidth
}

// PrefillWithTiersS is PrefillWithLoadS for a prefill of n new tokens after
// p cached ones of which host are loaded back from host and storage
// prefetched from storage first: the engine's step waits for the prefetch,
// then loads host + storage beside the first chunk. Under best_effort the
// storage tokens are computed instead (StorageBestEffort).
func (c TierCost) PrefillWithTiersS(s StallCost, n, p, host, storage int) float64 {
	if storage <= 0 {
		return c.PrefillWithLoadS(s, n, p, host)
	}
	if c.StorageBestEffort {
		return c.PrefillWithLoadS(s, n+storage, p-storage, host)
	}
	return c.PrefetchS(storage) + c.PrefillWithLoadS(s, n, p, host+storage)
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
	stall := tc.PrefillWithTiersS(sc, n, rep.CachedTokens, rep.HostTokens, tc.pricedStorage(rep))
	ch := tierChoice{loadS: sc.PrefillS(x.load.d[d], 0) + stall, fits: true}
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
		t.host, t.prefetch = rep.HostTokens, x.cfg.V3.Tiers.pricedStorage(rep)
		return false
	}
	t.decide(ActSeed, p, d, ModeHostReseed)
	return true
}

// loadStallS is the stall of a prefill of n tokens after p cached ones on
// the decoder that loads t.host of them back from host and t.prefetch
// from storage (PrefillWithTiersS).
func (t *Dispatch) loadStallS(n, p int) float64 {
	return t.x.cfg.V3.Tiers.PrefillWithTiersS(t.x.iso().Cost, n, p, t.host, t.prefetch)
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
