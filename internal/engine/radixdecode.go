package engine

// SGLang's decode radix cache (--disaggregation-decode-enable-radix-cache,
// sgl-project/sglang PR #19746): a PD decode worker keeps the KV it
// received and generated in a radix prefix cache, unpinned and LRU-evicted
// like any prefix cache. When a request's KV reservation is granted, the
// worker matches the prompt against that cache, locks the matched prefix for
// the request's life and pre-allocates only the pages beyond it; the prefill
// worker is told the matched length (decode_prefix_len) and sends only the
// delta. The PR's description: "Match incoming requests against the
// decode-side radix tree. Lock matched prefix nodes for the request
// lifetime. Pre-allocate only the delta KV pages beyond the matched prefix."
//
// The prefill worker still computes its whole prompt (less what its own
// cache holds): the PR changes what is sent, not what is computed. At least
// the prompt's last token is always sent, since P computes it to sample the
// first token (SGLang also allows a zero-page transfer on a full hit; the
// difference is one token).

// lockDecodePrefix matches a DecodeOnly request against a decode radix
// cache at its reservation and locks the match; r.CachedTokens is then the
// prefix the worker need not receive.
func (w *Worker) lockDecodePrefix(now float64, r *Request) {
	if !w.cfg.DecodeRadix || w.tree == nil || len(r.Blocks) == 0 || r.locked {
		return
	}
	m := w.tree.Lock(r.Blocks, w.lastBlockTokens(r.Input, len(r.Blocks)), now)
	r.node, r.locked, r.matched = m.Node, true, m.Blocks
	r.CachedTokens = max(min(int(m.Tokens), r.Input-1), 0)
}

// unlockDecodePrefix undoes lockDecodePrefix for a reservation that must
// wait for room: the next attempt matches again.
func (w *Worker) unlockDecodePrefix(now float64, r *Request) {
	if !w.cfg.DecodeRadix || !r.locked {
		return
	}
	w.tree.Unlock(r.node, now)
	r.locked, r.matched, r.CachedTokens = false, 0, 0
}

// adoptDelta files a joining DecodeOnly request's prompt in the decode
// radix cache: the locked prefix it matched and the delta it received. The
// request holds the whole path locked until it ends; its output becomes the
// session's tail (output.go), named when the next turn arrives.
func (w *Worker) adoptDelta(now float64, r *Request) {
	if !r.locked || len(r.Blocks) == 0 {
		return
	}
	if full := r.Input / w.cfg.BlockSize; full > 0 && full <= len(r.Blocks) {
		r.lastWhole = r.Blocks[full-1]
	}
	node, _ := w.insertPrompt(r, r.node, r.Blocks, r.matched, w.lastBlockTokens(r.Input, len(r.Blocks)), now)
	delta := int64(r.Input - r.CachedTokens)
	r.own -= delta
	w.own -= delta
	r.node = node
}

// CachedFor is the prompt tokens this worker's cache holds for a request of
// session, as a router fed by the worker's KV events sees them (Dynamo's
// default): the radix match, plus the blocks the session's last output
// fills, which SGLang inserts into its tree when the turn ends (here they
// wait, unnamed, as the session's tail: output.go). It touches nothing.
func (w *Worker) CachedFor(session string, blocks []uint64, input int) int {
	return w.CachedForKey(SessionKey{ID: session}, blocks, input)
}

// CachedForKey is CachedFor of a session the owner numbers (SessionKey).
func (w *Worker) CachedForKey(session SessionKey, blocks []uint64, input int) int {
	if w.tree == nil || len(blocks) == 0 {
		return 0
	}
	m := w.tree.Match(blocks, w.lastBlockTokens(input, len(blocks)))
	tokens := int(m.Tokens)
	if t := w.tail(session); t != nil {
		bs := w.cfg.BlockSize
		full := t.input / bs
		end := min((t.input+int(t.tokens))/bs, len(blocks))
		if full > 0 && m.Blocks >= full && end > m.Blocks && blocks[full-1] == t.lastWhole {
			tokens = max(tokens, end*bs)
		}
	}
	return min(tokens, input)
}
