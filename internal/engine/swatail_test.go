package engine

import (
	"fmt"
	"math/rand"
	"testing"
)

// swa_evicted_seqlen by hand, window 32, 16-token blocks, a 100-token
// prompt (96 of it whole blocks, what the tree holds of the request).
// The decode frees the slots behind its window at the decode steps with
// index % 32 == 1, up to seqlen − 1 − 32 then (prompt + index), page
// aligned down.
//   - 80 tokens: 79 decode steps (0–78), the last freeing one at 65:
//     100 + 65 − 32 = 133 → 128; the tail (79 tokens, to 179) holds
//     179 − 128 = 51.
//   - 3 tokens: steps 0–1, step 1 frees to 100 + 1 − 32 = 69 → 64, below
//     the prompt's 96: 96; the tail's 2 tokens hold 2.
//   - 2 tokens: one step (0), none frees: 96; the tail's 1 holds 1.
func TestSWAEvictedSeqlenByHand(t *testing.T) {
	w, err := New(swaConfig(1, 1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		generated  int
		from, live int64
	}{{80, 128, 51}, {3, 96, 2}, {2, 96, 1}} {
		r := &Request{Input: 100, generated: c.generated}
		from := w.swaEvictedTo(r)
		tokens := int64(c.generated - 1)
		live := min(max(100+tokens-max(from, 100), 0), tokens)
		if from != c.from || live != c.live {
			t.Errorf("%d generated: freed to %d, tail holds %d; want %d, %d", c.generated, from, live, c.from, c.live)
		}
	}
}

// An output tail's sliding slots and its tombstoned part, by hand: window
// 32, 16-token blocks, a 2,000-token pool and as many sliding slots (no
// pressure). Turn 1 of session s: a 256-token prompt (blocks 1–16), 98
// output tokens, 97 with KV (to token 353). Its decode freed the sliding
// slots behind its window to 256 + 65 − 32 = 289 → 288 (steps 0–96, the
// last freeing one at 65), so the tail holds 353 − 288 = 65 sliding slots
// and the pool counts 256 + 65 = 321. Turn 2 (blocks 1–16, 101–109) names
// the output's whole blocks, 256 → 352 (101–106), and blocks 101–102
// (256–288) go in as a tombstone, as SGLang inserts them; turn 2 still
// matches all 352 (the 64 tokens after the tombstone cover the window). A
// prompt of another session that shares blocks 1–16, 101–102 and then
// differs matches 256 only: its last 32 tokens are the tombstone (288
// without it).
func TestSGLangSWATailTombstonesWhatItsDecodeFreed(t *testing.T) {
	cfg := swaConfig(1, 2000)
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Session: "s", Input: 256, Output: 98, Blocks: idRange(1, 16)})
	now, _ := drive(w, 0)
	if got := w.swaCached(); got != 321 {
		t.Fatalf("after turn 1 the cache holds %d sliding slots, want 256 + 65 = 321", got)
	}
	r2 := &Request{ID: 2, Kind: Full, Session: "s", Input: 400, Output: 2, Blocks: seqBlocks(idRange(1, 16), idRange(101, 9))}
	w.Submit(now, r2)
	if got := w.tree.GoneTokens(); got != 32 {
		t.Errorf("after naming turn 1's output %d tokens tombstoned, want 32 (blocks 101–102)", got)
	}
	now, _ = drive(w, now)
	r3 := &Request{ID: 3, Kind: Full, Session: "t", Input: 320, Output: 2, Blocks: seqBlocks(idRange(1, 16), idRange(101, 2), idRange(201, 2))}
	w.Submit(now, r3)
	drive(w, now)
	if r2.CachedTokens != 352 || r3.CachedTokens != 256 {
		t.Errorf("turn 2 cached %d, the other prompt %d; want 352, 256", r2.CachedTokens, r3.CachedTokens)
	}
	if err := w.tree.Check(); err != nil {
		t.Error(err)
	}
}

// The sliding pool takes an output tail back in its place in the order,
// and a prompt with a tail below it is tombstoned, not evicted whole: in
// SGLang the output is inserted below the prompt, a leaf, and the prompt
// an inner node. Window 32, 16-token blocks, a 1,000-token pool with 192
// sliding slots. Session s's turn (64 tokens, blocks 1–4, 3 output
// tokens) leaves its prompt cached and a 2-token tail (its decode freed
// nothing: 66 − 64 = 2 held); then a prompt of no session (blocks 11–14)
// is cached: 64 + 2 + 64 = 130. A 96-token prompt needs 32 + 96 = 128:
// 258 > 192, so the pool takes back, least recently used first, s's
// prompt (finished first, nearer the root than its tail): a tombstone,
// 64 gone (194); then s's tail (192). The other prompt stays cached.
// Evicting the prompt whole would leave nothing gone; skipping the tail
// would evict the other prompt.
func TestSGLangSWATakesTailsBackInOrder(t *testing.T) {
	cfg := swaConfig(0.192, 1000)
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.SWACapacity() != 192 {
		t.Fatalf("sliding pool %d, want 192", w.SWACapacity())
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Session: "s", Input: 64, Output: 3, Blocks: idRange(1, 4)})
	now, _ := drive(w, 0)
	w.Submit(now, &Request{ID: 2, Kind: Full, Input: 64, Output: 2, Blocks: idRange(11, 4)})
	now, _ = drive(w, now)
	if got := w.swaCached(); got != 130 {
		t.Fatalf("before the third prompt the cache holds %d sliding slots, want 130", got)
	}
	w.Submit(now, &Request{ID: 3, Kind: Full, Input: 96, Output: 2, Blocks: idRange(21, 6)})
	drive(w, now)
	if got := w.tree.GoneTokens(); got != 64 {
		t.Errorf("%d tokens tombstoned, want s's prompt's 64", got)
	}
	if w.tail(SessionKey{ID: "s"}) != nil {
		t.Error("s's tail is still kept")
	}
	if got := w.tree.Match(idRange(11, 4), 16).Tokens; got != 64 {
		t.Errorf("the other prompt matches %d tokens, want 64", got)
	}
	if got := w.Stats().EvictedTokens; got != 2 {
		t.Errorf("%d tokens counted evicted, want the tail's 2 (a tombstone frees no full KV)", got)
	}
	if err := w.tree.Check(); err != nil {
		t.Error(err)
	}
}

// TestSWATailsPropertyWithSessions runs multi-turn sessions (each turn's
// prompt its previous prompt, its output and new tokens) through SGLang
// workers with sliding pools from 1 % to all of the pool, checking after
// every step that the tree's counts hold, that the tails' sliding count is
// the sum over the live tails, and that the holds stay within the pool;
// every request ends, and nothing is held when idle.
func TestSWATailsPropertyWithSessions(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, ratio := range []float64{0.01, 0.05, 0.3, 1} {
		cfg := swaConfig(ratio, 20000)
		cfg.PrefixCache, cfg.ChunkTokens = true, 512
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type sess struct {
			input int
			turn  int
		}
		ss := make([]sess, 6)
		now, n, done := 0.0, 0, 0
		check := func() {
			var live int64
			for _, tl := range w.tailOrder[w.tailHead:] {
				if tl != nil && tl.live {
					live += tl.swaLive
				}
			}
			if live != w.swaTailTok || w.swaTailTok < 0 {
				t.Fatalf("ratio %v at %v: tails hold %d sliding slots, counted %d", ratio, now, live, w.swaTailTok)
			}
			if w.SWAUsed() > w.SWACapacity() || w.SWAUsed() < 0 {
				t.Fatalf("ratio %v at %v: %d sliding tokens held of %d", ratio, now, w.SWAUsed(), w.SWACapacity())
			}
			if err := w.tree.Check(); err != nil {
				t.Fatalf("ratio %v at %v: %v", ratio, now, err)
			}
		}
		for i := 0; i < 60; i++ {
			k := rng.Intn(len(ss))
			s := &ss[k]
			out := 1 + rng.Intn(80)
			if s.turn == 0 {
				s.input = 16 + rng.Intn(600)
			}
			blocks := make([]uint64, (s.input+15)/16)
			for j := range blocks {
				blocks[j] = uint64(k*100000 + j + 1)
			}
			w.Submit(now, &Request{ID: int64(i), Kind: Full, Session: fmt.Sprint("s", k), Input: s.input, Output: out, Blocks: blocks})
			n++
			s.turn++
			s.input += out + 1 + rng.Intn(100)
			for step := 0; step < 4; step++ {
				next, ok := w.NextTime()
				if !ok {
					break
				}
				now = next
				w.Advance(now)
				for _, ev := range w.TakeEvents() {
					if ev.Kind == EvFinished {
						done++
					}
				}
				check()
			}
		}
		_, evs := drive(w, now)
		for _, ev := range evs {
			if ev.Kind == EvFinished {
				done++
			}
		}
		check()
		if done != n || w.SWAUsed() != 0 {
			t.Errorf("ratio %v: %d of %d finished, %d sliding tokens held when idle", ratio, done, n, w.SWAUsed())
		}
	}
}
