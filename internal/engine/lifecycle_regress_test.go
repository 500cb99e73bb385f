package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Bug 1 (issue 20): the session cap was checked only for a session with no
// record; a session evicted earlier keeps its record (session granularity)
// and came back over the cap: cap 1, two resident.
func TestSessionCapEvictedSessionReturns(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000,
		Session: SessionConfig{Enabled: true, Cap: 1}})
	if err != nil {
		t.Fatal(err)
	}
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 4)
	if rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: chain(2, 10), Input: 640, Output: 4}); !rep.CanAdmit || rep.Trimmed != 1 {
		t.Fatalf("b over the cap: %+v, want a trimmed", rep)
	}
	now = seedOn(t, w, now, "b", chain(2, 10), 640, 4)
	rep := w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: chain(1, 12), Input: 768, Output: 4})
	if !rep.CanAdmit || rep.Reason != ReasonWasEvicted {
		t.Fatalf("a back: %+v", rep)
	}
	seedOn(t, w, now, "a", chain(1, 12), 768, 4)
	if n := w.ResidentSessions(); n > 1 {
		t.Fatalf("%d sessions resident under a session cap of 1", n)
	}
}

// Bug 9 (issue 20): a residency probe changed the pool — it named the
// session's output tail (pinned tokens 839 → 640 after one probe) — though
// it is documented to change nothing. It still answers what an admission
// would find cached.
func TestSessionResidencyChangesNothing(t *testing.T) {
	w := sessionWorker(t, EvictSession, 50000)
	b := chain(1, 120)
	now := seedOn(t, w, 0, "s", b[:100], 6400, 200)
	pinned, used, evictable := w.PinnedTokens(), w.Used(), w.evictable()
	q := AdmitQuery{Session: "s", Blocks: b, Input: 7680, Output: 5, MaxAppend: 8192}
	resident, cached := w.SessionResidency(now, q)
	if w.PinnedTokens() != pinned || w.Used() != used || w.evictable() != evictable {
		t.Fatalf("a probe changed the pool: pinned %d → %d, used %d → %d, evictable %d → %d",
			pinned, w.PinnedTokens(), used, w.Used(), evictable, w.evictable())
	}
	// 6400 prompt + 199 output KV tokens: 103 whole blocks = 6592, as
	// the admission (which names the tail) finds.
	rep := w.AdmitSession(now, q)
	if !resident || cached != rep.CachedTokens || cached != 6592 {
		t.Fatalf("probe: resident %t cached %d; admission cached %d (want 6592)", resident, cached, rep.CachedTokens)
	}
	checkPool(t, w)
}

// Bug 8 (issue 20): the inter-token gaps counted every decoded token, of
// failed and timed-out requests too, though ITL is over completed requests
// only (vLLM's): two requests of 10 tokens, one aborted after its 9th, gave
// 18 gaps where 9 are right.
func TestITLCompletedRequestsOnly(t *testing.T) {
	h := metrics.NewGapHistogram()
	w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000, Gaps: h})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Blocks: chain(1, 2), Input: 128, Output: 10}
	b := &Request{ID: 2, Kind: Full, Blocks: chain(2, 2), Input: 128, Output: 11}
	for _, r := range []*Request{a, b} {
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err)
		}
	}
	now := 0.0
	for a.Stage != StageDone {
		next, ok := w.NextTime()
		if !ok {
			t.Fatal("idle before a finished")
		}
		now = next
		w.Advance(now)
		w.TakeEvents()
	}
	w.Abort(now, b) // b has its 10 tokens too, its 11th never comes
	drive(w, now)
	if h.Count() != 9 {
		t.Fatalf("%d inter-token gaps recorded, want a's 9 (b was aborted)", h.Count())
	}
}
