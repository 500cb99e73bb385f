package engine

import "testing"

// A worker without a prefix cache has room for exactly its free tokens:
// 1,000 of a 1,000-token pool, not 1,001.
func TestMakeRoomExactWithoutCache(t *testing.T) {
	w, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !w.makeRoomFor(0, 1000, "") {
		t.Fatal("no room for 1,000 tokens in an empty 1,000-token pool")
	}
	if w.makeRoomFor(0, 1001, "") {
		t.Fatal("room for 1,001 tokens in a 1,000-token pool")
	}
}

// Eviction frees what is needed, no more, and exactly-enough is enough: a
// 1,024-token pool holding one 64-token prompt (4 blocks, one radix leaf)
// has 960 free; room for 1,024 = 960 + 64 evicts that leaf and succeeds,
// room for 1,025 fails and evicts nothing.
func TestMakeRoomEvictsExactlyEnough(t *testing.T) {
	w := hiWorker(t, 1024, 0, WriteThrough)
	_, now := turn(t, w, 0, 1, "", chain(1, 4), 64, 1)
	if w.free() != 960 || w.evictable() != 64 {
		t.Fatalf("free %d, evictable %d; want 960, 64", w.free(), w.evictable())
	}
	if w.makeRoomFor(now, 1025, "") || w.stats.EvictedTokens != 0 {
		t.Fatalf("room for 1,025 of 1,024: evicted %d", w.stats.EvictedTokens)
	}
	if !w.makeRoomFor(now, 1024, "") || w.stats.EvictedTokens != 64 || w.free() != 1024 {
		t.Fatalf("room for 1,024: evicted %d, free %d; want 64, 1024", w.stats.EvictedTokens, w.free())
	}
}

// Output tails and radix leaves go in one LRU order, a tail first only
// when strictly older. A turn of 64 prompt tokens and 11 output tokens
// ends at one instant: its prompt leaf (64) and its tail (10 tokens with
// KV) were last used then. Asking for one token more than the 950 free
// frees the leaf (the tie goes to the leaf), and the tail stays.
func TestMakeRoomTieEvictsLeafBeforeTail(t *testing.T) {
	w := hiWorker(t, 1024, 0, WriteThrough)
	_, now := turn(t, w, 0, 1, "a", chain(1, 4), 64, 11)
	if w.tailTokens != 10 || w.tree.Tokens() != 64 || w.free() != 950 {
		t.Fatalf("tail %d, tree %d, free %d; want 10, 64, 950", w.tailTokens, w.tree.Tokens(), w.free())
	}
	tt, _ := w.oldestTail()
	lt, _ := w.tree.OldestAccess()
	if tt != lt {
		t.Fatalf("precondition: tail finished at %v, leaf used at %v; the case needs a tie", tt, lt)
	}
	if !w.makeRoomFor(now, 951, "") || w.tree.Tokens() != 0 || w.tailTokens != 10 || w.stats.EvictedTokens != 64 {
		t.Fatalf("room for 951: tree %d, tail %d, evicted %d; want 0, 10, 64", w.tree.Tokens(), w.tailTokens, w.stats.EvictedTokens)
	}
}

// Backups go only when the pool cannot otherwise make room. A prefill pool
// of 3,000 tokens (10-token blocks) keeps session a's 1,000-token seed as a
// backup (locked) and holds a released 1,000-token prompt x (evictable):
// 1,000 free + 1,000 evictable = 2,000 is room for 2,000 without touching
// the backup; 2,001 drops it.
func TestMakeRoomDropsBackupsOnlyWhenShort(t *testing.T) {
	for _, c := range []struct {
		need int64
		kept bool
	}{{2000, true}, {2001, false}} {
		w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 10, PoolTokens: 3000,
			PrefixCache: true, PrefillBackup: true})
		if err != nil {
			t.Fatal(err)
		}
		a := chain(1, 100)
		for i, r := range []*Request{
			{ID: 1, Kind: PrefillOnly, Session: "a", KeepSession: true, Blocks: a, Input: 1000},
			{ID: 2, Kind: PrefillOnly, Session: "x", Blocks: chain(2, 100), Input: 1000},
		} {
			if err := w.Submit(0, r); err != nil {
				t.Fatal(err)
			}
			drive(w, 0)
			if err := w.Release(0, r); err != nil {
				t.Fatal(i, err)
			}
		}
		if w.free() != 1000 || w.evictable() != 1000 || len(w.Backups()) != 1 {
			t.Fatalf("free %d, evictable %d, backups %v; want 1000, 1000, [a]", w.free(), w.evictable(), w.Backups())
		}
		if !w.makeRoomFor(0, c.need, "") {
			t.Fatalf("no room for %d", c.need)
		}
		if kept := len(w.Backups()) == 1; kept != c.kept {
			t.Fatalf("room for %d: backup kept %v, want %v", c.need, kept, c.kept)
		}
		checkPool(t, w)
	}
}

// A reservation on a decode radix cache needs its uncached prompt and its
// output: turn 1 leaves 640 tokens cached; a 1,280-token prompt over them
// with 10 output tokens needs 1,280 − 640 + 10 = 650. Beside another
// reservation of 1,000 + 10, a pool of 640 + 1,010 + 650 = 2,300 grants it
// and counts 640 tokens as its own; one of 2,299 makes it wait.
func TestGrantReservationNeedsUncachedPlusOutput(t *testing.T) {
	for _, c := range []struct {
		pool    int64
		granted bool
	}{{2300, true}, {2299, false}} {
		w := radixDecoder(t, false, c.pool)
		b := chain(1, 20)
		_, now := receive(t, w, 0, 1, b[:10], 640, 1)
		big := &Request{ID: 2, Kind: DecodeOnly, Session: "o", Blocks: chain(9, 16), Input: 1000, Output: 10}
		if err := w.Reserve(now, big); err != nil || big.Stage != StageReserved {
			t.Fatalf("pool %d: other reservation %v, stage %d", c.pool, err, big.Stage)
		}
		r := &Request{ID: 3, Kind: DecodeOnly, Session: "s", KeepSession: true, Blocks: b, Input: 1280, Output: 10}
		if err := w.Reserve(now, r); err != nil {
			t.Fatal(err)
		}
		if got := r.Stage == StageReserved; got != c.granted {
			t.Fatalf("pool %d: granted %v (stage %d), want %v", c.pool, got, r.Stage, c.granted)
		}
		if !c.granted {
			if w.stats.KVWaits != 1 {
				t.Fatalf("pool %d: %d KV waits, want 1", c.pool, w.stats.KVWaits)
			}
			continue
		}
		if r.CachedTokens != 640 || r.own != 640 || w.own != 1000+640 || w.reserved != 10+10 || w.free() != 0 {
			t.Fatalf("granted: cached %d, own %d, worker own %d, reserved %d, free %d; want 640, 640, 1640, 20, 0",
				r.CachedTokens, r.own, w.own, w.reserved, w.free())
		}
	}
}

// The scheduler's own trim takes from other sessions only what the room
// lacks after the unpinned cache. A 2,000-token session decoder with tail
// trims (64-token blocks) holds session a pinned (640 tokens, 10 blocks)
// and y's released 320-token prompt in its decode radix cache (evictable):
// 1,040 free + 320 evictable. Room for 1,488 lacks 128: the trim cuts a's
// last 2 blocks (a keeps 8, 512 tokens), then y's leaf is evicted; 128 +
// 320 tokens evicted, 1,488 free.
func TestMakeRoomTrimsOnlyWhatIsShort(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 2000, DecodeRadix: true,
		Session: SessionConfig{Enabled: true, Eviction: EvictSession, TrimTail: true, TailMaxWaiting: 100}})
	if err != nil {
		t.Fatal(err)
	}
	now := seedOn(t, w, 0, "a", chain(1, 10), 640, 1)
	y := &Request{ID: 5, Kind: DecodeOnly, Session: "y", Blocks: chain(2, 5), Input: 320, Output: 1}
	if err := w.Reserve(now, y); err != nil {
		t.Fatal(err)
	}
	w.TakeEvents()
	if err := w.StartDecode(now, y); err != nil {
		t.Fatal(err)
	}
	now, _ = drive(w, now)
	if w.free() != 1040 || w.evictable() != 320 {
		t.Fatalf("precondition: free %d, evictable %d; want 1040, 320", w.free(), w.evictable())
	}
	if !w.makeRoomFor(now, 1488, "x") {
		t.Fatal("no room for 1,488")
	}
	a := w.sess(SessionKey{ID: "a"})
	if !a.pinned || a.tokens != 512 || w.stats.TailTrims != 1 || w.stats.EvictedTokens != 448 || w.free() != 1488 {
		t.Fatalf("a pinned %v with %d tokens, %d tail trims, %d evicted, %d free; want pinned, 512, 1, 448, 1488",
			a.pinned, a.tokens, w.stats.TailTrims, w.stats.EvictedTokens, w.free())
	}
	checkPool(t, w)
}

// KV held for a dump in flight counts as coming free: the trim does not
// take another session for room the dump will give. A 2,600-token decoder
// holds a, b and c (640 tokens each, 680 free); a is evicted for a dump
// (640 tokens held). Room for 680 + 640 = 1,320 trims nobody (it waits for
// the dump); room for 1,321 trims b (now 1,280 held for dumps), not c.
// Neither is free yet, so both answers are no.
func TestMakeRoomCountsDumpsAsComingFree(t *testing.T) {
	for _, c := range []struct {
		need     int64
		bTrimmed bool
	}{{1320, false}, {1321, true}} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 2600,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession, DumpOnEvict: true}})
		if err != nil {
			t.Fatal(err)
		}
		now := 0.0
		for i, s := range []string{"a", "b", "c"} {
			now = seedOn(t, w, now+1, s, chain(uint64(i+1), 10), 640, 1)
		}
		var rep AdmitReply
		if !w.trimOne(now, "", &rep) || w.sess(SessionKey{ID: "a"}).pinned || w.Dumping() != 640 || w.free() != 680 {
			t.Fatalf("precondition: a pinned %v, %d dumping, %d free; want a dumping 640, 680 free", w.sess(SessionKey{ID: "a"}).pinned, w.Dumping(), w.free())
		}
		if w.makeRoomFor(now, c.need, "x") {
			t.Fatalf("room for %d with 680 free", c.need)
		}
		if b := !w.sess(SessionKey{ID: "b"}).pinned; b != c.bTrimmed || !w.sess(SessionKey{ID: "c"}).pinned {
			t.Fatalf("room for %d: b trimmed %v (want %v), c pinned %v (want true)", c.need, b, c.bTrimmed, w.sess(SessionKey{ID: "c"}).pinned)
		}
	}
}
