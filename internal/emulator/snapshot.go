package emulator

import (
	"net/http"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// D→P snapshot sync (DESIGN §5), the emulated worker's side of the three
// RPCs the simulator models in internal/sim/dtop.go: the router asks a
// prefill worker to prepare_receive a session's KV, the decoder holding the
// session to dump it (the KV crosses the D→P link: the answer comes after
// the modelled transfer, setup + bytes / bandwidth of the profile's link,
// not shared with other transfers here), and the prefill worker to
// finalize_ingest it into its radix cache, keyed by block hashes, so the
// session's next prefill there hits it. Blocks travel as JSON numbers.

// SnapshotRequest is the body of all three RPCs.
type SnapshotRequest struct {
	SessionID string   `json:"session_id"`
	NumTokens int64    `json:"num_tokens"` // prepare_receive: the KV to make room for
	Blocks    []uint64 `json:"blocks"`     // finalize_ingest: what dump answered
}

// SnapshotResponse answers them: OK, or a reason.
type SnapshotResponse struct {
	OK        bool     `json:"ok"`
	Reason    string   `json:"reason,omitempty"`
	NumTokens int64    `json:"num_tokens,omitempty"`
	Blocks    []uint64 `json:"blocks,omitempty"`
	TransferS float64  `json:"transfer_s,omitempty"` // dump: the modelled D→P transfer
}

func (s *Server) snapshotBody(w http.ResponseWriter, r *http.Request, role engine.Role) (SnapshotRequest, bool) {
	var in SnapshotRequest
	if !allow(w, r, http.MethodPost) || s.unavailable(w) {
		return in, false
	}
	if s.cfg.Role != role {
		writeHTTPError(w, http.StatusBadRequest, r.URL.Path+" is served by "+role.String()+" workers; this one is "+s.cfg.Role.String())
		return in, false
	}
	body, ok := readBody(w, r)
	if !ok {
		return in, false
	}
	if err := strictJSON(body, &in); err != nil {
		writeValidation(w, "invalid snapshot body: "+jsonMsg(err))
		return in, false
	}
	if in.SessionID == "" {
		writeValidation(w, "session_id: field required")
		return in, false
	}
	return in, true
}

// handlePrepareReceive: may this prefill worker take num_tokens of KV?
func (s *Server) handlePrepareReceive(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RolePrefill)
	if !ok {
		return
	}
	if in.NumTokens <= 0 {
		writeValidation(w, "num_tokens: must be > 0")
		return
	}
	var room bool
	if !s.d.do(func(float64) { room = s.w.CanIngest(in.NumTokens) }) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	out := SnapshotResponse{OK: room, NumTokens: in.NumTokens}
	if !room {
		out.Reason = engine.ReasonNoSpace
	}
	writeJSON(w, http.StatusOK, out)
}

// handleDump: the decoder sends the session's KV; it answers once the
// modelled transfer has landed.
func (s *Server) handleDump(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RoleDecode)
	if !ok {
		return
	}
	done := make(chan SnapshotResponse, 1)
	if !s.d.do(func(now float64) {
		blocks, tokens, held := s.w.SessionPath(in.SessionID)
		if !held {
			done <- SnapshotResponse{Reason: engine.ReasonNotResident}
			return
		}
		l := s.cfg.Profile.Links[s.cfg.Link]
		dt := l.SetupS
		if l.BandwidthBytes > 0 {
			dt += float64(tokens*s.kvBytes) / l.BandwidthBytes
		}
		s.d.after(now+dt, func(float64) {
			done <- SnapshotResponse{OK: true, NumTokens: tokens, Blocks: blocks, TransferS: dt}
		})
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	select {
	case out := <-done:
		writeJSON(w, http.StatusOK, out)
	case <-r.Context().Done():
	case <-s.ctx.Done():
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
	}
}

// handleFinalizeIngest files the dumped blocks in the prefill worker's
// radix cache.
func (s *Server) handleFinalizeIngest(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RolePrefill)
	if !ok {
		return
	}
	if len(in.Blocks) == 0 {
		writeValidation(w, "blocks: field required (the dump's answer)")
		return
	}
	var added int64
	var room bool
	if !s.d.do(func(now float64) { added, room = s.w.IngestSnapshot(now, in.Blocks) }) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	out := SnapshotResponse{OK: room, NumTokens: added}
	if !room {
		out.Reason = engine.ReasonNoSpace
	}
	writeJSON(w, http.StatusOK, out)
}
