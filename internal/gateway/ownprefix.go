package gateway

import (
	"encoding/json"
	"sync"
)

// With API keys (Ops.ClientHeader), the cached_tokens a caller is told are
// of its own prefixes only. A worker's prefix cache is shared by every
// caller: a plain-PD turn's cached_tokens (P's) or a colocated worker's
// would otherwise tell a client how much of a guessed prompt another
// client sent. The gateway remembers, per key, the prefix blocks that key
// has sent, and a reply's cached_tokens is cut to the prompt's leading
// blocks among them. Session-scoped KV (a direct append) is the key's own
// already (its session id is namespaced by the key, identity.go).

// ownBlocksPerKey bounds one key's remembered blocks: past it the key's
// set starts afresh (a caller may then be told less than it has cached,
// never more). ownKeys bounds the keys remembered, the same way.
const (
	ownBlocksPerKey = 1 << 18
	ownKeys         = 1 << 12
)

// ownPrefixes is the blocks each key has sent.
type ownPrefixes struct {
	mu   sync.Mutex
	keys map[string]map[uint64]struct{}
}

// ownPrefix sets q.own, the prompt tokens in blocks q's key sent before,
// and remembers q's blocks as the key's.
func (s *Server) ownPrefix(q *request) {
	if q.key == "" {
		return
	}
	o := &s.own
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys = map[string]map[uint64]struct{}{}
	}
	set := o.keys[q.key]
	if set == nil {
		if len(o.keys) >= ownKeys {
			clear(o.keys)
		}
		set = map[uint64]struct{}{}
		o.keys[q.key] = set
	}
	n := 0
	for _, b := range q.blocks {
		if _, ok := set[b]; !ok {
			break
		}
		n++
	}
	// Only whole blocks count: a block id names its whole prefix, and a
	// partial last block is not cached whole anywhere.
	q.own = min(n*max(s.cfg.BlockSize, 1), q.tokens)
	if len(set)+len(q.blocks) > ownBlocksPerKey {
		clear(set)
	}
	for _, b := range q.blocks {
		set[b] = struct{}{}
	}
}

// clampCached wraps rewrite (nil: none) so that, for a request with a key,
// each answer's cached_tokens is at most what the key's own prefixes
// cover.
func (q *request) clampCached(rewrite func(map[string]any)) func(map[string]any) {
	if q.key == "" {
		return rewrite
	}
	own := int64(q.own)
	return func(m map[string]any) {
		if rewrite != nil {
			rewrite(m)
		}
		mi, _ := m["meta_info"].(map[string]any)
		if mi == nil {
			return
		}
		switch v := mi["cached_tokens"].(type) {
		case json.Number:
			if n, err := v.Int64(); err == nil && n > own {
				mi["cached_tokens"] = own
			}
		case float64:
			if int64(v) > own {
				mi["cached_tokens"] = own
			}
		}
	}
}
