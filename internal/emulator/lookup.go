package emulator

import "net/http"

// LookupResponse answers /session_cache/lookup: whether this decoder holds
// the session's KV and how many of the prompt's tokens it caches.
type LookupResponse struct {
	Resident     bool `json:"resident"`
	CachedTokens int  `json:"cached_tokens"`
	// Tier names where: hbm, host (the worker's host KV tier, with
	// --enable-hierarchical-cache) or none (an extension).
	Tier string `json:"tier"`
}

// handleLookup is the residency probe of the KVC extension: the body of an
// admission RPC (session_id and the turn's input_ids or text), answered
// from the decoder's own bookkeeping without trimming, evicting or
// reserving anything. Gateway replicas that share no state ask every
// decoder about a session they have not routed (docs/gateway.md).
func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	q, ok := s.sessionQuery(w, r)
	if !ok {
		return
	}
	var out LookupResponse
	if !s.d.do(func(now float64) { out.Resident, out.CachedTokens, out.Tier = s.w.SessionTier(now, q) }) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
