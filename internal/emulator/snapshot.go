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
//
// The prefill worker's answers are its engine.SnapshotStore's, the store
// the simulator's prefill workers use, so both give the same outcomes from
// the same bounded buffer (Config.SnapshotBufBytes, 8 GiB by default):
// prepare_receive reserves the snapshot's bytes or refuses with
// snapshot-buf-full and the tokens still available; finalize_ingest gives
// them back and files the blocks, or answers stale (a turn of the session
// this worker was asked to prefill while the snapshot was in flight does
// not extend its whole blocks), kvpool-alloc-failed-at-ingest, or
// no-pending-ingest (no reservation for the session). A session has at
// most one reservation: a second prepare_receive replaces the first, as the
// seed's controller did; it lives until finalize_ingest, or until release
// gives it back (a fourth RPC, ours: the dump failed or found nothing).

// SnapshotRequest is the body of all three RPCs.
type SnapshotRequest struct {
	SessionID string   `json:"session_id"`
	NumTokens int64    `json:"num_tokens"` // prepare_receive: the KV to make room for
	Blocks    []uint64 `json:"blocks"`     // finalize_ingest: what dump answered
	// TokenIDs (finalize_ingest) may stand for Blocks: the session's token
	// ids, hashed here into this worker's blocks, as an engine whose cache
	// is keyed by tokens needs them (docs/worker-protocol.md).
	TokenIDs []int `json:"token_ids"`
	// Target (dump) is prepare_receive's answer passed on: where a real
	// decoder pushes the KV. The emulated link needs no address; it is
	// accepted and not used.
	Target string `json:"target"`
}

// SnapshotResponse answers them: OK, or a reason.
type SnapshotResponse struct {
	OK        bool     `json:"ok"`
	Reason    string   `json:"reason,omitempty"`
	NumTokens int64    `json:"num_tokens,omitempty"` // prepare_receive: reserved; dump: the session's KV
	Blocks    []uint64 `json:"blocks,omitempty"`
	TransferS float64  `json:"transfer_s,omitempty"` // dump: the modelled D→P transfer
	// Target (prepare_receive) names the reserved buffer for the decoder's
	// push; the gateway passes it to dump.
	Target string `json:"target,omitempty"`
	// prepare_receive, as the seed's: the buffer's size, and on
	// snapshot-buf-full the tokens it could still take.
	AvailableTokens  *int64 `json:"available_tokens,omitempty"`
	BufCapacityBytes int64  `json:"snapshot_buf_capacity_bytes,omitempty"`
	// dump: what crossed the link; finalize_ingest: the tokens P's cache
	// lacked and got.
	BytesPushed       int64 `json:"bytes_pushed,omitempty"`
	InsertedPrefixLen int64 `json:"inserted_prefix_len,omitempty"`
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

// handlePrepareReceive: may this prefill worker's snapshot buffer take
// num_tokens of the session's KV? If so it is reserved.
func (s *Server) handlePrepareReceive(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RolePrefill)
	if !ok {
		return
	}
	if in.NumTokens <= 0 {
		writeValidation(w, "num_tokens: must be > 0")
		return
	}
	var prep engine.Prepared
	if !s.d.do(func(float64) {
		if id, ok := s.snapIDs[in.SessionID]; ok {
			s.snap.Release(id)
			delete(s.snapIDs, in.SessionID)
		}
		prep = s.snap.PrepareReceive(in.SessionID, in.NumTokens)
		if prep.OK {
			s.snapIDs[in.SessionID] = prep.ID
		}
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	out := SnapshotResponse{OK: prep.OK, Reason: prep.Reason, NumTokens: in.NumTokens, BufCapacityBytes: s.snap.CapBytes()}
	if !prep.OK {
		out.AvailableTokens = &prep.AvailableTokens
	} else {
		out.Target = s.url + "/_snapshot#" + in.SessionID
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
		bytes := tokens * s.kvBytes
		dt := l.SetupS
		if l.BandwidthBytes > 0 {
			dt += float64(bytes) / l.BandwidthBytes
		}
		s.d.after(now+dt, func(float64) {
			done <- SnapshotResponse{OK: true, NumTokens: tokens, Blocks: blocks, TransferS: dt, BytesPushed: bytes}
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

// handleFinalizeIngest ends the session's reservation: the dumped blocks go
// from the buffer into the prefill worker's radix cache.
func (s *Server) handleFinalizeIngest(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RolePrefill)
	if !ok {
		return
	}
	if len(in.Blocks) == 0 && len(in.TokenIDs) > 0 {
		in.Blocks = BlockHashes(in.TokenIDs, s.cfg.BlockSize)
	}
	if len(in.Blocks) == 0 {
		writeValidation(w, "blocks or token_ids: field required (the dump's answer)")
		return
	}
	var res engine.Ingested
	if !s.d.do(func(now float64) {
		id, ok := s.snapIDs[in.SessionID]
		if !ok {
			res.Reason = engine.ReasonNoPendingIngest
			return
		}
		delete(s.snapIDs, in.SessionID)
		res = s.snap.FinalizeIngest(now, s.w, id, in.Blocks)
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, SnapshotResponse{OK: res.OK, Reason: res.Reason, InsertedPrefixLen: res.Inserted})
}

// handleReleaseSnapshot gives back the space of the session's reservation,
// whose dump failed or found nothing to send: not one of the seed's three
// RPCs (its record lived until the session's next prepare_receive, so a
// session that never synced again kept its space forever), but the
// engine's SnapshotStore.Release, which the simulator calls on the same
// failures.
func (s *Server) handleReleaseSnapshot(w http.ResponseWriter, r *http.Request) {
	in, ok := s.snapshotBody(w, r, engine.RolePrefill)
	if !ok {
		return
	}
	released := false
	if !s.d.do(func(float64) {
		if id, ok := s.snapIDs[in.SessionID]; ok {
			released = s.snap.Release(id)
			delete(s.snapIDs, in.SessionID)
		}
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	out := SnapshotResponse{OK: released}
	if !released {
		out.Reason = engine.ReasonNoPendingIngest
	}
	writeJSON(w, http.StatusOK, out)
}

// snapshotSeeTurn tells the snapshot buffer that this prefill worker was
// asked to prefill a turn of session (driver goroutine): a snapshot of the
// session in flight that the turn's prompt does not extend is stale.
func (s *Server) snapshotSeeTurn(session string, blocks []uint64) {
	if s.snap != nil && session != "" {
		s.snap.SeeTurn(session, blocks)
	}
}
