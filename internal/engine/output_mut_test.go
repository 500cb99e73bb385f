package engine

import "testing"

// A finished turn keeps as its tail every output token but the last (the
// last was sampled, never run through the model): 2 generated tokens leave
// a 1-token tail, 1 leaves none.
func TestKeepOutputTwoTokensLeaveOne(t *testing.T) {
	for _, c := range []struct {
		output int
		tail   int64
	}{{2, 1}, {1, 0}, {3, 2}} {
		w := hiWorker(t, 4096, 0, WriteThrough)
		turn(t, w, 0, 1, "a", chain(1, 4), 64, c.output)
		if w.tailTokens != c.tail || (c.tail > 0) != (w.tail(SessionKey{ID: "a"}) != nil) {
			t.Fatalf("output %d: tail of %d tokens (%v), want %d", c.output, w.tailTokens, w.tail(SessionKey{ID: "a"}), c.tail)
		}
	}
}

// Naming a tail that covers no whole block past its prompt files nothing
// and leaves HBM's LRU as it was: a's 64-token prompt (at its turn's end)
// and 5-token tail reach (64 + 5) / 16 = 4 blocks, the prompt's own 4. X,
// a later turn's prompt, is newer; after naming, making room for one more
// token than is free evicts A, the older.
func TestNameOutputNothingWholeTouchesNothing(t *testing.T) {
	w := hiWorker(t, 4096, 0, WriteThrough)
	A, X := chain(1, 4), chain(2, 4)
	_, now := turn(t, w, 0, 1, "a", A, 64, 6)
	_, now = turn(t, w, now+1, 2, "x", X, 64, 1)
	next := append(append([]uint64(nil), A...), chain(3, 2)...)
	w.nameOutput(now+1, &Request{Session: "a", Blocks: next, Input: 96})
	if w.tail(SessionKey{ID: "a"}) != nil || w.tree.Tokens() != 128 {
		t.Fatalf("after naming: tail %v, HBM holds %d; want none, 128", w.tail(SessionKey{ID: "a"}), w.tree.Tokens())
	}
	if !w.makeRoomFor(now+1, w.free()+1, "") || w.PrefixMatch(A, 64) != 0 || w.PrefixMatch(X, 64) != 64 {
		t.Fatalf("HBM keeps A %d, X %d; want A evicted (older), X kept", w.PrefixMatch(A, 64), w.PrefixMatch(X, 64))
	}
}

// Naming makes room for the blocks it files, whole blocks past the
// prompt's last whole one. A 161-token pool (16-token blocks) holds X (64,
// older) and a's 56-token prompt (3 whole blocks + 8) with its 40-token
// tail: 1 free. The next turn names (56 + 40) / 16 − 3 = 3 blocks, 48
// tokens; dropping the tail frees 40, so 7 are short and X is evicted.
// The next turn then matches 6 whole blocks, 96 tokens.
func TestNameOutputMakesRoomForNamedBlocks(t *testing.T) {
	w := hiWorker(t, 161, 0, WriteThrough)
	A, X := chain(1, 4), chain(2, 4)
	_, now := turn(t, w, 0, 1, "x", X, 64, 1)
	_, now = turn(t, w, now+1, 2, "a", A, 56, 41)
	if w.free() != 1 || w.tailTokens != 40 {
		t.Fatalf("precondition: free %d, tail %d; want 1, 40", w.free(), w.tailTokens)
	}
	next := append(append([]uint64(nil), A[:3]...), chain(3, 4)...) // 7 blocks
	w.nameOutput(now+1, &Request{Session: "a", Blocks: next, Input: 110})
	checkPool(t, w)
	if got := w.PrefixMatch(next[:6], 96); got != 96 || w.PrefixMatch(X, 64) != 0 {
		t.Fatalf("after naming: next turn matches %d (want 96), X holds %d (want 0)", got, w.PrefixMatch(X, 64))
	}
}
