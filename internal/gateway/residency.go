package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// probeTimeout bounds a residency probe: a decoder slower than this to say
// whether it holds a session is treated as not holding it (its admission
// answer stays authoritative).
const probeTimeout = 500 * time.Millisecond

// probeResidency asks every decoder, in parallel, whether it holds the
// request's session, when this gateway has no belief of where the session
// lives — it never routed it, because another replica behind the same load
// balancer did, or it restarted. The decoder holding most of the prompt
// becomes the dispatcher's belief (kvc.Dispatcher.Resident), so this
// replica asks that decoder for admission first, as the replica that
// routed the session's earlier turns would. No shared store is needed:
// the decoders are the store. Stock SGLang decoders answer 404 and are
// taken as holding nothing.
func (s *Server) probeResidency(ctx context.Context, q *request) {
	if s.cfg.Dispatch.Mechanism != kvc.MechKVC || s.cfg.NoResidencyProbe || q.session == "" || q.attempt > 0 {
		return
	}
	pinned := false
	var decoders []string // the pool grows at run time: a copy read under the lock
	s.locked(func() {
		if pinned = s.disp.Pinned(q.session); pinned {
			return // the common case: no copy of the pool
		}
		for i, u := range s.cfg.Decode {
			if !s.disp.Down(kvc.RoleDecode, i) && !s.disp.DRouter().Excluded(i) {
				decoders = append(decoders, u)
			} else {
				decoders = append(decoders, "") // keep the indices
			}
		}
	})
	if pinned {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body := map[string]any{"session_id": q.session}
	if q.ids != nil {
		body["input_ids"] = q.ids
	} else {
		body["text"] = q.text
	}
	var (
		mu         sync.Mutex
		best, most = -1, 0
		wg         sync.WaitGroup
	)
	for i, base := range decoders {
		if base == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out struct {
				Resident     bool `json:"resident"`
				CachedTokens int  `json:"cached_tokens"`
			}
			st, err := s.postJSON(ctx, base+"/session_cache/lookup", body, &out)
			if err != nil || st != http.StatusOK || !out.Resident {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if out.CachedTokens > most || (out.CachedTokens == most && best >= 0 && i < best) {
				best, most = i, out.CachedTokens
			}
		}()
	}
	wg.Wait()
	if best < 0 {
		return
	}
	n := min(most/s.cfg.BlockSize, len(q.blocks))
	s.locked(func() {
		if !s.disp.Pinned(q.session) {
			s.disp.Resident(q.session, best, q.blocks[:n], most)
		}
	})
	s.probes.Add(1)
}
