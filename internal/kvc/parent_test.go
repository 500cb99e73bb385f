package kvc

import "testing"

// seedOn runs a first turn of session (with parent) to the decoder the
// dispatcher picks, admitting it as a seed, and returns that decoder.
func seedOn(t *testing.T, x *Dispatcher, session, parent string, blocks []uint64) int {
	t.Helper()
	d := x.Begin(0, Request{Session: session, Parent: parent, Turn: 1, Blocks: blocks, Input: 64 * len(blocks), Output: 4})
	a := d.Action()
	if a.Kind != ActAdmit {
		t.Fatalf("%s: first action %v, want an admission", session, a.Kind)
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.Finished(true)
	return a.D
}

// A sub-agent with no decoder of its own is sent to its parent's decoder
// (where the others would take the least-loaded one); a prefix held
// elsewhere still wins; once pinned, its own pin rules.
func TestSubAgentPrefersParentDecoder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent string
		blocks []uint64
		want   int
	}{
		{"sub-agent, nothing cached anywhere", "p", []uint64{900, 901}, 0},
		{"no parent: the least-loaded decoder", "", []uint64{900, 901}, 2},
		{"unknown parent: as without one", "nobody", []uint64{900, 901}, 2},
		{"another decoder holds more of the prompt", "p", []uint64{20, 21, 22}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := kvcDispatcher(ResetDirect, 3)
			if d := seedOn(t, x, "p", "", []uint64{10, 11}); d != 0 {
				t.Fatalf("parent seeded on d%d, want d0", d)
			}
			if d := seedOn(t, x, "other", "", []uint64{20, 21, 22}); d != 1 {
				t.Fatalf("other seeded on d%d, want d1", d)
			}
			if d := seedOn(t, x, "c", tc.parent, tc.blocks); d != tc.want {
				t.Fatalf("sub-agent's first admission went to d%d, want d%d", d, tc.want)
			}
		})
	}
	// Pinned on its own decoder, the sub-agent stays there even though its
	// parent moved.
	x := kvcDispatcher(ResetDirect, 3)
	seedOn(t, x, "p", "", []uint64{10})
	seedOn(t, x, "other", "", []uint64{20})
	seedOn(t, x, "c", "", []uint64{30}) // d2, no parent named yet
	d := x.Begin(0, Request{Session: "c", Parent: "p", Turn: 2, Blocks: []uint64{30, 31}, Input: 128, Output: 4})
	if a := d.Action(); a.Kind != ActAdmit || a.D != 2 {
		t.Fatalf("pinned sub-agent's admission went to d%d, want its own d2", a.D)
	}
}
