package engine

import (
	"math/rand/v2"
	"testing"
)

func snapshotPrefill(t *testing.T, pool int64) *Worker {
	t.Helper()
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The buffer takes a snapshot whole or not at all: a reservation past its
// capacity is refused with snapshot-buf-full and the tokens still
// available; releasing gives the space back once (a second release of the
// same snapshot changes nothing), and nothing is ever held below zero.
func TestSnapshotStoreReserveRefuseRelease(t *testing.T) {
	w := snapshotPrefill(t, 100000)
	kvb := testProfile(t).Model.KVBytesPerToken()
	s := NewSnapshotStore(w, 1000*kvb+kvb/2) // 1,000 tokens and half a token
	if s.CapBytes() != 1000*kvb+kvb/2 || s.AvailableTokens() != 1000 {
		t.Fatalf("cap %d bytes, %d tokens available", s.CapBytes(), s.AvailableTokens())
	}
	if p := s.PrepareReceive("a", 0); p.OK || p.Reason != ReasonZeroTokens || s.HeldBytes() != 0 {
		t.Fatalf("prepare of 0 tokens: %+v, held %d", p, s.HeldBytes())
	}
	a := s.PrepareReceive("a", 600)
	if !a.OK || a.Bytes != 600*kvb || s.HeldBytes() != 600*kvb || s.AvailableTokens() != 400 {
		t.Fatalf("prepare 600: %+v, held %d, %d available", a, s.HeldBytes(), s.AvailableTokens())
	}
	if b := s.PrepareReceive("b", 401); b.OK || b.Reason != ReasonSnapshotBufFull || b.AvailableTokens != 400 || s.HeldBytes() != 600*kvb {
		t.Fatalf("prepare 401 of 400 left: %+v, held %d", b, s.HeldBytes())
	}
	b := s.PrepareReceive("b", 400) // exactly full
	if !b.OK || s.AvailableTokens() != 0 || s.Pending() != 2 {
		t.Fatalf("prepare the last 400: %+v, %d available, %d pending", b, s.AvailableTokens(), s.Pending())
	}
	if c := s.PrepareReceive("c", 1); c.OK || c.AvailableTokens != 0 {
		t.Fatalf("prepare into a full buffer: %+v", c)
	}
	if !s.Release(a.ID) || s.HeldBytes() != 400*kvb || s.PendingFor("a") != 0 {
		t.Fatalf("release a: held %d, a pending %d", s.HeldBytes(), s.PendingFor("a"))
	}
	if s.Release(a.ID) || s.HeldBytes() != 400*kvb {
		t.Fatalf("second release of a: held %d", s.HeldBytes())
	}
	if in := s.FinalizeIngest(0, w, a.ID, chain(1, 10)); in.OK || in.Reason != ReasonNoPendingIngest || s.HeldBytes() != 400*kvb {
		t.Fatalf("finalize of a released snapshot: %+v, held %d", in, s.HeldBytes())
	}
	if !s.Release(b.ID) || s.HeldBytes() != 0 || s.Pending() != 0 || s.AvailableTokens() != 1000 {
		t.Fatalf("release b: held %d, %d pending, %d available", s.HeldBytes(), s.Pending(), s.AvailableTokens())
	}
	if NewSnapshotStore(w, 0).CapBytes() != DefaultSnapshotBufBytes {
		t.Fatal("a store of 0 bytes is not the seed's 8 GiB")
	}
}

// finalize_ingest gives the space back and files the blocks in P's radix
// cache, where the session's next prompt matches them; blocks beyond the
// reservation are not filed (the buffer never held them). A snapshot whose
// session's later turn (seen while it was in flight) does not extend its
// whole blocks is stale: nothing is filed. A turn that extends them, or one
// seen before the reservation, leaves it good.
func TestSnapshotStoreFinalizeCommitsAndStale(t *testing.T) {
	w := snapshotPrefill(t, 100000)
	s := NewSnapshotStore(w, 0)
	blocks := chain(1, 20) // 20 blocks, the last partial: 1,250 tokens
	s.SeeTurn("a", chain(9, 30))
	a := s.PrepareReceive("a", 1250)
	s.SeeTurn("a", append(append([]uint64(nil), blocks[:19]...), chain(5, 10)...)) // extends the 19 whole blocks
	in := s.FinalizeIngest(1, w, a.ID, append(append([]uint64(nil), blocks...), chain(7, 5)...))
	if !in.OK || in.Inserted != 1250 || in.Tokens != 1250 || in.Bytes != a.Bytes || s.HeldBytes() != 0 {
		t.Fatalf("finalize: %+v, held %d", in, s.HeldBytes())
	}
	if got := w.PrefixMatch(blocks, 1250); got != 1250 {
		t.Fatalf("P's cache holds %d tokens of the snapshot, want 1250", got)
	}
	if got := w.PrefixMatch(append(append([]uint64(nil), blocks...), chain(7, 5)...), 1600); got != 20*64 {
		t.Fatalf("P's cache holds %d tokens with the blocks past the reservation, want %d (those not filed)", got, 20*64)
	}

	// Stale: a rewritten session (a compaction) seen while the dump ran.
	other := chain(2, 10)
	b := s.PrepareReceive("b", 640)
	s.SeeTurn("b", append(append([]uint64(nil), other...), 99))
	s.SeeTurn("b", chain(3, 40)) // the rewrite
	if in := s.FinalizeIngest(2, w, b.ID, other); in.OK || in.Reason != ReasonStale || s.HeldBytes() != 0 {
		t.Fatalf("finalize after a rewrite: %+v, held %d", in, s.HeldBytes())
	}
	if got := w.PrefixMatch(other, 640); got != 0 {
		t.Fatalf("a stale snapshot filed %d tokens", got)
	}
	// A later turn shorter than the snapshot's whole blocks is stale too.
	c := s.PrepareReceive("c", 640)
	s.SeeTurn("c", chain(4, 5))
	if in := s.FinalizeIngest(3, w, c.ID, chain(4, 10)); in.Reason != ReasonStale {
		t.Fatalf("finalize after a shorter turn: %+v", in)
	}
}

// A pool that cannot make room for the snapshot fails at finalize with
// kvpool-alloc-failed-at-ingest; the buffer space goes back all the same.
func TestSnapshotStoreIngestAllocFailed(t *testing.T) {
	w := snapshotPrefill(t, 640)
	s := NewSnapshotStore(w, 0)
	p := s.PrepareReceive("a", 1280)
	if in := s.FinalizeIngest(0, w, p.ID, chain(1, 20)); in.OK || in.Reason != ReasonIngestAlloc || s.HeldBytes() != 0 {
		t.Fatalf("finalize into a 640-token pool: %+v, held %d", in, s.HeldBytes())
	}
}

// Property: over random sequences of prepares, turns seen, finalizes and
// releases, the bytes held are the sum of the snapshots in flight, stay
// within [0, capacity], a refusal happens only when the snapshot would not
// fit, and everything goes back to 0 once every snapshot ended.
func TestSnapshotStoreRandomSequences(t *testing.T) {
	w := snapshotPrefill(t, 50000)
	kvb := testProfile(t).Model.KVBytesPerToken()
	seen := map[string]int{} // outcomes over all sequences
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := NewSnapshotStore(w, int64(1+rng.IntN(8000))*kvb+int64(rng.IntN(int(kvb))))
		live := map[SnapshotID]int64{}
		var ids []SnapshotID
		sessions := []string{"a", "b", "c"}
		for step := 0; step < 400; step++ {
			switch k := rng.IntN(10); {
			case k < 4:
				tok := int64(rng.IntN(3000))
				before := s.HeldBytes()
				p := s.PrepareReceive(sessions[rng.IntN(3)], tok)
				fits := tok > 0 && before+tok*kvb <= s.CapBytes()
				if p.OK != fits {
					t.Fatalf("seed %d step %d: prepare %d tokens with %d of %d bytes held: %+v", seed, step, tok, before, s.CapBytes(), p)
				}
				seen[p.Reason]++
				if p.OK {
					live[p.ID] = p.Bytes
					ids = append(ids, p.ID)
				}
			case k < 6:
				s.SeeTurn(sessions[rng.IntN(3)], chain(uint64(rng.IntN(2)), rng.IntN(60)))
			case k < 8 && len(ids) > 0:
				id := ids[rng.IntN(len(ids))]
				in := s.FinalizeIngest(float64(step), w, id, chain(0, 1+rng.IntN(50)))
				if _, ok := live[id]; ok != (in.Reason != ReasonNoPendingIngest) || (ok && in.Bytes != live[id]) {
					t.Fatalf("seed %d step %d: finalize %d: %+v, in flight %t", seed, step, id, in, ok)
				}
				seen[in.Reason]++
				delete(live, id)
			case len(ids) > 0:
				id := ids[rng.IntN(len(ids))]
				_, ok := live[id]
				if s.Release(id) != ok {
					t.Fatalf("seed %d step %d: release %d, in flight %t", seed, step, id, ok)
				}
				delete(live, id)
			}
			var sum int64
			for _, b := range live {
				sum += b
			}
			if h := s.HeldBytes(); h != sum || h < 0 || h > s.CapBytes() || s.Pending() != len(live) {
				t.Fatalf("seed %d step %d: held %d bytes (in flight %d over %d snapshots, %d pending), cap %d", seed, step, h, sum, len(live), s.Pending(), s.CapBytes())
			}
		}
		for id := range live {
			s.Release(id)
		}
		if s.HeldBytes() != 0 || s.Pending() != 0 || len(s.bySession) != 0 {
			t.Fatalf("seed %d: after every snapshot ended %d bytes held, %d pending, %d sessions", seed, s.HeldBytes(), s.Pending(), len(s.bySession))
		}
	}
	for _, r := range []string{"", ReasonSnapshotBufFull, ReasonZeroTokens, ReasonStale, ReasonNoPendingIngest} {
		if seen[r] == 0 {
			t.Errorf("no %q outcome in the sequences (%v): the test no longer covers it", r, seen)
		}
	}
}
