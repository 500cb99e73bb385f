package engine

import "testing"

// A residency probe and an admission agree on what is resident, at the
// edges: a pinned session whose query matches nothing here; a session
// evicted at session granularity whose prefix still matches a plain
// prompt's cache; a prompt cached whole (one token is always computed).
func TestResidencyEdgesByHand(t *testing.T) {
	// s (4 blocks, pinned) asked about blocks this worker never saw: 0
	// cached, not resident, so a seed of a session that was here.
	w, now := plainAndS(t, SessionConfig{})
	q := AdmitQuery{Session: "s", Blocks: chain(7, 2), Input: 128, Output: 1}
	if res, cached, tier := w.SessionTier(now, q); res || cached != 0 || tier != TierNone {
		t.Errorf("s on other blocks: probe %v, %d, %s; want not resident, 0", res, cached, tier)
	}
	if rep := w.AdmitSession(now, q); !rep.CanAdmit || rep.Mode != AdmitSeed || rep.Reason != ReasonWasEvicted {
		t.Errorf("s on other blocks: reply %+v, want a seed (was evicted)", rep)
	}

	// s's whole prompt asked again: 256 cached, capped at 255.
	w, now = plainAndS(t, SessionConfig{})
	q = AdmitQuery{Session: "s", Blocks: chain(3, 4), Input: 256, Output: 1}
	if res, cached, tier := w.SessionTier(now, q); !res || cached != 255 || tier != TierHBM {
		t.Errorf("s's own prompt: probe %v, %d, %s; want resident, 255, hbm", res, cached, tier)
	}
	if rep := w.AdmitSession(now, q); !rep.CanAdmit || rep.Mode != AdmitDirect || rep.CachedTokens != 255 {
		t.Errorf("s's own prompt: reply %+v, want a direct append over 255", rep)
	}

	// e's and f's prompts extend the plain one's 3 blocks, by 2 and 1;
	// forcing a seed evicts e's own 2 blocks, and the 3 shared ones (192
	// tokens, pinned by f) still match: e is not resident at session
	// granularity, idle and unpinned.
	w, now = plainAndS(t, SessionConfig{})
	now = fullOn(t, w, now, 4, "f", append(chain(2, 3), chain(6, 1)...), 256, 1)
	eb := append(chain(2, 3), chain(5, 2)...)
	now = fullOn(t, w, now, 3, "e", eb, 320, 1)
	w.AdmitSession(now, AdmitQuery{Session: "e", Blocks: chain(8, 1), Input: 64, Output: 1, ForceSeed: true})
	q = AdmitQuery{Session: "e", Blocks: eb, Input: 320, Output: 1}
	if res, cached, tier := w.SessionTier(now, q); res || cached != 192 || tier != TierNone {
		t.Errorf("evicted e: probe %v, %d, %s; want not resident, 192", res, cached, tier)
	}
	if rep := w.AdmitSession(now, q); !rep.CanAdmit || rep.Mode != AdmitSeed || rep.CachedTokens != 192 {
		t.Errorf("evicted e: reply %+v, want a seed over 192 cached", rep)
	}
}

// The probe counts the output tail's whole blocks (filed under the next
// prompt's ids) only when the pool has room for them: s's 256-token prompt
// and 129 output tokens leave a tail of 128 (the last token has no KV), 2
// blocks past the prompt's 4; the next prompt of 8 blocks then has
// 6 · 64 = 384 cached. In a pool of 512 the 128 free are exactly the room;
// in 511 there are 127 and the tail is not counted: 256.
func TestPeekCachedTailRoomByHand(t *testing.T) {
	for _, tc := range []struct {
		pool   int64
		cached int
	}{{512, 384}, {511, 256}} {
		w := sessionWorker(t, EvictSession, tc.pool)
		now := seedOn(t, w, 0, "s", chain(1, 4), 256, 129)
		if w.free() != tc.pool-384 {
			t.Fatalf("pool %d: %d free after the seed, want %d", tc.pool, w.free(), tc.pool-384)
		}
		if res, cached, _ := w.SessionTier(now, AdmitQuery{Session: "s", Blocks: chain(1, 8), Input: 512, Output: 1}); !res || cached != tc.cached {
			t.Errorf("pool %d: probe %v, %d cached; want resident, %d", tc.pool, res, cached, tc.cached)
		}
	}
}

// The room for the tail counts the evictable cache: a plain 64-token
// prompt's cache beside 64 free tokens makes the 128 the tail needs. A
// session whose prompt is shorter than a block has no whole prompt block
// for the tail to follow, and only its own match counts.
func TestPeekCachedTailRoomCountsCache(t *testing.T) {
	w := coloSessions(t, 512, SessionConfig{})
	now := fullOn(t, w, 0, 1, "", chain(2, 1), 64, 1)
	now = fullOn(t, w, now, 2, "s", chain(1, 4), 256, 129)
	if w.free() != 64 || w.evictable() != 64 {
		t.Fatalf("%d free, %d evictable; want 64, 64", w.free(), w.evictable())
	}
	if res, cached, _ := w.SessionTier(now, AdmitQuery{Session: "s", Blocks: chain(1, 8), Input: 512, Output: 1}); !res || cached != 384 {
		t.Errorf("probe %v, %d cached; want resident, 384", res, cached)
	}

	w = sessionWorker(t, EvictSession, 4096)
	now = seedOn(t, w, 0, "s", chain(1, 1), 32, 129)
	if _, cached, _ := w.SessionTier(now, AdmitQuery{Session: "s", Blocks: chain(1, 4), Input: 256, Output: 1}); cached > 32 {
		t.Errorf("a 32-token prompt's session: %d cached, want at most its 32", cached)
	}
}
