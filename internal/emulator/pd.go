package emulator

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// PD between emulated workers, in SGLang's order (disaggregation/prefill.py,
// decode.py), over real loopback HTTP so that a dead peer is noticed:
//
//  1. The gateway sends the same /generate body to P and D, with
//     bootstrap_host/bootstrap_port (P's bootstrap server) and a
//     bootstrap_room.
//  2. D pre-allocates the KV (engine Reserve). When the reservation is
//     granted, D registers the room with P's bootstrap server:
//     POST http://bootstrap_host:bootstrap_port/_pd/register
//     {"bootstrap_room", "rid", "kv_url", "prompt_tokens"}.
//  3. P holds its leg in the bootstrap queue until the room is registered
//     (or answers 500 after the bootstrap timeout), then prefills chunk by
//     chunk. Each finished chunk's KV goes on P's modelled link (an
//     engine.Link: setup + bytes/bandwidth, shared by P's transfers); when a
//     transfer lands, P posts it to D's kv_url:
//     POST {kv_url} {"bootstrap_room", "rid", "tokens", "done",
//     "first_token", "prefill_cached_tokens", "prefill"}.
//     The last delivery ("done": true) carries the first token P sampled.
//  4. D starts decoding when the last delivery arrives (engine StartDecode);
//     its first token is P's. P answers its own leg once D acknowledged
//     that delivery, with finish_reason {"type": "length", "length": 0}.
//
// D fails a room with 500 when it cannot register, when P's bootstrap
// server misses heartbeats, or after the waiting timeout; P fails its leg
// when D refuses or cannot take a delivery. Neither aborts the other leg:
// the gateway must (DESIGN §9).

// room is a bootstrap room on a prefill worker (driver goroutine).
type room struct {
	id      uint64
	st      *reqState // P's leg; nil until its /generate arrives
	kvURL   string    // D's delivery endpoint; "" until D registers
	started bool      // submitted to the engine
	sent    int       // prompt tokens whose KV went on the link
	landed  int
	live    int // transfers on the link
	pDone   bool
	failed  bool
	out     *sender
	expire  *dtimer
}

type xfer struct {
	rm     *room
	tokens int
}

// delivery is one landed transfer as D is told of it.
type delivery struct {
	Room         uint64 `json:"bootstrap_room"`
	RID          string `json:"rid"`
	Tokens       int    `json:"tokens"`
	Done         bool   `json:"done"`
	FirstToken   int    `json:"first_token"`
	PrefillCache int    `json:"prefill_cached_tokens"`
	Prefill      string `json:"prefill"`
}

// registration is D's pre-allocation as P's bootstrap server hears it.
type registration struct {
	Room         uint64 `json:"bootstrap_room"`
	RID          string `json:"rid"`
	KVURL        string `json:"kv_url"`
	PromptTokens int    `json:"prompt_tokens"`
	// DecodePrefixLen is the prompt prefix D already holds (its decode
	// radix cache, SGLang's decode_prefix_len): P sends only the KV past it.
	DecodePrefixLen int `json:"decode_prefix_len,omitempty"`
}

// pdError is SGLang's wording of a failed transfer.
func pdError(side string, st *reqState, why string) string {
	room := st.g.BootstrapRoom
	if side == "Decode" {
		return fmt.Sprintf("Decode transfer failed for request rank=0 decode_req.req.rid=%s decode_req.req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): %s",
			pyRepr(st.rid), room, room, why)
	}
	return fmt.Sprintf("Prefill %s failed for request rank=0 req.rid=%s req.bootstrap_room=%d with exception KVTransferError(bootstrap_room=%d): %s",
		side, pyRepr(st.rid), room, room, why)
}

// --- prefill side ---

func (s *Server) prefillArrive(now float64, st *reqState) error {
	st.er.Kind = engine.PrefillOnly
	if err := s.w.Admissible(&st.er); err != nil {
		return err
	}
	id := st.g.BootstrapRoom
	if st.g.BootstrapHost == FakeBootstrapHost {
		st.fake = true
		st.room = &room{id: id, st: st, started: true}
		return s.w.Submit(now, &st.er)
	}
	rm := s.rooms[id]
	if rm != nil && rm.st != nil {
		return badValue("bootstrap_room %d is already in use on this prefill worker", id)
	}
	if rm == nil {
		rm = &room{id: id}
		s.rooms[id] = rm
	}
	rm.st, st.room = st, rm
	rm.expire.cancel()
	if rm.kvURL != "" {
		return s.prefillStart(now, rm)
	}
	rm.expire = s.d.after(now+s.cfg.BootstrapTimeout, func(t float64) {
		if rm.started || rm.st != st || st.ended {
			return
		}
		delete(s.rooms, id)
		s.metrics.bootstrapFailed()
		msg := pdError("bootstrap", st, fmt.Sprintf("Request %d timed out after %.1fs in KVPoll.Bootstrapping", id, t-st.arrived))
		s.end(st, &outcome{reason: finishAbort(msg, 500), status: 500, at: t})
	})
	return nil
}

func (s *Server) prefillStart(now float64, rm *room) error {
	rm.started = true
	rm.expire.cancel()
	rm.out = newSender(s, rm.kvURL, rm)
	return s.w.Submit(now, &rm.st.er)
}

// register takes D's pre-allocation for a room (driver goroutine).
func (s *Server) register(now float64, reg registration) (int, string) {
	if reg.KVURL == "" {
		return http.StatusBadRequest, "kv_url is required"
	}
	rm := s.rooms[reg.Room]
	if rm == nil {
		rm = &room{id: reg.Room}
		s.rooms[reg.Room] = rm
		// P's leg may never come: forget the room after the bootstrap timeout.
		rm.expire = s.d.after(now+s.cfg.BootstrapTimeout, func(float64) {
			if rm.st == nil && s.rooms[reg.Room] == rm {
				delete(s.rooms, reg.Room)
			}
		})
	}
	if rm.kvURL != "" {
		return http.StatusConflict, fmt.Sprintf("bootstrap_room %d is already registered", reg.Room)
	}
	if reg.DecodePrefixLen < 0 || reg.DecodePrefixLen >= max(reg.PromptTokens, 1) {
		return http.StatusBadRequest, fmt.Sprintf("decode_prefix_len %d: want in [0, prompt_tokens %d)", reg.DecodePrefixLen, reg.PromptTokens)
	}
	rm.kvURL = reg.KVURL
	rm.sent = reg.DecodePrefixLen // the first transfer starts past D's prefix
	if rm.st != nil && !rm.started {
		if err := s.prefillStart(now, rm); err != nil {
			s.prefillFail(now, rm, "the prefill engine refused the request: "+err.Error())
		}
	}
	return http.StatusOK, ""
}

// sendKV puts the KV of the prompt up to tokens on the link, as SGLang's
// send_kv_chunk does after each chunk: the first transfer carries the
// prefix P had cached too.
func (s *Server) sendKV(st *reqState, at float64, tokens int, last bool) {
	rm := st.room
	if rm == nil || rm.failed {
		return
	}
	if last {
		rm.pDone = true
	}
	if st.fake {
		if last {
			s.w.Release(at, &st.er)
			s.prefillDone(at, rm)
		}
		return
	}
	n := tokens - rm.sent
	rm.sent = max(rm.sent, tokens)
	rm.live++
	s.d.link.Start(at, &engine.Transfer{Bytes: int64(max(n, 0)) * s.kvBytes, Tag: &xfer{rm: rm, tokens: tokens}})
}

// transferDone is the driver's hook for a landed transfer.
func (s *Server) transferDone(now float64, t *engine.Transfer) {
	x := t.Tag.(*xfer)
	rm := x.rm
	rm.live--
	rm.landed = max(rm.landed, x.tokens)
	s.kv.record(t)
	st := rm.st
	if rm.pDone && rm.live == 0 {
		if st.er.Stage == engine.StageHeld {
			s.w.Release(now, &st.er) // the prompt stays in P's radix cache
		}
		if rm.failed {
			return
		}
		rm.out.push(delivery{Room: rm.id, RID: st.rid, Tokens: rm.landed, Done: true,
			FirstToken: OutputToken(st.rid, 0), PrefillCache: st.er.CachedTokens})
		return
	}
	if !rm.failed {
		rm.out.push(delivery{Room: rm.id, RID: st.rid, Tokens: rm.landed})
	}
}

// delivered is a delivery's result (driver goroutine).
func (s *Server) delivered(now float64, rm *room, d delivery, err error) {
	if rm.failed {
		return
	}
	if err != nil {
		s.metrics.transferFailed()
		// Mooncake's wording, its session id being the remote's host:port.
		s.prefillFail(now, rm, "Decode instance could be dead, remote session "+urlHost(rm.kvURL)+" is not alive")
		return
	}
	if d.Done {
		s.prefillDone(now, rm)
	}
}

// prefillDone answers P's leg: the first token went to D with the KV.
func (s *Server) prefillDone(now float64, rm *room) {
	st := rm.st
	if s.rooms[rm.id] == rm {
		delete(s.rooms, rm.id)
	}
	rm.out.close()
	st.mu.Lock()
	st.ttft, st.hasTTFT = now-st.arrived, true
	st.cached = st.er.CachedTokens
	st.mu.Unlock()
	s.metrics.firstToken(now - st.arrived)
	s.metrics.finished(st.er.Input, 1, st.er.CachedTokens, now-st.arrived, 0, st.er.AdmittedAt-st.er.SubmittedAt)
	s.end(st, &outcome{reason: finishLength(0), completion: 1, at: now, queue: st.er.AdmittedAt - st.er.SubmittedAt})
}

// prefillFail ends P's leg with 500 and frees what it holds.
func (s *Server) prefillFail(now float64, rm *room, why string) {
	rm.failed = true
	st := rm.st
	s.prefillFree(now, rm)
	s.end(st, &outcome{reason: finishAbort(pdError("transfer", st, why), 500), status: 500, at: now})
}

// prefillFree drops a room and P's KV for it. KV with transfers still on
// the link is released when they land.
func (s *Server) prefillFree(now float64, rm *room) {
	rm.failed = true
	rm.expire.cancel()
	if s.rooms[rm.id] == rm {
		delete(s.rooms, rm.id)
	}
	rm.out.close()
	st := rm.st
	switch st.er.Stage {
	case engine.StageNew, engine.StageDone, engine.StageAborted:
	case engine.StageHeld:
		if rm.live == 0 {
			s.w.Release(now, &st.er)
		}
	default:
		s.w.Abort(now, &st.er)
	}
}

func (s *Server) prefillAbort(now float64, st *reqState) {
	if st.room != nil {
		s.prefillFree(now, st.room)
	}
}

// urlHost is a URL's host:port (the URL itself when it does not parse).
func urlHost(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}
