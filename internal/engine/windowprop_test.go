package engine

import (
	"math/rand"
	"testing"
)

// Property: a vLLM worker with a sliding layer and a prefix cache, under
// sessions of growing prompts that share prefixes (multi-turn, their
// outputs kept as tails), from a tight pool to an ample one, never has the
// pool over-committed at a step boundary, keeps the cache's sliding state
// consistent (radix.Tree.Check), finishes every request it takes, and when idle
// counts nothing as a request's own: what it uses is the cache and the
// tails less what their sliding parts no longer hold.
func TestVLLMWindowStateProperty(t *testing.T) {
	for _, pool := range []int64{900, 3000, 1 << 20} {
		rng := rand.New(rand.NewSource(pool))
		cfg := windowAdmitProfile(1, pool)
		cfg.PrefixCache = true
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type session struct {
			blocks []uint64
			input  int
		}
		sessions := make([]*session, 5)
		for i := range sessions {
			sessions[i] = &session{}
		}
		now, n, done, refused := 0.0, 80, 0, 0
		for i := 0; i < n; i++ {
			si := rng.Intn(len(sessions))
			s := sessions[si]
			// The next turn: the previous prompt, its output, new tokens
			// (a few sessions start from a shared system prompt, ids 1…).
			add := 16 * (1 + rng.Intn(12))
			if s.input == 0 && rng.Intn(2) == 0 {
				s.blocks = append(s.blocks, idRange(1, 4)...)
				s.input = 64
			}
			base := uint64(1000*(i+1)) + 100
			s.blocks = append(s.blocks, idRange(base, add/16)...)
			s.input += add
			out := 1 + rng.Intn(60)
			r := &Request{ID: int64(i), Session: string(rune('a' + si)), Kind: Full, Input: s.input, Output: out,
				Blocks: append([]uint64(nil), s.blocks...)}
			if w.Submit(now, r) != nil {
				refused++ // larger than the pool
			}
			s.input += out // the output joins the session's stream
			s.blocks = append(s.blocks, idRange(base+500, out/16)...)
			s.input = len(s.blocks) * 16
			for k := 0; k < 2; k++ {
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
				if u := w.Used() + w.Reserved(); u > w.Capacity() || w.Used() < 0 {
					t.Fatalf("pool %d at %v: %d used + %d reserved of %d", pool, now, w.Used(), w.Reserved(), w.Capacity())
				}
				if err := w.tree.Check(); err != nil {
					t.Fatalf("pool %d at %v: %v", pool, now, err)
				}
			}
		}
		if testing.Verbose() {
			t.Logf("pool %d: %d gone, %d released, %d cached tokens, %d evicted, %d tails' own", pool, w.tree.GoneTokens(), w.tree.ReleasedTokens(), w.Stats().CachedTokens, w.Stats().EvictedTokens, w.windowTailTok)
		}
		_, evs := drive(w, now)
		for _, ev := range evs {
			if ev.Kind == EvFinished {
				done++
			}
		}
		if done+refused != n || done < n/2 {
			t.Errorf("pool %d: %d of %d finished, %d refused as too large", pool, done, n, refused)
		}
		if err := w.tree.Check(); err != nil {
			t.Errorf("pool %d idle: %v", pool, err)
		}
		var tails, tailOwn int64
		for _, tl := range w.tailOrder[w.tailHead:] {
			if tl != nil && tl.live {
				tails += tl.tokens
				tailOwn += tl.slideOwn
			}
		}
		if tails != w.tailTokens || tailOwn != w.windowTailTok {
			t.Errorf("pool %d idle: live tails hold %d tokens, %d counted freed; the worker says %d, %d", pool, tails, tailOwn, w.tailTokens, w.windowTailTok)
		}
		want := w.tree.Tokens() + w.tailTokens - w.windowTreeFreed() - w.windowPool(w.windowTailTok)
		if w.own != 0 || w.windowTok != w.windowTailTok || w.Used() != want {
			t.Errorf("pool %d idle: %d own, %d counted own of which %d tails', %d used; want 0, tails' only, %d",
				pool, w.own, w.windowTok, w.windowTailTok, w.Used(), want)
		}
	}
}
