package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// prefillVerdictGrace is how long a decoder's error waits for the prefill
// leg's own outcome. A dead prefill worker refuses the connection within
// microseconds on a healthy host; the bound only delays a decoder's error
// when P is alive and busy. A variable only so that tests whose prefill
// leg answers after a decoder's error can wait for it on a loaded machine.
var prefillVerdictGrace = 500 * time.Millisecond

// pd runs one request over SGLang's PD protocol (DESIGN §9): the identical
// body to the prefill and the decode worker, with P's bootstrap host and
// port, a fresh 63-bit bootstrap room and the gateway's own rid on both
// legs; D's answer is relayed (SSE unbuffered), P's is drained, and the
// cached tokens reported are P's (D keeps nothing in plain PD). When one
// leg fails the other is aborted explicitly, so a decoder is never left
// waiting on a room. A seed (KVC) also names the session, so the decoder
// keeps it. It reports whether the request is over for this attempt: the
// client got an answer, or q.retry says why to dispatch it again.
//
// Each exit path is one step below that reports its outcome through l
// (lifecycle.go); the dispatch is Finished on every path.
func (s *Server) pd(ctx context.Context, w http.ResponseWriter, a kvc.Action, q *request, l *life) bool {
	x := s.startPD(ctx, a, q, l)
	defer x.close()
	resp, err := s.send(x.dctx, x.dec+"/generate", x.body)
	if err != nil {
		return x.decodeUnreachable(w, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if pl, failed := x.prefillVerdict(); failed {
			io.Copy(io.Discard, resp.Body)
			return x.prefillFailed(w, pl)
		}
	}
	if s.retryable(q, resp.StatusCode) {
		return x.decodeRetry(resp)
	}
	return x.relayDecode(w, resp)
}

// pdLeg is how the prefill leg ended.
type pdLeg struct {
	status int
	cached json.Number
	err    error
	msg    string // a 4xx answer's own message, for the client
}

// clientError reports whether the prefill worker refused the request
// itself (a 4xx other than 408 and 429): the client's error, relayed as
// such, not an outage.
func (l pdLeg) clientError() bool {
	return l.status >= 400 && l.status < 500 && l.status != http.StatusRequestTimeout && l.status != http.StatusTooManyRequests
}

// transfer reports whether the prefill leg's failure is its KV transfer's.
func (l pdLeg) transfer() bool { return l.err != nil && strings.Contains(l.err.Error(), "transfer") }

// pdRun is one PD attempt in flight: both legs' contexts, the prefill
// leg's result, and the dispatch's outcomes.
type pdRun struct {
	s       *Server
	ctx     context.Context // the client's
	a       kvc.Action
	q       *request
	l       *life
	p       Prefill
	dec     string
	rid     string
	body    map[string]any
	pDone   chan pdLeg
	pl      *pdLeg // the prefill leg's result, once read
	cancelP context.CancelFunc
	dctx    context.Context
	cancelD context.CancelCauseFunc
	// The KV landed once the prefill leg answered ok and the decoder
	// answered 200 (a decoder refusing the request, a 503 say, received
	// none); pOK and dOK say which is in, under mu.
	mu       sync.Mutex
	pOK, dOK bool
}

// legOK notes one leg's success and reports the landing once both are in.
func (x *pdRun) legOK(prefill bool) {
	x.mu.Lock()
	if prefill {
		x.pOK = true
	} else {
		x.dOK = true
	}
	both := x.pOK && x.dOK
	x.mu.Unlock()
	if both {
		x.l.landed() // once: life ignores a second landing
	}
}

// startPD builds the legs' body, accepts the dispatch and starts the
// prefill leg.
func (s *Server) startPD(ctx context.Context, a kvc.Action, q *request, l *life) *pdRun {
	if a.Kind == kvc.ActSeed {
		s.beforeReseed(ctx, q, l.d, a.P) // D→P sync, passive mode (dtop.go)
	}
	x := &pdRun{s: s, ctx: ctx, a: a, q: q, l: l, p: s.prefillAt(a.P), dec: s.decodeURL(a.D), rid: newRID(), pDone: make(chan pdLeg, 1)}
	x.body = clone(q.body)
	x.body["rid"] = x.rid
	x.body["bootstrap_host"] = hostOf(x.p.URL)
	x.body["bootstrap_port"] = x.p.BootstrapPort
	x.body["bootstrap_room"] = newRoom()
	if a.Kind == kvc.ActSeed {
		x.body["session_id"] = q.session
	} else {
		delete(x.body, "session_id")
	}
	var pctx context.Context
	pctx, x.cancelP = context.WithCancel(context.WithoutCancel(ctx)) // P finishes even if the client leaves
	// A failed prefill leg ends the decode leg at once: D is aborted (its
	// room will never get KV) and the wait for its answer is cut, so the
	// client is not kept waiting for D's bootstrap timeout.
	x.dctx, x.cancelD = context.WithCancelCause(ctx)
	// Accepted before the legs go: the routers count the request in
	// flight from now, so requests arriving together spread over the
	// workers instead of all seeing the same idle one.
	l.accept()
	go x.prefillLeg(pctx)
	return x
}

func (x *pdRun) close() {
	x.cancelP()
	x.cancelD(nil)
	x.l.finish(false) // the safety net: every exit path has finished it already
}

// prefillLeg sends the prefill leg and reports its end on pDone. Its
// success means the KV reached the decoder (SGLang's prefill worker
// answers once its transfer is done).
func (x *pdRun) prefillLeg(pctx context.Context) {
	resp, err := x.s.send(pctx, x.p.URL+"/generate", x.body)
	if err != nil {
		l := pdLeg{err: fmt.Errorf("prefill %s unreachable: %w", x.p.URL, err)}
		if pctx.Err() == nil { // not ended by the gateway itself
			x.s.prefillRefused(x.a.P, x.p.URL, err)
			x.cutDecode(l)
		}
		x.pDone <- l
		return
	}
	defer resp.Body.Close()
	l := pdLeg{status: resp.StatusCode}
	b, _ := io.ReadAll(resp.Body)
	l.cached = cachedTokens(b, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	if l.status != http.StatusOK {
		l.err = fmt.Errorf("prefill %s answered %d: %s", x.p.URL, l.status, strings.TrimSpace(string(b)))
		l.msg = errorMessage(b)
		x.cutDecode(l)
	} else {
		x.legOK(true)
	}
	x.pDone <- l
}

// cachedTokens reads meta_info.cached_tokens from a prefill leg's answer:
// a JSON object, or (streamed) its last data event's.
func cachedTokens(b []byte, sse bool) json.Number {
	var out struct {
		MetaInfo struct {
			CachedTokens json.Number `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	var cached json.Number
	if !sse {
		if json.Unmarshal(b, &out) == nil {
			cached = out.MetaInfo.CachedTokens
		}
		return cached
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "data: {") && json.Unmarshal([]byte(line[len("data: "):]), &out) == nil {
			cached = out.MetaInfo.CachedTokens
		}
	}
	return cached
}

// errorMessage is a worker's error answer's message: SGLang's
// {"error": {"message"}} or {"message"} (its OpenAI-style errors), else
// the body itself, bounded.
func errorMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		if e.Message != "" {
			return e.Message
		}
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 512 {
		msg = msg[:512]
	}
	if msg == "" {
		msg = "the worker refused the request"
	}
	return msg
}

// cutDecode ends the decode leg after the prefill leg failed.
func (x *pdRun) cutDecode(l pdLeg) {
	x.cancelD(l.err)
	x.s.abort(x.dec, x.rid, abortOtherLeg)
}

// prefill waits for the prefill leg's result.
func (x *pdRun) prefill() pdLeg {
	if x.pl == nil {
		l := <-x.pDone
		x.pl = &l
	}
	return *x.pl
}

// prefillCut reports whether the prefill leg's failure cut the decode leg
// (the client is still there).
func (x *pdRun) prefillCut() bool { return x.ctx.Err() == nil && x.dctx.Err() != nil }

// prefillVerdict gives the prefill leg a moment to report its own failure
// when D answered an error: D's error may be P's failure seen from D (a
// decoder whose KV never comes answers 500, SGLang's "KVTransferError ...
// prefill instance, it might be dead"), and P's cause names the worker at
// fault.
func (x *pdRun) prefillVerdict() (pdLeg, bool) {
	select {
	case l := <-x.pDone:
		x.pl = &l
		return l, l.err != nil
	case <-time.After(prefillVerdictGrace):
		return pdLeg{}, false
	}
}

// prefillFailed ends an attempt whose prefill leg failed before anything
// reached the client: a retry, or the prefill's own cause. A failed
// transfer counts against the decoder's breaker.
func (x *pdRun) prefillFailed(w http.ResponseWriter, pl pdLeg) bool {
	q := x.q
	if pl.transfer() {
		x.l.transferFailed()
		q.avoid = append(q.avoid, x.a.D)
	}
	x.l.finish(false)
	if pl.clientError() {
		// The worker's verdict on the request (a prompt past its context,
		// a bad sampling parameter): every attempt would get the same.
		x.s.fail(w, q, pl.status, pl.msg)
		return true
	}
	if x.s.retryable(q, pl.status) || pl.status == 0 && q.attempt < x.s.cfg.Retries {
		q.retry, q.retryOn = pl.err.Error(), x.p.URL
		return true
	}
	x.s.fail(w, q, http.StatusServiceUnavailable, "prefill-failed: "+pl.err.Error())
	return true
}

// decodeUnreachable ends an attempt whose decode leg got no answer: the
// prefill leg's failure if it cut the leg, else the decoder's, which
// counts against its breaker (the KV had nowhere to go).
func (x *pdRun) decodeUnreachable(w http.ResponseWriter, err error) bool {
	pFirst := x.prefillCut()
	if !pFirst {
		x.s.abort(x.p.URL, x.rid, abortOtherLeg)
		// The abort can reach P before the request does and be lost:
		// closing P's leg ends it either way (a worker aborts a request
		// whose client left), so the wait below is not P's bootstrap
		// timeout.
		x.cancelP()
	}
	if pl := x.prefill(); pFirst && pl.err != nil {
		return x.prefillFailed(w, pl)
	}
	if x.ctx.Err() != nil {
		x.l.finish(false) // the client left: nobody to answer, nothing the decoder did
		return true
	}
	x.l.transferFailed()
	x.l.finish(false)
	q, cause := x.q, "decode-unreachable: "+x.dec+": "+err.Error()
	q.avoid = append(q.avoid, x.a.D)
	if q.attempt < x.s.cfg.Retries && x.s.another(q) {
		// Nothing reached the client: another decoder may serve it.
		q.retry, q.retryOn = cause, x.dec
		return true
	}
	x.s.fail(w, q, http.StatusServiceUnavailable, cause)
	return true
}

// decodeRetry ends an attempt whose decoder answered a retryable status:
// P's leg is aborted (the next attempt gets a fresh pair and room), the
// decoder avoided, and a 5xx counted against its breaker.
func (x *pdRun) decodeRetry(resp *http.Response) bool {
	io.Copy(io.Discard, resp.Body)
	x.s.abort(x.p.URL, x.rid, abortRetry)
	x.cancelP()
	x.prefill()
	q := x.q
	q.retry, q.retryOn = fmt.Sprintf("decode %s answered %d", x.dec, resp.StatusCode), x.dec
	q.avoid = append(q.avoid, x.a.D)
	if resp.StatusCode >= 500 {
		x.l.transferFailed()
	}
	x.l.finish(false)
	return true
}

// relayDecode relays D's answer, with P's cached_tokens, and ends the
// attempt: completed only when both legs succeeded.
func (x *pdRun) relayDecode(w http.ResponseWriter, resp *http.Response) bool {
	if resp.StatusCode == http.StatusOK {
		// D's first byte is its first token: its KV landed (whichever of
		// this and the prefill leg's answer comes first reports it).
		resp.Body = &firstByte{ReadCloser: resp.Body, f: x.l.landed}
		x.legOK(false)
	}
	rewrite := func(m map[string]any) {
		if x.pl == nil {
			// The final answer waits for P's leg, whose cached_tokens it
			// carries (P's response can trail D's last token); earlier
			// events take it only if it is already in.
			mi, _ := m["meta_info"].(map[string]any)
			if mi != nil && mi["finish_reason"] != nil {
				x.prefill()
			} else {
				select {
				case l := <-x.pDone:
					x.pl = &l
				default:
				}
			}
		}
		if x.pl != nil && x.pl.err == nil && x.pl.cached != "" {
			if mi, ok := m["meta_info"].(map[string]any); ok {
				mi["cached_tokens"] = x.pl.cached
			}
		}
	}
	// A prefill leg that failed cut D's leg and aborted D's room: D's
	// answer is then its abort, not the client's answer.
	ok, committed := relay(w, resp, x.l.mode(), x.dec, x.q.clampCached(rewrite), x.prefillCut)
	ok = ok && resp.StatusCode == http.StatusOK
	if !committed && x.ctx.Err() == nil {
		// D's JSON answer was cut before any of it reached the client: if
		// the prefill leg failed (it cuts D's leg), retry like any failure
		// of P; else D broke off, and the client hears it.
		if pl := x.prefill(); pl.err != nil {
			return x.prefillFailed(w, pl)
		}
		// D broke off or aborted it: another decoder may serve it; else
		// the client hears it failed, never a 200.
		q, cause := x.q, "gateway: decode "+x.dec+": answer cut short or aborted"
		q.avoid = append(q.avoid, x.a.D)
		if q.attempt < x.s.cfg.Retries && x.s.another(q) {
			x.s.abort(x.p.URL, x.rid, abortRetry)
			x.l.finish(false)
			q.retry, q.retryOn = cause, x.dec
			return true
		}
		x.s.fail(w, q, http.StatusBadGateway, cause)
	}
	if !ok {
		why := abortWhy(x.ctx)
		x.s.abort(x.p.URL, x.rid, why)
		if x.ctx.Err() != nil {
			x.s.abort(x.dec, x.rid, why) // the client left: say so, do not rely on D noticing
			// The abort can reach P before the request does and be lost
			// (as in decodeUnreachable): closing P's leg ends it either
			// way, so the wait below is not P's bootstrap timeout.
			x.cancelP()
		}
	}
	pl := x.prefill()
	if pl.transfer() {
		x.l.transferFailed()
	}
	x.l.finish(ok && pl.err == nil)
	if pl.err != nil && ok {
		// D answered but P failed: the decoder's room is dead; make sure
		// it is not left waiting.
		x.s.abort(x.dec, x.rid, abortOtherLeg)
	}
	return true
}
