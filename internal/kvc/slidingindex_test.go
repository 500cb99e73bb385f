package kvc

import "testing"

// TestSlidingIndexCutsTheOverlap: the router's belief of a worker with a
// sliding-window pool (SGLang's SWA radix cache) cuts an overlap as the
// worker's match would, and the cut changes the pick. Blocks as tokens,
// a window of 2 blocks, a sliding pool of 6. Worker a is sent s1's chain
// 1–4 (dispatch 1), then its next turn 1–6 (dispatch 2: 1–4 and 5–6 both
// last used then), then s2's 2-chain of 4 (dispatch 3): 10 blocks of
// sliding KV for 6, so the pool takes back its least recently used, 1–4
// (before 5–6, nearer the root at the same dispatch), which has a child:
// a tombstone (6 held). Worker b is sent chain 1's first 3 blocks. A new
// session's prompt 1–4 then 9-chain: a's plain match is 4 blocks, but the
// 4 end on the tombstone, no window of sliding KV before the end, so a's
// overlap is 0 (SGLang's _match_prefix_helper), and b's 3 win; without
// the sliding view a's 4 would. s1's next turn, 1–8, still overlaps a by
// 6: blocks 5–6 after the tombstone are a window. Then a 3-chain of 4
// (dispatch 4) makes 12 for 6: the least recently used, 5–6, a leaf, is
// forgotten whole and with it the tombstone 1–4 it leaves childless (8);
// then the 2-chain (4): 4 blocks kept, two takes. A view needs both
// figures: a run of 0 keeps none.
func TestSlidingIndexCutsTheOverlap(t *testing.T) {
	prompt := append(chain(1, 4), chain(9, 2)...)
	for _, c := range []struct {
		run, pool    int
		worker, over int
		nextTurnOnA  int
		kept         int64
	}{{2, 6, 1, 3, 6, 4}, {0, 0, 0, 4, 6, 14}, {0, 6, 0, 4, 6, 14}} {
		r := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{Alpha: 1, IndexBlocks: 1000,
			SlidingRunBlocks: c.run, SlidingPoolBlocks: c.pool})
		r.Dispatched(0, "s1", chain(1, 4))
		r.Dispatched(0, "s1", chain(1, 6))
		r.Dispatched(0, "s2", chain(2, 4))
		r.Dispatched(1, "s3", chain(1, 3))
		if d := r.Pick("s4", prompt); d.Worker != c.worker || d.Overlap != c.over {
			t.Errorf("sliding view %d/%d: pick %+v, want worker %d with overlap %d", c.run, c.pool, d, c.worker, c.over)
		}
		if got := r.index[0].prefix(chain(1, 8)); got != c.nextTurnOnA {
			t.Errorf("sliding view %d/%d: s1's next turn overlaps a by %d, want %d", c.run, c.pool, got, c.nextTurnOnA)
		}
		r.Dispatched(0, "s5", chain(3, 4))
		if got := r.index[0].tree.Tokens(); got != c.kept {
			t.Errorf("sliding view %d/%d: a holds %d blocks after the fourth prompt, want %d", c.run, c.pool, got, c.kept)
		}
		if err := r.index[0].tree.Check(); err != nil {
			t.Error(err)
		}
	}
}

// TestSlidingIndexTailCarriesTheNextTurn: for workers that keep each
// turn's output below its prompt (SlidingTails: colocated workers, KVC's
// decoders), a tombstone on a session's prompt does not cut its next
// turn's overlap, as the worker's match runs on into the output, whose
// last window still holds its sliding KV (SGLang inserts a finished
// request with swa_evicted_seqlen). Blocks as tokens, a window of 2
// blocks, a sliding pool of 6. Worker a is sent s1's 1–4, then s2's 2-chain
// and s3's 3-chain of 4: 12 blocks for 6, so the pool takes back the least
// recently used, s1's 1–4 and then s2's, each the end of a prompt with a
// tail below it: tombstones, not forgotten (4 held, 8 gone; without the
// tails each is a leaf, forgotten whole). Worker b holds
// 1–3 of another session. s1's next turn, 1–4 then 9-chain, overlaps a by
// 4 (with the sticky bonus 5 against b's 3): a. Without the tails, a's
// overlap ends on the tombstone (0, score 1) and the turn goes to b, whose
// copy the worker a still answers better. The partly filled last block
// form (1–3, then 7-chain: the output filled block 4 and changed its id)
// overlaps a by 3 with the tails (score 4 against b's 3) and 0 without.
func TestSlidingIndexTailCarriesTheNextTurn(t *testing.T) {
	next := append(chain(1, 4), chain(9, 2)...)
	refilled := append(chain(1, 3), chain(7, 3)...)
	for _, c := range []struct {
		tails          bool
		worker, over   int
		refilledOver   int
		gone, heldLive int64
	}{{true, 0, 4, 3, 8, 4}, {false, 1, 3, 0, 0, 4}} {
		r := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{Alpha: 1, IndexBlocks: 1000,
			SlidingRunBlocks: 2, SlidingPoolBlocks: 6, SlidingTails: c.tails})
		r.Dispatched(0, "s1", chain(1, 4))
		r.Dispatched(0, "s2", chain(2, 4))
		r.Dispatched(0, "s3", chain(3, 4))
		r.Dispatched(1, "s4", chain(1, 3))
		a := r.index[0].tree
		if got := a.GoneTokens(); got != c.gone {
			t.Errorf("tails %v: a's index has %d tombstoned blocks, want %d", c.tails, got, c.gone)
		}
		if got := a.Tokens() - a.GoneTokens(); got != c.heldLive {
			t.Errorf("tails %v: a's index holds %d live blocks, want %d", c.tails, got, c.heldLive)
		}
		if got := r.index[0].prefix(refilled); got != c.refilledOver {
			t.Errorf("tails %v: the refilled next turn overlaps a by %d, want %d", c.tails, got, c.refilledOver)
		}
		d := r.Pick("s1", next)
		if d.Worker != c.worker || (d.Worker == 0 && d.Overlap != c.over) || (d.Worker == 1 && d.Overlap != 3) {
			t.Errorf("tails %v: pick %+v, want worker %d (a's overlap %d, b's 3)", c.tails, d, c.worker, c.over)
		}
		if err := a.Check(); err != nil {
			t.Error(err)
		}
	}
}

// TestSlidingIndexVLLMReusedBlocksCutTheOverlap: the router's belief of a
// vLLM worker (one block pool for every layer, a sliding layer's blocks
// behind the window freed and cached until reused) cuts an overlap where
// the worker's find_longest_cache_hit would, and keeps what the worker
// keeps. Blocks as tokens, one of two layers sliding, a hit needing 2
// blocks before its end untombstoned, a pool of 11. Worker a is sent s1's
// 1–6: its request leaves 1–4 behind the window (released: 2 pool blocks
// free), then s2's 2-chain of 6 (its 1–4 released too): 12 blocks, of which
// the 8 released are 4 of the pool, hold 8, leaving 3 of room for those 4,
// so the pool reuses the oldest released, s1's 1–4 (a tombstone, its full
// part kept; room 3 for 2 now). Worker b holds 1–3 of another session. A
// new session's prompt 1–4 then 9-chain: a's plain match is 4 blocks,
// ending on the tombstone with no 2 blocks before it, so a's overlap is 0
// and b's 3 win; 1–5 overlaps a by 0 too (one block after the tombstone).
// s1's next turn, 1–6 then 7, overlaps a by 6 (5–6 after the tombstone)
// and stays there. Without the view the record counts every layer of
// every block: 12 for 11, s1's 1–6 forgotten whole, and s1's next turn
// goes to b.
func TestSlidingIndexVLLMReusedBlocksCutTheOverlap(t *testing.T) {
	prompt := append(chain(1, 4), chain(9, 2)...)
	next := append(chain(1, 6), chain(7, 1)...)
	for _, c := range []struct {
		sliding            int
		gone, kept         int64
		nextWorker, nextOv int
	}{{1, 4, 12, 0, 6}, {0, 0, 6, 1, 3}} {
		r := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{Alpha: 1, IndexBlocks: 11,
			SlidingRunBlocks: 2, SlidingLayers: c.sliding, Layers: 2})
		r.Dispatched(0, "s1", chain(1, 6))
		r.Dispatched(0, "s2", chain(2, 6))
		r.Dispatched(1, "s3", chain(1, 3))
		a := r.index[0]
		if got := a.tree.GoneTokens(); got != c.gone {
			t.Errorf("vLLM view %d: a's record has %d blocks tombstoned, want %d", c.sliding, got, c.gone)
		}
		if got := a.tree.Tokens(); got != c.kept {
			t.Errorf("vLLM view %d: a's record keeps %d blocks, want %d", c.sliding, got, c.kept)
		}
		if d := r.Pick("s4", prompt); d.Worker != 1 || d.Overlap != 3 {
			t.Errorf("vLLM view %d: pick %+v, want b with overlap 3", c.sliding, d)
		}
		if got := a.prefix(prompt); got != 0 {
			t.Errorf("vLLM view %d: the new prompt overlaps a by %d, want 0", c.sliding, got)
		}
		if got := a.prefix(chain(1, 5)); got != 0 {
			t.Errorf("vLLM view %d: 1–5 overlaps a by %d, want 0", c.sliding, got)
		}
		if d := r.Pick("s1", next); d.Worker != c.nextWorker || d.Overlap != c.nextOv {
			t.Errorf("vLLM view %d: s1's next turn picks %+v, want worker %d with overlap %d", c.sliding, d, c.nextWorker, c.nextOv)
		}
		if err := a.tree.Check(); err != nil {
			t.Error(err)
		}
	}
}
