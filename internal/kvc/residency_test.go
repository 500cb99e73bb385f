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
	if p := x.session("s").pin; p != 2 {
		t.Fatalf("session pinned on d%d after unrelated reports, want d2", p)
	}
	if x.onD[1] != 1 || x.onD[2] != 1 {
		t.Fatalf("sessions per decoder %v, want one on d1 and one on d2", x.onD)
	}
}
