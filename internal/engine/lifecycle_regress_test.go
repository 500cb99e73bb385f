package engine

import "testing"

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
