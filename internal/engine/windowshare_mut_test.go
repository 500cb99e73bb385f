package engine

import "testing"

// windowCountWorker is a vLLM worker with a prefix cache, one sliding layer
// of two over a 32-token window, 16-token blocks, and a prefilling request
// of four prompt blocks (64 tokens) with its keys taken.
func windowCountWorker(t *testing.T) (*Worker, *Request) {
	t.Helper()
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: Full, Input: 200, Output: 10, Blocks: idRange(1, 4), Stage: StagePrefill}
	if len(w.windowKeysOf(r)) != 4 {
		t.Fatalf("%d keys, want 4", len(r.windowKeys()))
	}
	return w, r
}

// A count that falls is counted again from the start. 112 skipped tokens
// are 7 blocks: the 4 prompt blocks and 3 · 16 = 48 tokens of its own,
// 112 sliding tokens, 56 pool tokens. Falling to 48: 3 blocks, none of
// its own: 48 tokens, 3 blocks counted, 24 pool tokens.
func TestMutWindowCountFalls(t *testing.T) {
	w, r := windowCountWorker(t)
	for _, c := range []struct {
		skipped, tok int64
		blocks       int
		own, freed   int64
	}{{112, 112, 4, 48, 56}, {48, 48, 3, 0, 24}} {
		w.windowCount(r, c.skipped)
		if w.windowTok != c.tok || len(w.windowRefs) != c.blocks || r.windowBlocks() != c.blocks || r.windowOwn() != c.own || w.windowFreed != c.freed {
			t.Errorf("skipped %d: %d tokens, %d blocks counted (the request's %d), %d own, %d freed; want %d, %d, %d, %d",
				c.skipped, w.windowTok, len(w.windowRefs), r.windowBlocks(), r.windowOwn(), w.windowFreed, c.tok, c.blocks, c.own, c.freed)
		}
	}
	w.windowUncount(r)
	if w.windowTok != 0 || len(w.windowRefs) != 0 || w.windowFreed != 0 {
		t.Errorf("uncounted: %d tokens, %d blocks, %d freed; want none", w.windowTok, len(w.windowRefs), w.windowFreed)
	}
}

// windowNewTokens is what a count would add, net of what r counts already.
// Counted at 96 skipped (4 prompt blocks, 32 tokens of its own): 96 adds
// nothing; 128 adds 64 − 32 = 32 own tokens. (Admission asks it of a
// request that counts nothing yet; a count that falls is windowCount's.)
func TestMutWindowNewTokensNetOfTheCount(t *testing.T) {
	w, r := windowCountWorker(t)
	w.windowCount(r, 96)
	for _, c := range []struct{ skipped, add int64 }{{96, 0}, {128, 32}} {
		if got := w.windowNewTokens(r, c.skipped); got != c.add {
			t.Errorf("skipped %d: adds %d, want %d", c.skipped, got, c.add)
		}
	}
	if w.windowTok != 96 {
		t.Errorf("windowNewTokens changed the count: %d tokens, want 96", w.windowTok)
	}
}
