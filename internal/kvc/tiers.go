package kvc

import "fmt"

// KV tiers in the router's belief. A decoder with a host KV tier (SGLang
// HiCache's L2, engine/hicache.go) that evicts a session from HBM may keep
// it on host: its next turn can still append there, loading the prefix back
// over PCIe in a fraction of what a reseed through P costs. The router then
// keeps believing the decoder holds the session — pin, blocks and all — at
// the host tier, so Algorithm 1 still sends the next turn there, and the
// decoder's admission reply says which tier served it.

// Tiers a session's prefix is believed to be in (Dispatcher.Tier).
const (
	TierHBM  = "hbm"
	TierHost = "host"
	TierNone = "none"
	// TierStorage is the protocol's name for a storage tier below host
	// (docs/worker-protocol.md, revision 1.1): the engine's decoder names it
	// when its storage pool holds some of the prefix beyond what HBM and
	// host hold. Tier costing prices such an answer (tiercost.go), and the
	// belief keeps it: a decoder that reports storing a session it evicted
	// (SessionStored), or answers tier storage, stays the session's pin, so
	// Algorithm 1 sends the next turn where a prefetch, not a reseed,
	// brings the prefix back.
	TierStorage = "storage"
)

// SessionDemoted is a decoder's report that it evicted a session from HBM
// to its host tier. The pinned decoder keeps the session in the router's
// belief, marked as on host; a decoder the session has left is forgotten as
// for SessionEvicted (the router sends the session to its pin, not there).
func (x *Dispatcher) SessionDemoted(d int, session string) {
	x.SessionDemotedKey(d, SessionKey{ID: session})
}

// SessionDemotedKey is SessionDemoted of a session the caller numbers.
func (x *Dispatcher) SessionDemotedKey(d int, session SessionKey) {
	s := x.sess(session)
	x.pinFreed(d, s) // HBM freed it, whatever holds it below (pinbook.go)
	if s == nil || x.cfg.Belief != BeliefTrack {
		return
	}
	if s.pin != d {
		x.SessionEvictedKey(d, session)
		return
	}
	s.onHost, s.hostTok, s.onStore, s.storeTok = true, s.resident, false, 0
}

// SessionStored is a decoder's report that it evicted a session from HBM
// and its host tier could not keep it but its storage pool holds it
// (engine Event.Stored). As SessionDemoted, one tier lower: the pinned
// decoder keeps the session, marked as in storage, so its next turn is
// asked there first (a prefetch from storage, which tier costing weighs
// against a reseed through P); a decoder the session has left forgets it.
// A pool every decoder shares (TierCost.StorageShared) ties the session to
// no decoder: each reads it over its own link and names it in its seed
// answer, so the report is an eviction and the next turn is placed as a
// session no decoder holds. Under best_effort (TierCost.StorageBestEffort)
// tier costing prices storage tokens as computed, so the copy is worth
// nothing to the placement and the report is an eviction too. Both
// measured better than keeping the pin (docs/kvc-v4.md, "Storage in the
// control plane").
func (x *Dispatcher) SessionStored(d int, session string) {
	x.SessionStoredKey(d, SessionKey{ID: session})
}

// SessionStoredKey is SessionStored of a session the caller numbers.
func (x *Dispatcher) SessionStoredKey(d int, session SessionKey) {
	s := x.sess(session)
	x.pinFreed(d, s) // HBM freed it, whatever holds it below (pinbook.go)
	if s == nil || x.cfg.Belief != BeliefTrack {
		return
	}
	if tc := x.cfg.V3.Tiers; s.pin != d || tc.StorageShared || tc.StorageBestEffort {
		x.SessionEvictedKey(d, session)
		return
	}
	s.onHost, s.hostTok, s.onStore, s.storeTok = false, 0, true, s.resident
}

// Tier is where the router believes the session's prefix is: in its
// decoder's HBM, on that decoder's host tier, in its storage pool (the
// lowest tier it reads from: some may be on host too), or nowhere.
func (x *Dispatcher) Tier(session string) string {
	s := x.sess(SessionKey{ID: session})
	switch {
	case s == nil || s.pin < 0:
		return TierNone
	case s.onStore:
		return TierStorage
	case s.onHost:
		return TierHost
	}
	return TierHBM
}

// fromHost is a direct admission's note on the tier it loads from.
func fromHost(rep AdmitReply) string {
	if rep.Tier == TierStorage {
		return fmt.Sprintf(" from its storage tier (%d of %d cached tokens prefetched, then loaded back)", rep.StorageTokens, rep.CachedTokens)
	}
	if rep.Tier != TierHost {
		return ""
	}
	return fmt.Sprintf(" from its host tier (%d of %d cached tokens loaded back)", rep.HostTokens, rep.CachedTokens)
}

// believeTier takes a decoder's answer about the tier it holds a session's
// prefix in into the router's belief (TierTokens), when the session is
// pinned there: "host" with its host tokens (a direct or a seed answer:
// the prefix was demoted, whether or not the router heard the report),
// "storage" with its storage tokens (and the host part, if any: the host
// pool dropped what the storage pool kept), "hbm" as resident in HBM
// again. A decoder that does not say ("") or holds nothing ("none": the
// outcome of the placement decides) changes nothing.
func (x *Dispatcher) believeTier(d int, session SessionKey, rep AdmitReply) {
	s := x.sess(session)
	if s == nil || s.pin != d || x.cfg.Belief != BeliefTrack {
		return
	}
	switch {
	case rep.Tier == TierHost && rep.HostTokens > 0:
		s.onHost, s.hostTok, s.onStore, s.storeTok = true, rep.HostTokens, false, 0
	case rep.Tier == TierStorage && rep.StorageTokens > 0:
		s.onHost, s.hostTok, s.onStore, s.storeTok = false, rep.HostTokens, true, rep.StorageTokens // tier storage, its host part kept
	case rep.Tier == TierHBM:
		s.onHost, s.hostTok, s.onStore, s.storeTok = false, 0, false, 0
	}
}
