package engine

import "testing"

// With DumpOnEvict an evicted session's KV stays pinned while its D→P dump
// runs: the admission that trimmed it is granted (the KV is coming free),
// but the request it admitted waits for the KV until ReleaseDump, which
// frees the session's path and lets it in. Without it the KV goes at once.
func TestDumpOnEvictPinsUntilReleased(t *testing.T) {
	for _, dump := range []bool{false, true} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, ReportPaths: true, DumpOnEvict: dump}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := chain(1, 200), chain(2, 282)
		now := seedOn(t, w, 0, "a", a, 12800, 4)
		rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4})
		if !rep.CanAdmit || rep.Trimmed != 1 {
			t.Fatalf("dump %t: b's admission %+v, want a granted seed that trimmed a", dump, rep)
		}
		var evicted *Event
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvSessionEvicted {
				evicted = &ev
			}
		}
		if evicted == nil || len(evicted.Blocks) != 200 {
			t.Fatalf("dump %t: eviction event %+v, want a's 200 blocks", dump, evicted)
		}
		held := w.Dumping()
		if (held > 0) != dump {
			t.Fatalf("dump %t: %d tokens held for a dump", dump, held)
		}
		r := &Request{ID: 2, Kind: DecodeOnly, Session: "b", KeepSession: true, Blocks: b, Input: 18000, Output: 4}
		err = w.Reserve(now, r)
		if err != nil {
			t.Fatal(err)
		}
		drive(w, now)
		w.TakeEvents()
		if got := r.Stage == StageReserved; got == dump {
			t.Fatalf("dump %t: b's reservation granted %t before the dump ended", dump, got)
		}
		checkPool(t, w)
		if !dump {
			continue
		}
		if freed := w.ReleaseDump(now+1, "a"); freed < 12800 || w.Dumping() != 0 {
			t.Fatalf("released %d tokens, %d still held; want a's 12,800", freed, w.Dumping())
		}
		drive(w, now+1)
		if r.Stage != StageReserved {
			t.Fatalf("b's reservation in stage %d after the dump ended, want reserved", r.Stage)
		}
		if w.ReleaseDump(now+2, "a") != 0 {
			t.Fatal("a second release of one dump freed something")
		}
		checkPool(t, w)
	}
}
