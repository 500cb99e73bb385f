package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// /generate: a request's life on this worker. The handler decodes the body,
// applies the fault injection, hands the request to the driver and then
// relays what the driver publishes (relay.go): every token as it is made
// (SSE) or the final answer (JSON).

// legKind is what this worker does with a request.
type legKind uint8

const (
	legColo    legKind = iota // prefill and decode here
	legPrefill                // PD prefill leg: prefill, stream KV to D, answer with the first token
	legDecode                 // PD decode leg: pre-allocate, wait for KV, decode
	legDirect                 // session-aware decoder: a direct append on the session's KV
	legLocal                  // conditional aggregation: do_local_prefill on a decode worker
)

// reqState is one request on this worker. The first block is written before
// the driver sees it or by the driver alone; the second is what the driver
// publishes to the handler, under mu.
type reqState struct {
	s       *Server
	g       *GenerateReq
	rid     string
	kind    legKind
	prompt  []int // kept only for SGLang sessions
	blocks  []uint64
	er      engine.Request
	arrived float64
	sess    *session // the SGLang session it continues, if any
	// tailKey is the prompt's last whole block id, under which a colocated
	// worker files the session of its output for the next turn (tailKeys).
	tailKey    uint64
	hasTailKey bool
	// PD
	room      *room  // prefill: its bootstrap room
	fake      bool   // FAKE_BOOTSTRAP_HOST: no peer
	bootAddr  string // decode: the prefill worker's bootstrap server
	waitTimer *dtimer
	ended     bool // the driver is done with it

	mu        sync.Mutex
	gen       int // tokens produced, as the client may see them
	at        float64
	ttft      float64
	hasTTFT   bool
	cached    int
	firstTok  int
	firstFrom string
	ids       []int // output ids built so far (handler side)
	fin       *outcome
	notify    chan struct{} // progress (capacity 1)
	done      chan struct{} // closed with fin
}

// outcome is how a request ended.
type outcome struct {
	reason     *FinishReason
	status     int // non-stream answer's HTTP status for an abort with one; 0: 200
	completion int
	at         float64
	queue      float64
}

func (st *reqState) publish(n int, at float64) {
	st.mu.Lock()
	n = min(n, st.g.MaxNew)
	if n > st.gen {
		st.gen, st.at = n, at
	}
	st.mu.Unlock()
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func (st *reqState) finish(o *outcome) {
	st.mu.Lock()
	if st.fin != nil {
		st.mu.Unlock()
		return
	}
	o.completion = min(o.completion, st.g.MaxNew)
	st.gen = max(st.gen, o.completion)
	st.at = o.at
	st.fin = o
	st.mu.Unlock()
	close(st.done)
}

type snapshot struct {
	gen       int
	at        float64
	ttft      float64
	hasTTFT   bool
	cached    int
	firstTok  int
	firstFrom string
	fin       *outcome
}

func (st *reqState) snap() snapshot {
	st.mu.Lock()
	defer st.mu.Unlock()
	return snapshot{gen: st.gen, at: st.at, ttft: st.ttft, hasTTFT: st.hasTTFT, cached: st.cached,
		firstTok: st.firstTok, firstFrom: st.firstFrom, fin: st.fin}
}

// outputIDs is the first n output ids: the first token (from P on a decode
// worker), then OutputToken(rid, i). Handler side only.
func (st *reqState) outputIDs(sn snapshot, n int) []int {
	for len(st.ids) < n {
		i := len(st.ids)
		if i == 0 {
			st.ids = append(st.ids, sn.firstTok)
		} else {
			st.ids = append(st.ids, OutputToken(st.rid, i))
		}
	}
	return st.ids[:n]
}

func newRID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost, http.MethodPut) || s.unavailable(w) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	g, err := DecodeGenerate(body)
	if err != nil {
		writeRequestError(w, err)
		return
	}
	switch s.faults.onGenerate() {
	case faultCrash:
		s.crash()
		panic(http.ErrAbortHandler) // the connection dies with the process
	case faultError:
		writeHTTPError(w, http.StatusInternalServerError, "fault injection: internal server error")
		return
	}
	if d := s.cfg.Faults.StallS; d > 0 && !s.sleep(r.Context(), d) {
		return
	}
	st := &reqState{s: s, g: g, rid: g.RID, notify: make(chan struct{}, 1), done: make(chan struct{})}
	if st.rid == "" {
		st.rid = newRID()
	}
	st.firstTok = OutputToken(st.rid, 0)
	if g.Session == nil {
		st.blocks = BlockHashes(g.Tokens, s.cfg.BlockSize)
	}
	var admitErr error
	if !s.d.do(func(now float64) { admitErr = s.admit(now, st) }) {
		writeHTTPError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	if admitErr != nil {
		if g.Stream {
			s.streamError(w, admitErr.Error())
		} else {
			writeRequestError(w, admitErr)
		}
		return
	}
	if g.Stream {
		s.relayStream(w, r.Context(), st)
	} else {
		s.relayFinal(w, r.Context(), st)
	}
}

// sleep waits d model seconds on the worker's clock, or until ctx ends.
func (s *Server) sleep(ctx context.Context, d float64) bool {
	t := s.cfg.Clock.NewTimer(s.d.wallFor(d))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// admit builds the engine request and hands it to the engine (driver
// goroutine). An error refuses the request before it exists; a request the
// scheduler itself refuses (as SGLang aborts it) ends with an outcome.
func (s *Server) admit(now float64, st *reqState) error {
	g := st.g
	st.arrived = now
	if _, dup := s.reqs[st.rid]; dup {
		return badValue("Duplicate request ID: %s", st.rid)
	}
	if g.DPRank != nil && *g.DPRank != 0 {
		return badValue("data_parallel_rank %d is out of range: this worker has dp_size 1", *g.DPRank)
	}
	prompt := g.Tokens
	if g.Session != nil {
		p, err := s.sessionPrompt(st, g.Session)
		if err != nil {
			s.end(st, &outcome{reason: finishAbort(err.Error(), 0), at: now})
			return nil
		}
		prompt = p
		st.prompt = p
		st.blocks = BlockHashes(p, s.cfg.BlockSize)
	}
	maxCtx := s.cfg.Profile.Model.MaxContext
	switch {
	case len(prompt) == 0:
		return badValue("Invalid request: empty input_ids. req.rid=%s", pyRepr(st.rid))
	case len(prompt) >= maxCtx:
		return badValue("The input (%d tokens) is longer than the model's context length (%d tokens).", len(prompt), maxCtx)
	case len(prompt)+g.MaxNew >= maxCtx: // SGLang's >= (tokenizer_manager.py:650 at 0025436)
		return badValue("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			maxCtx, len(prompt)+g.MaxNew, len(prompt), g.MaxNew)
	}
	sessName := g.SessionID
	if sessName == "" && g.Session != nil {
		sessName = g.Session.ID
	}
	switch s.cfg.Role {
	case engine.RolePrefill:
		st.kind = legPrefill
		if !g.HasRoom && s.cfg.ServeWhole {
			st.kind = legColo // the whole-request extension
		}
	case engine.RoleDecode:
		st.kind = legDecode
		switch {
		case !g.HasRoom && s.cfg.Session.Enabled && sessName != "":
			st.kind = legDirect
		case !g.HasRoom && s.cfg.ConditionalAgg && g.LocalPrefill:
			st.kind = legLocal // conditional aggregation (draft PR #34773)
		}
	}
	if st.kind != legColo && st.kind != legDirect && st.kind != legLocal && !g.HasRoom {
		// scheduler.py: a disaggregated worker aborts a request without a
		// bootstrap room with 400.
		s.end(st, &outcome{reason: finishAbort("Invalid request: Disaggregated request received without bootstrap room id. req.rid="+pyRepr(st.rid), 400), status: 400, at: now})
		return nil
	}
	if s.cfg.Role == engine.RolePrefill {
		s.snapshotSeeTurn(sessName, st.blocks)
	}
	s.nextID++
	st.er = engine.Request{ID: s.nextID, Blocks: st.blocks, Input: len(prompt), Output: max(g.MaxNew, 1), Tag: st}
	if bs := s.cfg.BlockSize; len(prompt) >= bs {
		st.tailKey, st.hasTailKey = st.blocks[len(prompt)/bs-1], true
	}
	var err error
	switch st.kind {
	case legColo:
		st.er.Kind = engine.Full
		st.er.Session = sessName
		if st.er.Session == "" {
			st.er.Session = s.tails.lookup(st.blocks, st.rid)
		}
		err = s.w.Submit(now, &st.er)
	case legDirect:
		st.er.Kind, st.er.Session, st.er.KeepSession = engine.Full, sessName, true
		err = s.w.Submit(now, &st.er)
	case legLocal:
		// The decoder's own prefill scheduler; with the decode radix cache
		// the prompt matches what earlier turns left there.
		st.er.Kind, st.er.Session = engine.Full, s.sessionOf(sessName, st)
		if !s.cfg.DecodeRadix {
			st.er.Blocks = nil // SGLang's decode worker without it has a chunk cache: nothing is kept
		}
		err = s.w.Submit(now, &st.er)
	case legPrefill:
		// The gateway keeps session_id in a KVC seed's legs and drops it
		// for plain PD (gateway/pd.go): a decoder keeps a seed's prompt as
		// the session's residency, so P's copy goes first.
		st.er.LowPriority = sessName != ""
		err = s.prefillArrive(now, st)
	case legDecode:
		switch {
		case sessName != "" && s.cfg.Session.Enabled:
			st.er.Session, st.er.KeepSession = sessName, true // a KVC seed
		case s.cfg.DecodeRadix:
			st.er.Session = s.sessionOf(sessName, st) // matched at its reservation (radixdecode.go)
		default:
			st.er.Blocks = nil // a plain PD decoder keeps nothing
		}
		err = s.decodeArrive(now, st)
	}
	if err != nil {
		var re *requestError
		if asRequestError(err, &re) {
			return err
		}
		return badValue("%v", err)
	}
	s.reqs[st.rid] = st
	if g.Stream {
		s.d.streams[&st.er] = struct{}{}
	}
	return nil
}

// sessionOf is the session whose finished output a request's prompt may
// continue: the one it names, else the parent its prompt extends (the
// colocated worker's rule, tailKeys).
func (s *Server) sessionOf(named string, st *reqState) string {
	if named != "" {
		return named
	}
	return s.tails.lookup(st.blocks, st.rid)
}

// end finishes st once: it leaves the worker's tables and the handler gets
// the outcome (driver goroutine).
func (s *Server) end(st *reqState, o *outcome) {
	if st.ended {
		return
	}
	st.ended = true
	st.waitTimer.cancel()
	if s.reqs[st.rid] == st {
		delete(s.reqs, st.rid)
	}
	delete(s.d.streams, &st.er)
	if st.g.HasRoom {
		if s.drooms[st.g.BootstrapRoom] == st {
			delete(s.drooms, st.g.BootstrapRoom)
		}
	}
	if o.reason != nil && o.reason.Type == "abort" {
		s.metrics.aborted()
	}
	st.finish(o)
}

// event is the driver's hook for engine events.
func (s *Server) event(ev engine.Event) {
	if ev.Kind == engine.EvSessionEvicted {
		s.metrics.sessionEvicted(ev.Tokens)
		s.publishEviction(ev)
		return
	}
	if ev.Req == nil {
		return // a worker-wide event the emulator does not report
	}
	st, ok := ev.Req.Tag.(*reqState)
	if !ok || st.ended && ev.Kind != engine.EvPrefillDone && ev.Kind != engine.EvChunkDone {
		return
	}
	switch ev.Kind {
	case engine.EvFirstToken:
		st.mu.Lock()
		st.ttft, st.hasTTFT = ev.Time-st.arrived, true
		st.cached = st.er.CachedTokens
		st.mu.Unlock()
		s.metrics.firstToken(ev.Time - st.arrived)
		st.publish(1, ev.Time)
	case engine.EvFinished:
		s.finished(st, ev.Time)
	case engine.EvReserved:
		s.decodeReserved(st, ev.Time)
	case engine.EvChunkDone:
		s.sendKV(st, ev.Time, ev.Tokens, false)
	case engine.EvPrefillDone:
		st.mu.Lock()
		st.cached = st.er.CachedTokens
		st.mu.Unlock()
		s.sendKV(st, ev.Time, ev.Tokens, true)
	}
}

// streamed is the driver's hook at step boundaries of streamed requests.
func (s *Server) streamed(now float64) {
	for r := range s.d.streams {
		st := r.Tag.(*reqState)
		if r.Stage == engine.StageDecoding {
			st.publish(s.w.GeneratedBy(now, r), now)
		}
	}
}

// finished ends a request that generated all its tokens.
func (s *Server) finished(st *reqState, at float64) {
	n := st.er.Generated()
	s.sessionFinished(st, n)
	keeps := st.kind == legColo || s.cfg.DecodeRadix && (st.kind == legDecode || st.kind == legLocal)
	if keeps && st.hasTailKey && st.er.Session != "" {
		s.tails.put(st.tailKey, st.er.Session)
	}
	sn := st.snap()
	e2e := at - st.arrived
	s.metrics.finished(st.er.Input, min(n, st.g.MaxNew), sn.cached, e2e, at-st.arrived-sn.ttft, st.er.AdmittedAt-st.er.SubmittedAt)
	s.load.add(at, min(n, st.g.MaxNew))
	s.end(st, &outcome{reason: finishLength(st.g.MaxNew), completion: n, at: at, queue: st.er.AdmittedAt - st.er.SubmittedAt})
}

// abortReq aborts st on this worker as /abort_request does (driver).
func (s *Server) abortReq(now float64, st *reqState, msg string) {
	if st.ended {
		return
	}
	if st.kind == legPrefill {
		s.prefillAbort(now, st)
	} else if st.er.Stage != engine.StageNew {
		s.w.Abort(now, &st.er)
	}
	n := 0
	if st.er.Stage != engine.StageNew {
		n = s.w.GeneratedBy(now, &st.er)
	}
	s.end(st, &outcome{reason: finishAbort(msg, 0), completion: n, at: now})
}

// crash is the crash-after fault: the process dies (Config.Crash), or the
// server drops everything.
func (s *Server) crash() {
	if s.cfg.Crash != nil {
		s.cfg.Crash()
		return
	}
	s.Kill()
}

func asRequestError(err error, re **requestError) bool { return errors.As(err, re) }
