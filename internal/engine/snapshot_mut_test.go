package engine

import "testing"

// Two turns seen while a snapshot is in flight keep only what both prompts
// share: [1 2 3 4] then [1 2 9] share 2 blocks. A snapshot of 3 blocks
// (192 tokens at 64 a block) checks its first 3 − 1 = 2 whole blocks
// against them: [1 2] is a prefix of the shared part, so it is good; one
// of 4 blocks (256 tokens) checks 3 whole blocks, more than the 2 shared,
// so it is stale.
func TestSnapshotSeeTurnKeepsCommonPrefix(t *testing.T) {
	w := snapshotPrefill(t, 100000)
	s := NewSnapshotStore(w, 0)
	good := s.PrepareReceive("a", 192)
	stale := s.PrepareReceive("a", 256)
	s.SeeTurn("a", []uint64{1, 2, 3, 4})
	s.SeeTurn("a", []uint64{1, 2, 9})
	for _, id := range []SnapshotID{good.ID, stale.ID} {
		if p := s.live[id]; p.common != 2 {
			t.Fatalf("snapshot %d: %d blocks shared by the turns seen, want 2", id, p.common)
		}
	}
	if in := s.FinalizeIngest(1, w, good.ID, []uint64{1, 2, 3}); !in.OK || in.Inserted != 192 {
		t.Fatalf("3-block snapshot over 2 shared blocks: %+v, want filed, 192 tokens", in)
	}
	if in := s.FinalizeIngest(1, w, stale.ID, []uint64{1, 2, 3, 4}); in.OK || in.Reason != ReasonStale {
		t.Fatalf("4-block snapshot over 2 shared blocks: %+v, want stale", in)
	}
}

// The buffer held the reserved tokens only: 128 tokens at 64 a block are
// ⌈128/64⌉ = 2 blocks, so a dump naming 3 files 2 (128 tokens), and P's
// cache matches 128 of a 3-block prompt.
func TestSnapshotFinalizeCutsToReservedBlocks(t *testing.T) {
	w := snapshotPrefill(t, 100000)
	s := NewSnapshotStore(w, 0)
	p := s.PrepareReceive("a", 128)
	blocks := chain(1, 3)
	if in := s.FinalizeIngest(0, w, p.ID, blocks); !in.OK || in.Inserted != 128 {
		t.Fatalf("finalize of 128 tokens with 3 blocks: %+v, want 128 inserted", in)
	}
	if got := w.PrefixMatch(blocks, 192); got != 128 {
		t.Fatalf("P matches %d tokens of the 3-block prompt, want the 2 filed blocks, 128", got)
	}
}
