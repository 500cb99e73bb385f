package engine

import "github.com/pdhybrid/pdhybrid/internal/radix"

// A finished turn's output enters the cache, as in SGLang, which caches
// prompt + output when a request finishes. The trace names blocks by hash
// ids, and the ids covering a turn's output positions appear only in the
// next turn's hash_ids, so the worker cannot file the output under its ids
// when the turn ends. It keeps the output KV as the session's tail instead
// (counted in the pool, evictable in LRU order with the radix cache's
// leaves) and names it when the session's next turn arrives: that prompt's
// blocks from the previous prompt's last whole block up to the last block
// wholly inside previous prompt + output are inserted into the radix cache
// under the previous prompt. Those blocks hold the previous prompt's partial
// last block (recomputed in the real engine too, since its id changes once it
// fills) and the output, so the next turn's match reaches them.

// outputTail is the output KV of a session's last finished turn.
type outputTail struct {
	session SessionKey
	// lastWhole is the id of the finished prompt's last whole block: a next
	// turn continues that prompt when it has the same id there (hash ids
	// identify their whole prefix). Neither the tail nor the request reads
	// the prompt's blocks after its prefill (see Request.Blocks).
	lastWhole uint64
	input     int
	tokens    int64   // output tokens with KV (all generated but the last)
	at        float64 // when the turn finished
	live      bool
	pinned    bool // its session is pinned (session.go): not evictable by LRU
	// vLLM's sliding layers (windowshare.go): the tokens the turn's window
	// had left behind at its end, and of them those counted freed here.
	slideSkip, slideOwn int64
	// SGLang's sliding pool (swapool.go): the sequence's tokens before
	// swaFrom had their sliding slots freed by the turn's decode; the
	// tail's last swaLive tokens still hold theirs; node is the prompt's
	// last node, which the tail hangs below.
	swaFrom, swaLive int64
	node             radix.Handle
}

// keepOutput moves a finished Full request's output KV into its session's
// tail, replacing an older tail of the session.
func (w *Worker) keepOutput(now float64, r *Request) {
	if w.tree == nil || r.Session == "" || r.generated < 2 || r.Kind == PrefillOnly ||
		(r.Kind == DecodeOnly && !r.KeepSession && !w.cfg.DecodeRadix) || (w.cfg.SessionOutputOnly && !r.KeepSession) {
		return
	}
	if old := w.tail(r.sessKey()); old != nil {
		w.dropTail(old)
	}
	// The last token was sampled but never run through the model: it has
	// no KV. Its slot goes back to the pool with the rest of the request.
	tokens := int64(r.generated - 1)
	r.own -= tokens
	w.own -= tokens
	w.tailTokens += tokens
	t := &outputTail{session: r.sessKey(), lastWhole: r.lastWhole, input: r.Input, tokens: tokens, at: now, live: true}
	w.tails.Put(t.session, t)
	w.tailOrder = append(w.tailOrder, t)
	w.compactTailOrder()
	w.windowKeepTail(r, t)
	w.swaKeepTail(r, t)
}

func (w *Worker) dropTail(t *outputTail) {
	t.live = false
	w.windowDropTail(t)
	w.swaDropTail(t)
	if t.pinned {
		t.pinned = false
		w.pinnedTail -= t.tokens
	}
	w.tailTokens -= t.tokens
	w.tails.Delete(t.session)
}

// nameOutput files the session's tail under r's block ids (see the top of
// this file). The tail's KV becomes radix-cache blocks, unlocked, so r's
// admission matches them; what the tail held beyond whole blocks is freed.
func (w *Worker) nameOutput(now float64, r *Request) {
	t := w.tail(r.sessKey())
	if t == nil {
		w.hiNameOutput(now, r)
		return
	}
	w.dropTail(t)
	bs := w.cfg.BlockSize
	full := t.input / bs // the previous prompt's whole blocks
	end := min((t.input+int(t.tokens))/bs, len(r.Blocks))
	if end <= full || full == 0 || r.Blocks[full-1] != t.lastWhole {
		return // nothing whole to name, or r does not continue that prompt
	}
	m := w.tree.LockUncut(r.Blocks[:end], int64(bs), now) // the prompt is whole, tombstones or not
	defer func() { w.tree.Unlock(m.Node, now) }()
	if m.Blocks < full {
		// The previous prompt itself was evicted meanwhile: with a host
		// tier the output goes down to where the prompt may be.
		if w.host != nil {
			w.hiDemoteTail(t)
			w.hiNameOutput(now, r)
		}
		return
	}
	if !w.makeRoomFor(now, int64(end-m.Blocks)*int64(bs), r.Session) {
		return
	}
	from := m.Blocks
	m.Node, _ = w.insertPrompt(r, m.Node, r.Blocks[:end], m.Blocks, int64(bs), now)
	w.windowNameTail(now, m.Node, t)
	w.swaNameTail(m.Node, max(from, full), t)
}

// compactTailOrder drops the dropped tails from the tail order once they
// outnumber the live ones. A tail dropped by its session's next turn or by
// a trim stays in the order until the head passes it, and the head moves
// only when the LRU evicts a tail: on a decoder that pins its sessions
// and trims them instead, it never does, and the order kept every tail the
// worker ever made, with its session id and radix handle (100 MB after a
// million one-turn sessions on KVC v3 1P7D). Only dropped tails go, which
// are never live again and which both walks below skip, so the live
// tails keep their order and the walks their outcome. The order then
// holds at most twice the live tails plus 1,024, and a pass over it is
// paid for by as many appends: amortised O(1).
func (w *Worker) compactTailOrder() {
	n := len(w.tailOrder) - w.tailHead
	if n <= 2*w.tails.Len()+1024 {
		return
	}
	kept := w.tailOrder[:0]
	for _, t := range w.tailOrder[w.tailHead:] {
		if t.live {
			kept = append(kept, t)
		}
	}
	clear(w.tailOrder[len(kept):])
	w.tailOrder, w.tailHead = kept, 0
}

// evictOldestTail frees the least recently finished tail and returns its
// tokens (0 when none is left).
func (w *Worker) evictOldestTail() int64 {
	for w.tailHead < len(w.tailOrder) {
		t := w.tailOrder[w.tailHead]
		w.tailOrder[w.tailHead] = nil
		w.tailHead++
		if w.tailHead > 64 && w.tailHead*2 >= len(w.tailOrder) {
			n := copy(w.tailOrder, w.tailOrder[w.tailHead:])
			clear(w.tailOrder[n:])
			w.tailOrder, w.tailHead = w.tailOrder[:n], 0
		}
		if t.live && !t.pinned {
			w.dropTail(t)
			w.hiDemoteTail(t)
			return t.tokens
		}
	}
	return 0
}

// oldestTail is the finish time of the oldest live tail.
func (w *Worker) oldestTail() (float64, bool) {
	for w.tailHead < len(w.tailOrder) {
		if t := w.tailOrder[w.tailHead]; t.live && !t.pinned {
			return t.at, true
		}
		w.tailOrder[w.tailHead] = nil
		w.tailHead++
	}
	return 0, false
}
