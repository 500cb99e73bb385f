package engine

import "testing"

// A prompt shorter than one block (30 tokens in one partial block) has no
// last whole block: its output tail is named under nothing, so the next
// prompt's CachedFor sees neither the tail nor the partial block (the radix
// match stops before a partial block that is not the prompt's last).
func TestDecodeRadixPromptShorterThanABlock(t *testing.T) {
	w := radixDecoder(t, false, 50000)
	b := chain(6, 3)
	_, now := receive(t, w, 0, 1, b[:1], 30, 100) // 99 output tokens with KV: 30 + 99 = 129 fill two blocks
	if got := w.CachedTokens(); got != 30+99 {
		t.Fatalf("after turn 1 the cache holds %d tokens, want 30 + 99", got)
	}
	if got := w.CachedFor("s", b, 150); got != 0 {
		t.Fatalf("CachedFor %d, want 0 (no whole block to continue)", got)
	}
	_ = now
}

// While a turn that hit the decode radix cache decodes, the worker's own
// KV is only what the request holds beyond the tree: turn 2 matches 6,464
// tokens (turn 1's 6,400 prompt + its 64-token output block), receives the
// other 7,680 − 6,464 = 1,216, and once they are filed in the tree the
// request's reservation copy of them goes: own is then the first token's
// slot alone (1, taken at the join), and the pool is used by the tree and
// that token: 7,680 + 1 (turn 1's output beyond its named block is
// 65 − 1 − 64 = 0 tokens: no tail left).
func TestDecodeRadixOwnAfterJoin(t *testing.T) {
	w := radixDecoder(t, false, 50000)
	b := chain(1, 120)
	_, now := receive(t, w, 0, 1, b[:100], 6400, 65)
	r := &Request{ID: 2, Kind: DecodeOnly, Session: "s", KeepSession: true, Blocks: b, Input: 7680, Output: 5}
	if err := w.Reserve(now, r); err != nil {
		t.Fatal(err)
	}
	w.TakeEvents()
	if r.CachedTokens != 6464 || r.own != 7680-6464 {
		t.Fatalf("reservation cached %d, own %d; want 6,464 and 1,216", r.CachedTokens, r.own)
	}
	if err := w.StartDecode(now, r); err != nil {
		t.Fatal(err)
	}
	w.Advance(now) // the join step: the KV is filed, the first token emitted
	if r.Stage != StageDecoding || r.own != 1 || w.own != 1 {
		t.Fatalf("after the join: stage %d, request own %d, worker own %d; want decoding, 1, 1", r.Stage, r.own, w.own)
	}
	if w.tree.Tokens() != 7680 || w.Used() != 7681 {
		t.Fatalf("tree %d, used %d; want 7,680 and 7,681", w.tree.Tokens(), w.Used())
	}
	checkPool(t, w)
}
