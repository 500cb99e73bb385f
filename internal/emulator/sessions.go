package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// Sessions, three kinds:
//
//   - SGLang sessions (/open_session, session_params on /generate): the
//     worker keeps each session's token context, and a request's prompt is
//     the context it names (the last turn's prompt and output, or the turn
//     session_params.rid names; only its prompt with drop_previous_output;
//     cut at session_params.offset) followed by its own input_ids. SGLang
//     keeps a tree of turns; the emulator keeps the last few.
//   - KVC sessions on a session-aware decoder: the top-level session_id (or
//     session_params.id) names the engine session whose KV the decoder
//     keeps between turns; /session_cache/admit_direct_append asks the
//     engine (Algorithm 2) whether the next turn may append on it.
//   - Implicit sessions on a colocated worker: SGLang caches prompt and
//     output when a request finishes. The engine model keeps a finished
//     turn's output KV as a session tail and names it when the session's
//     next turn arrives, so the emulator gives requests without a session a
//     session name of their own: the one filed under the deepest block id
//     of the prompt that ended a finished prompt (tailKeys). A follow-up
//     turn's prompt contains its parent's whole blocks, so it finds the
//     parent's name and the engine reuses the parent's output KV.

// sessionTurnsKept bounds the turns a session remembers.
const sessionTurnsKept = 8

type session struct {
	id    string
	turns map[string]*sessTurn
	order []string
	last  string
}

type sessTurn struct{ prompt, output []int }

// sessionPrompt is the prompt of a request continuing an SGLang session
// (driver goroutine).
func (s *Server) sessionPrompt(st *reqState, sp *SessionParams) ([]int, error) {
	ss := s.sessions[sp.ID]
	if ss == nil {
		return nil, badValue("Invalid request: session id %s does not exist", sp.ID)
	}
	st.sess = ss
	from := ss.last
	if sp.RID != "" {
		from = sp.RID
	}
	var ctx []int
	if from != "" {
		t := ss.turns[from]
		if t == nil {
			return nil, badValue("Invalid request: session %s has no request %s", sp.ID, from)
		}
		ctx = append(ctx, t.prompt...)
		if !sp.DropPreviousOutput {
			ctx = append(ctx, t.output...)
		}
	}
	if sp.Offset != nil && *sp.Offset < len(ctx) {
		ctx = ctx[:*sp.Offset]
	}
	return append(ctx, st.g.Tokens...), nil
}

// sessionFinished files a finished turn in its SGLang session.
func (s *Server) sessionFinished(st *reqState, n int) {
	ss := st.sess
	if ss == nil || s.sessions[ss.id] != ss {
		return
	}
	n = min(n, st.g.MaxNew)
	out := make([]int, n)
	st.mu.Lock()
	first := st.firstTok
	st.mu.Unlock()
	for i := range out {
		if i == 0 {
			out[i] = first
		} else {
			out[i] = OutputToken(st.rid, i)
		}
	}
	if ss.turns == nil {
		ss.turns = map[string]*sessTurn{}
	}
	if _, ok := ss.turns[st.rid]; !ok {
		ss.order = append(ss.order, st.rid)
	}
	ss.turns[st.rid] = &sessTurn{prompt: st.prompt, output: out}
	ss.last = st.rid
	for len(ss.order) > sessionTurnsKept {
		delete(ss.turns, ss.order[0])
		ss.order = ss.order[1:]
	}
}

func (s *Server) handleOpenSession(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodPost) || s.unavailable(w) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Capacity  *int64   `json:"capacity_of_str_len"`
		SessionID *string  `json:"session_id"`
		Streaming *bool    `json:"streaming"`
		Timeout   *float64 `json:"timeout"`
	}
	if err := strictJSON(body, &in); err != nil {
		writeValidation(w, "invalid /open_session body: "+jsonMsg(err))
		return
	}
	if in.Capacity == nil {
		writeValidation(w, "capacity_of_str_len: field required")
		return
	}
	id := newRID()
	if in.SessionID != nil && *in.SessionID != "" {
		id = *in.SessionID
	}
	taken := false
	if !s.d.do(func(float64) {
		if s.sessions[id] != nil {
			taken = true
			return
		}
		s.sessions[id] = &session{id: id}
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	if taken {
		writeValueError(w, "Failed to open the session. Check if a session with the same id is still open.")
		return
	}
	writeJSON(w, http.StatusOK, id)
}

func (s *Server) handleCloseSession(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodPost) || s.unavailable(w) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		SessionID *string `json:"session_id"`
	}
	if err := strictJSON(body, &in); err != nil || in.SessionID == nil {
		writeValidation(w, "invalid /close_session body: session_id: field required")
		return
	}
	s.d.do(func(float64) { delete(s.sessions, *in.SessionID) })
	w.WriteHeader(http.StatusOK)
}

// strictJSON decodes a JSON object into v (unknown fields ignored, as
// SGLang's dataclasses ignore them).
func strictJSON(body []byte, v any) error {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return errors.New("want a JSON object")
	}
	return json.Unmarshal(b, v)
}

// tailKeys maps the last whole block id of finished prompts to the session
// name their output tail is filed under, oldest forgotten first.
type tailKeys struct {
	m     map[uint64]string
	order []uint64
	cap   int
}

// lookup is the session of the deepest block of blocks that ended a
// finished prompt, or a new name for rid.
func (k *tailKeys) lookup(blocks []uint64, rid string) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if s, ok := k.m[blocks[i]]; ok {
			return s
		}
	}
	return "auto:" + rid
}

func (k *tailKeys) put(key uint64, sess string) {
	if k.m == nil {
		k.m = map[uint64]string{}
	}
	if _, ok := k.m[key]; !ok {
		k.order = append(k.order, key)
	}
	k.m[key] = sess
	for len(k.order) > k.cap {
		delete(k.m, k.order[0])
		k.order = k.order[1:]
	}
}

// AdmitRequest is the body of /session_cache/admit_direct_append: may this
// decoder take the session's next turn on the KV it holds?
type AdmitRequest struct {
	SessionID string `json:"session_id"`
	InputIDs  []int  `json:"input_ids"`
	Text      string `json:"text"`
	// MaxNewTokens defaults to 128 (or sampling_params.max_new_tokens).
	MaxNewTokens   *int `json:"max_new_tokens"`
	SamplingParams *struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	} `json:"sampling_params"`
	// MaxAppendTokens is τ_append: the largest append taken directly (0: no
	// limit, the router gates).
	MaxAppendTokens int  `json:"max_append_tokens"`
	ForceSeed       bool `json:"force_seed"`
	// DirectOnly asks for a direct append only (the router gate's RPC): a
	// session not resident here is refused with session-not-resident.
	DirectOnly bool `json:"direct_only"`
}

// AdmitResponse is the engine's typed reply (engine.AdmitReply).
type AdmitResponse struct {
	CanAdmit           bool   `json:"can_admit"`
	Mode               string `json:"mode"`   // direct_append, seed or none
	Reason             string `json:"reason"` // see engine.Reason*
	CachedTokens       int    `json:"cached_tokens"`
	RecommendedPauseMs int    `json:"recommended_pause_ms"`
	TrimmedSessions    int    `json:"trimmed_sessions"`
	TrimmedTokens      int64  `json:"trimmed_tokens"`
	// Tier is where the worker holds the session's prefix: hbm, host (its
	// host KV tier: host_tokens of cached_tokens are loaded back), storage
	// (its storage tier below host: storage_tokens of cached_tokens are
	// prefetched to host, then loaded back) or none (an extension of the
	// seed's reply, engine/hicache.go, engine/storage.go). storage_tokens is
	// left out when 0, so a worker without a storage tier answers as before.
	Tier          string `json:"tier"`
	HostTokens    int    `json:"host_tokens"`
	StorageTokens int    `json:"storage_tokens,omitempty"`
	// KVEventsSeq is the last KV event batch this worker had published
	// when it answered (kv_events, revision 1.3; left out when none): a
	// report of the session in a batch at or below it is older than this
	// answer, so the gateway does not let it undo the answer.
	KVEventsSeq int64 `json:"kv_events_seq,omitempty"`
	// StorageQueueMs is how long the shared storage pool's aggregate link
	// is booked past the answer by the prefetches before (revision 1.4),
	// with storage_tokens: the figure the simulator's engine puts in
	// AdmitReply.StorageQueueS, in milliseconds. Left out when the pool is
	// the worker's own, its bandwidth unlimited, or nothing is booked.
	StorageQueueMs float64 `json:"storage_queue_ms,omitempty"`
}

// ReasonFaultInjected is the refusal of the refuse-admissions fault.
const ReasonFaultInjected = "fault-injected"

func (s *Server) handleAdmit(w http.ResponseWriter, r *http.Request) {
	q, ok := s.sessionQuery(w, r)
	if !ok {
		return
	}
	if s.cfg.Faults.RefuseAdmissions {
		writeJSON(w, http.StatusOK, AdmitResponse{Mode: engine.AdmitNone.String(), Reason: ReasonFaultInjected})
		return
	}
	var rep engine.AdmitReply
	var seq int64
	var at float64
	if !s.d.do(func(now float64) {
		rep, at = s.w.AdmitSession(now, q), now
		seq = s.kvEvents.lastSeq() // on the driver, after the admission's own evictions
	}) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, AdmitResponse{
		CanAdmit: rep.CanAdmit, Mode: rep.Mode.String(), Reason: rep.Reason, CachedTokens: rep.CachedTokens,
		RecommendedPauseMs: int(math.Round(rep.PauseMs)), TrimmedSessions: rep.Trimmed, TrimmedTokens: rep.TrimmedTok,
		Tier: rep.Tier, HostTokens: rep.HostTokens, StorageTokens: rep.StorageTokens, KVEventsSeq: seq,
		StorageQueueMs: s.storageQueueS(at, rep) * 1000,
	})
}

// storageQueueS is how long the shared storage pool's aggregate link is
// booked past the answer at now, for an answer naming storage tokens: the
// engine's own figure for a pool in this process, else the pool service's
// (emulated workers reach a shared pool through it, store.go, and it
// keeps the bookings). Asked after the driver's turn, so the driver does
// not wait on the service; the instant is the answer's.
func (s *Server) storageQueueS(now float64, rep engine.AdmitReply) float64 {
	if rep.StorageTokens <= 0 || rep.StorageQueueS > 0 {
		return rep.StorageQueueS
	}
	c, ok := s.cfg.HiCache.Storage.Index.(*StoreClient)
	if !ok {
		return 0
	}
	q, _ := c.Queue(now)
	return q
}

// sessionQuery reads the body of a KVC session-cache RPC (admission or
// lookup), answering the client itself when it cannot.
func (s *Server) sessionQuery(w http.ResponseWriter, r *http.Request) (engine.AdmitQuery, bool) {
	if !s.cfg.Session.Enabled {
		// Stock SGLang has no such route: a gateway probing it must fall
		// back to its own estimate.
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return engine.AdmitQuery{}, false
	}
	if !allow(w, r, http.MethodPost) || s.unavailable(w) {
		return engine.AdmitQuery{}, false
	}
	body, ok := readBody(w, r)
	if !ok {
		return engine.AdmitQuery{}, false
	}
	var in AdmitRequest
	if err := strictJSON(body, &in); err != nil {
		writeValidation(w, "invalid session-cache body: "+jsonMsg(err))
		return engine.AdmitQuery{}, false
	}
	q, err := admitQuery(&in, s.cfg.BlockSize)
	if err != nil {
		writeRequestError(w, err)
		return engine.AdmitQuery{}, false
	}
	return q, true
}

func admitQuery(in *AdmitRequest, blockSize int) (engine.AdmitQuery, error) {
	if in.SessionID == "" {
		return engine.AdmitQuery{}, badField("session_id: field required")
	}
	toks := in.InputIDs
	if len(toks) == 0 {
		toks = TextTokens(in.Text)
	}
	if len(toks) == 0 {
		return engine.AdmitQuery{}, badValue("admission needs the turn's prompt: input_ids or text")
	}
	out := DefaultMaxNewTokens
	if in.MaxNewTokens != nil {
		out = *in.MaxNewTokens
	} else if in.SamplingParams != nil && in.SamplingParams.MaxNewTokens != nil {
		out = *in.SamplingParams.MaxNewTokens
	}
	if out < 0 || in.MaxAppendTokens < 0 {
		return engine.AdmitQuery{}, badValue("max_new_tokens and max_append_tokens must be ≥ 0")
	}
	return engine.AdmitQuery{Session: in.SessionID, Blocks: BlockHashes(toks, blockSize), Input: len(toks),
		Output: max(out, 1), MaxAppend: in.MaxAppendTokens, ForceSeed: in.ForceSeed, DirectOnly: in.DirectOnly}, nil
}
