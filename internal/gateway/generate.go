package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// request is what the gateway reads of a /generate body; the body itself
// goes to the workers as it came (plus the fields the protocol needs).
type request struct {
	body    map[string]any
	session string
	parent  string // a sub-agent's parent session (identity.go)
	tokens  int
	blocks  []uint64
	output  int
	stream  bool
	ids     any    // input_ids as sent (raw JSON or []any), for the admission RPC
	text    string // or the text
	turn    int    // its session's turn, counted once (retries are the same turn)
	attempt int    // dispatches so far, retries included
	retry   string // why the last attempt should be retried ("" = it answered)
	retryOn string // the worker whose failure calls for the retry (metrics)
	avoid   []int  // workers that failed an earlier attempt
	cause   string // why it failed, internal names included (logs only)
	refused bool   // a decoder refused it at the protocol level once (paths.go)
	key     string // the caller's key namespace, "" without keys (identity.go)
	own     int    // with a key: prompt tokens of prefixes this key sent before (ownprefix.go)
	// conn is its client's connection when the direct relay may write a
	// stream to it (relaydirect.go).
	conn *clientConn
}

// parseGenerate reads an SGLang /generate body. The session is resolved
// from the body and headers (identity.go); a request without one still
// works (prefix-only routing).
func (s *Server) parseGenerate(r *http.Request) (*request, error) {
	body, err := s.readGenerate(r)
	if err != nil {
		return nil, err
	}
	id, err := s.identify(r, body)
	if err != nil {
		return nil, err
	}
	stripRouting(body) // after identify: session_id names the session
	if err := checkGenerate(body); err != nil {
		return nil, err
	}
	q, err := s.newRequest(body, id)
	if q != nil {
		q.key = s.callerKey(r)
	}
	return q, err
}

// newRequest reads what routing needs of an SGLang /generate body; id is
// the request's resolved identity.
func (s *Server) newRequest(body map[string]any, id identity) (*request, error) {
	q := &request{body: body, output: 128, session: id.Session, parent: id.Parent}
	var toks []int
	switch v := q.body["input_ids"].(type) {
	case json.RawMessage:
		q.ids = v
		var err error
		if toks, err = tokenIDs(v); err != nil {
			return nil, err
		}
	case []any:
		q.ids = v
		for i, x := range v {
			n, ok := x.(json.Number)
			id, err := n.Int64()
			if !ok || err != nil {
				return nil, fmt.Errorf("input_ids[%d]: %v is not a token id", i, x)
			}
			if err := checkTokenID(i, id); err != nil {
				return nil, err
			}
			toks = append(toks, int(id))
		}
	case nil:
		text, ok := q.body["text"].(string)
		if _, batch := q.body["text"].([]any); batch {
			return nil, errors.New("text: a list of prompts (a batch) is not supported; send one request per prompt, with text a string")
		}
		if !ok {
			return nil, errors.New("either text or input_ids should be provided")
		}
		q.text = text
		if s.cfg.Tokenizer == nil {
			// Hashed straight from the text: a long prompt's token list
			// is never built (8 bytes a token, twice the text's size).
			q.blocks, q.tokens = textBlocks(text, s.cfg.BlockSize)
			break
		}
		ids, _, err := s.promptTokens(text)
		if err != nil {
			return nil, fmt.Errorf("tokenizing the prompt: %v", err)
		}
		// The workers cache exactly what the router hashed.
		toks = ids
		delete(q.body, "text")
		q.body["input_ids"], q.ids, q.text = ids, ids, ""
	default:
		return nil, errors.New("input_ids must be a list of token ids")
	}
	if q.blocks == nil {
		q.tokens = len(toks)
		q.blocks = blockHashes(toks, s.cfg.BlockSize)
	}
	if q.tokens == 0 {
		return nil, errors.New("the prompt is empty: input_ids or text must hold at least one token")
	}
	if sp, ok := q.body["sampling_params"].(map[string]any); ok {
		if n, ok := sp["max_new_tokens"].(json.Number); ok {
			if v, err := n.Int64(); err == nil && v >= 0 {
				q.output = int(v)
			}
		}
	}
	q.stream, _ = q.body["stream"].(bool)
	if err := s.checkContext(q); err != nil {
		return nil, err
	}
	return q, nil
}

// textTokens approximates a tokenizer for routing only: every 4 bytes of
// the prompt are one token (about what BPE tokenizers give for English and
// code), so equal text prefixes give equal block ids. The workers tokenize
// for real; the router needs only consistent ids.
func textTokens(text string) []int {
	out := make([]int, 0, len(text)/4+1)
	for i := 0; i < len(text); i += 4 {
		h := fnv.New32a()
		h.Write([]byte(text[i:min(i+4, len(text))]))
		out = append(out, int(h.Sum32()))
	}
	return out
}

// textBlocks is blockHashes(textTokens(text), bs) and the token count,
// without the token list.
func textBlocks(text string, bs int) ([]uint64, int) {
	n := (len(text) + 3) / 4
	out := make([]uint64, 0, (n+bs-1)/bs)
	var prev uint64
	for i := 0; i < len(text); {
		h := fnv.New64a()
		var b [8]byte
		for k := range 8 {
			b[k] = byte(prev >> (8 * k))
		}
		h.Write(b[:])
		for t := 0; t < bs && i < len(text); t, i = t+1, i+4 {
			th := fnv.New32a()
			th.Write([]byte(text[i:min(i+4, len(text))]))
			v := th.Sum32()
			h.Write([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out, n
}

// blockHashes chains the prompt's tokens into prefix-block ids: each id
// hashes the previous one and its block's tokens, so an id names its whole
// prefix (the last block may be partial).
func blockHashes(toks []int, bs int) []uint64 {
	var out []uint64
	var prev uint64
	for i := 0; i < len(toks); i += bs {
		h := fnv.New64a()
		var b [8]byte
		for k := range 8 {
			b[k] = byte(prev >> (8 * k))
		}
		h.Write(b[:])
		for _, t := range toks[i:min(i+bs, len(toks))] {
			h.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	q, err := s.parseGenerate(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.direct != nil {
		q.conn = directConn(r)
	}
	s.serveRequest(r.Context(), w, q)
}

// serveRequest dispatches one parsed request and answers w, dispatching it
// again when a worker answered with a retryable status before anything
// reached the client. A retry is the same turn of its session: the turn is
// counted once, before the first attempt.
func (s *Server) serveRequest(ctx context.Context, w http.ResponseWriter, q *request) {
	// The direct relay ends the context itself when the client leaves (a
	// hijacked connection has no net/http watching it).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := s.record(w, q) // metrics.go
	rec.ctx, rec.cancel = ctx, cancel
	defer rec.end(ctx)
	w = rec
	q.turn = s.countTurn(q.session)
	s.ownPrefix(q) // ownprefix.go: what of the prompt this caller sent before
	for q.attempt = 0; ; q.attempt++ {
		q.retry, q.retryOn = "", ""
		s.dispatchOnce(ctx, w, q)
		if q.retry == "" {
			return
		}
		s.met.retries.WithLabelValues(q.retryOn).Inc()
		s.log.Info("retry", "attempt", q.attempt+1, "cause", q.retry)
		select {
		case <-time.After(min(50*time.Millisecond<<q.attempt, time.Second)):
		case <-ctx.Done():
			return
		}
	}
}

// countTurn counts a request of session as its next turn and returns the
// turn's number (1 without a session).
func (s *Server) countTurn(session string) (turn int) {
	turn = 1
	sweep := s.dispatched.Add(1)%1024 == 0
	if session == "" && !sweep {
		return turn // nothing under the lock: the common case of a burst without sessions
	}
	s.locked(func() {
		if session != "" {
			s.turns[session]++
			turn = s.turns[session]
			s.seen[session] = time.Now()
		}
		if sweep {
			s.expireSessions(time.Now())
		}
	})
	return turn
}

// retryable says whether a worker's status is worth another attempt.
func (s *Server) retryable(q *request, status int) bool {
	return q.attempt < s.cfg.Retries && (status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500)
}

// dispatchOnce is one attempt: a dispatch begun, executed and finished.
func (s *Server) dispatchOnce(ctx context.Context, w http.ResponseWriter, q *request) {
	s.probeResidency(ctx, q)
	var d *kvc.Dispatch
	var first kvc.Action
	s.locked(func() {
		d = s.disp.Begin(s.now(), kvc.Request{Session: q.session, Turn: q.turn, Blocks: q.blocks, Input: q.tokens, Output: q.output,
			Avoid: q.avoid, Parent: q.parent})
		first = d.Action()
	})
	l := s.lifeOf(d, first)
	defer l.finish(false) // every exit path finishes it; this is the net
	s.execute(ctx, w, q, l)
}

// execute carries out the dispatcher's actions for one request until one
// answers the client (or calls for a retry). Each step reports its own
// outcomes.
func (s *Server) execute(ctx context.Context, w http.ResponseWriter, q *request, l *life) {
	delayed := false
	for range 64 {
		a := l.action()
		if a.Delay > 0 && !delayed {
			delayed = true // backpressure: the decoder's recommended pause (capped)
			if !s.pause(ctx, a.Delay) {
				l.finish(false) // the client left during the pause
				return
			}
		}
		switch a.Kind {
		case kvc.ActAdmit:
			rep := s.admit(ctx, s.decodeURL(a.D), q, a, l.d)
			s.met.admitted(rep)
			l.reply(rep)
			delayed = false
			continue
		case kvc.ActColo:
			s.single(ctx, w, s.coloURL(a.D), q, l, false)
		case kvc.ActDirect:
			if s.single(ctx, w, s.decodeURL(a.D), q, l, true) {
				s.afterDirect(w, q, a.D) // D→P sync, active mode (dtop.go)
			}
		case kvc.ActLocal:
			// A peer's local prefill on its decoder (do_local_prefill).
			s.single(ctx, w, s.decodeURL(a.D), q, l, true)
		case kvc.ActWholeP:
			// KVC v3: a prefill worker serves it whole (its whole-request
			// extension, `pdhybrid worker --serve-whole`).
			s.single(ctx, w, s.prefillAt(a.P).URL, q, l, true)
		case kvc.ActSeed, kvc.ActPD:
			s.pd(ctx, w, a, q, l)
		case kvc.ActFail:
			l.finish(false)
			s.fail(w, q, http.StatusServiceUnavailable, a.Cause)
		}
		return
	}
	l.finish(false)
	writeError(w, http.StatusInternalServerError, "gateway: the dispatcher did not settle")
}

// pause waits a backpressure pause of delay seconds; false when the client
// left first.
func (s *Server) pause(ctx context.Context, delay float64) bool {
	select {
	case <-time.After(time.Duration(delay * float64(time.Second))):
		return true
	case <-ctx.Done():
		return false
	}
}

// admit is the admission RPC to a decoder. A worker without the KVC
// extension (stock SGLang answers 404) gets the router's own estimate: a
// direct append if the router believes the session is pinned there, else a
// seed.
func (s *Server) admit(ctx context.Context, base string, q *request, a kvc.Action, d *kvc.Dispatch) kvc.AdmitReply {
	if !s.hasSessionCache(a.D) {
		return s.stockAdmit(q, a) // a decoder without the extension (paths.go)
	}
	body := map[string]any{"session_id": q.session, "max_new_tokens": q.output,
		"max_append_tokens": a.MaxAppend, "force_seed": a.ForceSeed}
	if a.DirectOnly {
		// The router gate asks for a direct append only: a decoder that
		// lost the session refuses (session-not-resident), as in the
		// simulator, instead of answering seed.
		body["direct_only"] = true
	}
	if q.ids != nil {
		body["input_ids"] = q.ids
	} else {
		body["text"] = q.text
	}
	var out admitWire // admitreply.go
	actx, cancel := context.WithTimeout(ctx, s.cfg.AdmissionTimeout)
	defer cancel()
	status, err := s.postJSON(actx, base+"/session_cache/admit_direct_append", body, &out)
	switch {
	case err == nil && status == http.StatusOK:
		s.kvAdmitted(a.D, q.session, out.KVSeq) // kvevents.go
		rep, bad := out.reply()
		if bad != nil {
			s.noteBadField(base, fieldStorageQueue, bad)
		}
		return rep
	case err == nil && status == http.StatusNotFound:
		// Stock SGLang: no such path. The belief is corrected and the
		// router answers for the decoder.
		s.noSessionCache(a.D)
		return s.stockAdmit(q, a)
	case err != nil && actx.Err() != nil && ctx.Err() == nil:
		return kvc.AdmitReply{Reason: fmt.Sprintf("admission-timeout: no answer within %v", s.cfg.AdmissionTimeout), Unreachable: true}
	case err != nil:
		return kvc.AdmitReply{Reason: "admission-unreachable: " + err.Error(), Unreachable: true}
	default:
		return kvc.AdmitReply{Reason: fmt.Sprintf("admission-http-%d", status), Unreachable: true}
	}
}

// single sends the request whole to one worker (colocated, a direct
// append naming the session on its decoder, or whole on a prefill worker)
// and relays the answer. It reports whether the worker answered the client
// (false: it could not be reached, or q.retry says why to try again). No
// failure here is a transport failure: nothing crosses P→D.
func (s *Server) single(ctx context.Context, w http.ResponseWriter, base string, q *request, l *life, direct bool) bool {
	body := clone(q.body)
	dec := l.d.Decoder()
	if direct && dec >= 0 {
		s.directBody(body, q, dec) // session_id, or do_local_prefill (paths.go)
	} else if direct {
		body["session_id"] = q.session
	}
	rid := newRID() // the gateway's own: a client's was dropped (stripRouting)
	body["rid"] = rid
	l.accept() // counted in flight from now (see pd)
	var resp *http.Response
	var err error
	if q.conn != nil && q.stream && q.key == "" && s.direct.serves(base) {
		// The direct relay's own client: its connection can be taken
		// over once the stream's head is read (relaydirect.go).
		resp, err = s.direct.pool.post(ctx, base+"/generate", body)
	} else {
		resp, err = s.send(ctx, base+"/generate", body)
	}
	if err != nil {
		onP := l.d.Prefill() // before finish, which lets P go
		l.finish(false)
		if ctx.Err() != nil {
			return false // the client left: nobody to answer, no worker's fault
		}
		cause := "worker-unreachable: " + base + ": " + err.Error()
		if dec := l.d.Decoder(); dec >= 0 {
			q.avoid = append(q.avoid, dec)
			if q.attempt < s.cfg.Retries && s.another(q) {
				// Nothing reached the client: another worker may serve it.
				q.retry, q.retryOn = cause, base
				return false
			}
		} else if onP >= 0 && q.attempt < s.cfg.Retries {
			// Whole on a prefill worker that is gone (a session P hosts):
			// out of service at once, so the next attempt prefills on a
			// decoder (v3 without P) or finds P back, as pd's prefill leg
			// does.
			s.prefillRefused(onP, base, err)
			q.retry, q.retryOn = cause, base
			return false
		}
		s.fail(w, q, http.StatusServiceUnavailable, cause)
		return false
	}
	defer resp.Body.Close()
	if direct && s.refused(q, resp, dec, l.d.Prefill()) {
		// Not relayed: the request goes again on the path the corrected
		// capabilities allow, once.
		io.Copy(io.Discard, resp.Body)
		q.retry, q.retryOn = base+" refused a direct request (no bootstrap room)", base
		l.finish(false)
		return false
	}
	if s.retryable(q, resp.StatusCode) {
		return s.singleRetry(q, l, base, resp)
	}
	if resp.StatusCode == http.StatusOK {
		resp.Body = &firstByte{ReadCloser: resp.Body, f: l.prefillOver} // the first token: its prefill is over
	}
	ok, committed := relay(w, resp, l.mode(), base, q.clampCached(nil), nil)
	ok = ok && resp.StatusCode == http.StatusOK
	if !ok && ctx.Err() != nil {
		s.abort(base, rid, abortDisconnect) // the client left
	}
	if !committed && ctx.Err() == nil {
		// The worker's answer broke off, or the worker aborted it, before
		// anything reached the client: another worker may serve it; else
		// the client hears it failed, never a 200.
		cause := "gateway: " + base + ": answer cut short or aborted"
		l.finish(false)
		if dec >= 0 {
			q.avoid = append(q.avoid, dec)
			if q.attempt < s.cfg.Retries && s.another(q) {
				q.retry, q.retryOn = cause, base
				return false
			}
		}
		s.fail(w, q, http.StatusBadGateway, cause)
		return false
	}
	l.finish(ok)
	return ok
}

// singleRetry ends an attempt whose worker answered a retryable status:
// the decoder (if any) is avoided by the next attempt.
func (s *Server) singleRetry(q *request, l *life, base string, resp *http.Response) bool {
	io.Copy(io.Discard, resp.Body)
	q.retry, q.retryOn = fmt.Sprintf("%s answered %d", base, resp.StatusCode), base
	// dec is the decoder the request went to; −1 when a prefill worker
	// serves it whole.
	if dec := l.d.Decoder(); dec >= 0 {
		q.avoid = append(q.avoid, dec)
	}
	l.finish(false)
	return false
}

// another says whether a decoder (or colocated worker) the request has not
// failed on is left: retrying the only one, dead, just fails again.
func (s *Server) another(q *request) bool {
	var n int
	s.locked(func() { // the pools grow under the lock (admin.go)
		n = len(s.cfg.Decode)
		if s.cfg.Dispatch.Mechanism == kvc.MechColo {
			n = len(s.cfg.Colo)
		}
	})
	seen := map[int]bool{}
	for _, d := range q.avoid {
		seen[d] = true
	}
	return len(seen) < n
}

// fail answers a request the gateway could not serve: its cause kept for
// the log (worker URLs included), the client told it without internal
// addresses (public), a 503 with Retry-After.
func (s *Server) fail(w http.ResponseWriter, q *request, status int, cause string) {
	q.cause = cause
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterS)
	}
	writeError(w, status, s.public(cause))
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// send POSTs a JSON body and returns the response (the caller closes it).
func (s *Server) send(ctx context.Context, u string, body any) (*http.Response, error) {
	r, n := jsonBody(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, r)
	if err != nil {
		return nil, err
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", "application/json")
	return s.cfg.Client.Do(req)
}

// postJSON POSTs a JSON body and decodes a JSON answer into out when the
// status is 200.
func (s *Server) postJSON(ctx context.Context, u string, body, out any) (int, error) {
	resp, err := s.send(ctx, u, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "code": status}})
}
