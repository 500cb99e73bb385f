package kvc

import "testing"

// A replica that never routed a session asks the decoder the others
// pinned it to once it has that decoder's residency answer; without it, a
// fresh replica's kv-aware choice is blind (the lowest index on a tie), and
// its later turns stick to the decoder that answered.
func TestResidentPointsAFreshReplicaAtTheHolder(t *testing.T) {
	blocks := []uint64{1, 2, 3}
	fresh := kvcDispatcher(ResetDirect, 3)
	if fresh.Pinned("s") {
		t.Fatal("a fresh replica believes the session is pinned")
	}
	if a := fresh.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks, Input: 150, Output: 5}).Action(); a.Kind != ActAdmit || a.D != 0 {
		t.Fatalf("a blind replica asked %v first, want d0 (the tie break)", a)
	}

	x := kvcDispatcher(ResetDirect, 3)
	x.Resident("s", 2, blocks[:2], 128)
	if !x.Pinned("s") {
		t.Fatal("Resident did not pin the session")
	}
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks, Input: 150, Output: 5})
	a := d.Action()
	if a.Kind != ActAdmit || a.D != 2 {
		t.Fatalf("after d2's residency answer the first admission went to %v", a)
	}
	d.Reply(AdmitReply{CanAdmit: true, Direct: true})
	d.Accepted()
	d.Finished(true)
	if d.Mode() != "kvcache-direct-to-d-session" {
		t.Fatalf("the turn went %s (%v)", d.Mode(), d.Path())
	}
	// Another session's report elsewhere does not move this one, and a
	// report out of range is ignored.
	x.Resident("t", 1, blocks, 192)
	x.Resident("s", 7, blocks, 192)
	if p := x.session(SessionKey{ID: "s"}).pin; p != 2 {
		t.Fatalf("session pinned on d%d after unrelated reports, want d2", p)
	}
	if x.onD[1] != 1 || x.onD[2] != 1 {
		t.Fatalf("sessions per decoder %v, want one on d1 and one on d2", x.onD)
	}
}

// A forgotten session leaves nothing behind and is routed afresh.
func TestForgetSession(t *testing.T) {
	x := kvcDispatcher(ResetOff, 3)
	serve(t, x, 1, nil)
	serve(t, x, 2, map[int]bool{0: true})
	if x.Sessions() != 1 || x.Rejects("s", 0) != 1 || !x.Pinned("s") {
		t.Fatalf("before: %d sessions, %d rejects, pinned %v", x.Sessions(), x.Rejects("s", 0), x.Pinned("s"))
	}
	x.ForgetSession("s")
	x.ForgetSession("never-seen")
	if x.Sessions() != 0 || x.Rejects("s", 0) != 0 || x.Pinned("s") {
		t.Fatalf("after: %d sessions, %d rejects, pinned %v", x.Sessions(), x.Rejects("s", 0), x.Pinned("s"))
	}
	if _, ok := x.DRouter().Pin("s"); ok {
		t.Fatal("the decode router still pins the forgotten session")
	}
	for i, n := range x.onD {
		if n != 0 {
			t.Fatalf("decoder %d still counts %d sessions", i, n)
		}
	}
}
