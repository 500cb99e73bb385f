package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// prefillVerdictGrace is how long a decoder's error waits for the prefill
// leg's own outcome. A dead prefill worker refuses the connection within
// microseconds on a healthy host; the bound only delays a decoder's error
// when P is alive and busy.
const prefillVerdictGrace = 500 * time.Millisecond

// pd runs one request over SGLang's PD protocol (DESIGN §9): the identical
// body to the prefill and the decode worker, with P's bootstrap host and
// port, a fresh 63-bit bootstrap room and the gateway's own rid on both
// legs; D's answer is relayed (SSE unbuffered), P's is drained, and the
// cached tokens reported are P's (D keeps nothing in plain PD). When one
// leg fails the other is aborted explicitly, so a decoder is never left
// waiting on a room. A seed (KVC) also names the session, so the decoder
// keeps it. It reports whether the client got an answer.
func (s *Server) pd(ctx context.Context, w http.ResponseWriter, a kvc.Action, q *request, d *kvc.Dispatch) bool {
	if a.Kind == kvc.ActSeed {
		s.beforeReseed(ctx, q, d, a.P) // D→P sync, passive mode (dtop.go)
	}
	p, dec := s.prefillAt(a.P), s.decodeURL(a.D)
	body := clone(q.body)
	rid := newRID()
	body["rid"] = rid
	body["bootstrap_host"] = hostOf(p.URL)
	body["bootstrap_port"] = p.BootstrapPort
	body["bootstrap_room"] = newRoom()
	if a.Kind == kvc.ActSeed {
		body["session_id"] = q.session
	} else {
		delete(body, "session_id")
	}

	type leg struct {
		status int
		cached json.Number
		err    error
	}
	pDone := make(chan leg, 1)
	pctx, cancelP := context.WithCancel(context.WithoutCancel(ctx)) // P finishes even if the client leaves
	defer cancelP()
	// A failed prefill leg ends the decode leg at once: D is aborted (its
	// room will never get KV) and the wait for its answer is cut, so the
	// client is not kept waiting for D's bootstrap timeout.
	dctx, cancelD := context.WithCancelCause(ctx)
	defer cancelD(nil)
	pFailed := func(l leg) {
		cancelD(l.err)
		s.abort(dec, rid, abortOtherLeg)
	}
	// Accepted before the legs go: the routers count the request in
	// flight from now, so requests arriving together spread over the
	// workers instead of all seeing the same idle one.
	s.locked(func() { d.Accepted() })
	go func() {
		resp, err := s.send(pctx, p.URL+"/generate", body)
		if err != nil {
			l := leg{err: fmt.Errorf("prefill %s unreachable: %w", p.URL, err)}
			if pctx.Err() == nil { // not ended by the gateway itself
				pFailed(l)
			}
			pDone <- l
			return
		}
		defer resp.Body.Close()
		l := leg{status: resp.StatusCode}
		var out struct {
			MetaInfo struct {
				CachedTokens json.Number `json:"cached_tokens"`
			} `json:"meta_info"`
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			if json.Unmarshal(b, &out) == nil {
				l.cached = out.MetaInfo.CachedTokens
			}
		} else {
			// A streamed prefill leg: its last data event carries meta_info.
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "data: {") && json.Unmarshal([]byte(line[len("data: "):]), &out) == nil {
					l.cached = out.MetaInfo.CachedTokens
				}
			}
		}
		if l.status != http.StatusOK {
			l.err = fmt.Errorf("prefill %s answered %d: %s", p.URL, l.status, strings.TrimSpace(string(b)))
			pFailed(l)
		}
		pDone <- l
	}()

	// prefillFailed ends a request whose prefill leg failed before anything
	// reached the client: a retry, or the prefill's own cause.
	prefillFailed := func(pl leg) bool {
		if strings.Contains(pl.err.Error(), "transfer") {
			s.locked(func() { s.peerFailed(a.D) })
			q.avoid = append(q.avoid, a.D)
		}
		if s.retryable(q, pl.status) || pl.status == 0 && q.attempt < s.cfg.Retries {
			q.retry, q.retryOn = pl.err.Error(), p.URL
			s.locked(func() { d.Finished(false) })
			return true
		}
		s.locked(func() {
			d.Finished(false)
			d.Refused("prefill-failed: " + pl.err.Error())
		})
		return false
	}

	resp, err := s.send(dctx, dec+"/generate", body)
	if err != nil {
		pFirst := ctx.Err() == nil && dctx.Err() != nil // the prefill leg failed and cut this one
		if !pFirst {
			s.abort(p.URL, rid, abortOtherLeg)
			// The abort can reach P before the request does and be lost:
			// closing P's leg ends it either way (a worker aborts a request
			// whose client left), so the wait below is not P's bootstrap
			// timeout.
			cancelP()
		}
		pl := <-pDone
		if pFirst && pl.err != nil {
			return prefillFailed(pl)
		}
		if ctx.Err() != nil {
			// The client left before D answered: no worker's fault.
			s.abort(dec, rid, abortDisconnect)
			s.locked(func() {
				d.PrefillDone()
				d.Finished(false)
			})
			return true
		}
		s.locked(func() {
			s.peerFailed(a.D)
			q.avoid = append(q.avoid, a.D)
			d.Finished(false)
		})
		if q.attempt < s.cfg.Retries && s.another(q) {
			// Nothing reached the client: another decoder may serve it.
			q.retry, q.retryOn = "decode-unreachable: "+dec+": "+err.Error(), dec
			return true
		}
		s.locked(func() { d.Refused("decode-unreachable: " + dec + ": " + err.Error()) })
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// D's error may be P's failure seen from D: a decoder whose KV
		// never comes answers 500 (SGLang: "KVTransferError ... prefill
		// instance, it might be dead"), and it can say so before the
		// gateway's own prefill leg fails. P's leg is given a moment to
		// report its cause, which names the worker at fault.
		select {
		case pl := <-pDone:
			if pl.err != nil {
				io.Copy(io.Discard, resp.Body)
				return prefillFailed(pl)
			}
			pDone <- pl // not P's fault: read again below
		case <-time.After(prefillVerdictGrace):
		}
	}
	if s.retryable(q, resp.StatusCode) {
		io.Copy(io.Discard, resp.Body)
		s.abort(p.URL, rid, abortRetry) // the next attempt gets a fresh pair and room
		cancelP()
		<-pDone
		q.retry, q.retryOn = fmt.Sprintf("decode %s answered %d", dec, resp.StatusCode), dec
		s.locked(func() {
			if resp.StatusCode >= 500 {
				s.peerFailed(a.D)
			}
			q.avoid = append(q.avoid, a.D)
			d.PrefillDone()
			d.Finished(false)
		})
		return true
	}
	var mode string
	s.locked(func() { mode = d.Mode() })

	var pl *leg
	rewrite := func(m map[string]any) {
		if pl == nil {
			// The final answer waits for P's leg, whose cached_tokens it
			// carries (P's response can trail D's last token); earlier
			// events take it only if it is already in.
			mi, _ := m["meta_info"].(map[string]any)
			if mi != nil && mi["finish_reason"] != nil {
				l := <-pDone
				pl = &l
			} else {
				select {
				case l := <-pDone:
					pl = &l
				default:
				}
			}
		}
		if pl != nil && pl.err == nil && pl.cached != "" {
			if mi, ok := m["meta_info"].(map[string]any); ok {
				mi["cached_tokens"] = pl.cached
			}
		}
	}
	// A prefill leg that failed cut D's leg and aborted D's room: D's
	// answer is then its abort, not the client's answer.
	pCut := func() bool { return ctx.Err() == nil && dctx.Err() != nil }
	ok, committed := relay(w, resp, mode, dec, rewrite, pCut)
	ok = ok && resp.StatusCode == http.StatusOK
	if !committed && ctx.Err() == nil {
		// D's JSON answer was cut before any of it reached the client: if
		// the prefill leg failed (it cuts D's leg), retry like any failure
		// of P; else D broke off, and the client hears it.
		if pl == nil {
			l := <-pDone
			pl = &l
		}
		if pl.err != nil {
			return prefillFailed(*pl)
		}
		writeError(w, http.StatusBadGateway, "gateway: decode "+dec+": answer cut short")
	}
	if !ok {
		why := abortWhy(ctx)
		s.abort(p.URL, rid, why)
		if ctx.Err() != nil {
			s.abort(dec, rid, why) // the client left: say so, do not rely on D noticing
		}
	}
	if pl == nil {
		l := <-pDone
		pl = &l
	}
	s.locked(func() {
		d.PrefillDone()
		if pl.err != nil && strings.Contains(pl.err.Error(), "transfer") {
			s.peerFailed(a.D)
		} else if ok {
			s.peerOK(a.D)
		}
		d.Finished(ok && pl.err == nil)
	})
	if pl.err != nil && ok {
		// D answered but P failed: the decoder's room is dead; make sure
		// it is not left waiting.
		s.abort(dec, rid, abortOtherLeg)
	}
	return true
}
