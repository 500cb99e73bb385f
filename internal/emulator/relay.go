package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Answering /generate: the final JSON once the request ends, or each token
// as an SSE event as the driver publishes it.

// relayFinal waits for the request's end and writes its answer.
func (s *Server) relayFinal(w http.ResponseWriter, ctx context.Context, st *reqState) {
	select {
	case <-st.done:
	case <-ctx.Done():
		s.d.post(func(now float64) { s.abortReq(now, st, "Aborted: the client disconnected") })
		return
	}
	sn := st.snap()
	o := sn.fin
	if o.reason.Type == "abort" && o.status != 0 {
		if o.status == http.StatusBadRequest {
			writeValueError(w, *o.reason.Message)
		} else {
			writeHTTPError(w, o.status, *o.reason.Message)
		}
		return
	}
	writeJSON(w, http.StatusOK, st.out(sn, sn.gen, 0, true))
}

// out is the answer (or SSE event) holding tokens [from, n).
func (st *reqState) out(sn snapshot, n, from int, final bool) GenerateOut {
	ids := st.outputIDs(sn, n)[from:]
	o := GenerateOut{Text: outputText(ids), OutputIDs: ids, MetaInfo: MetaInfo{
		ID: st.rid, PromptTokens: st.er.Input, CompletionTokens: n, CachedTokens: sn.cached,
		E2ELatency: sn.at - st.arrived, WeightVersion: "default",
	}}
	info := &EmulatorInfo{Role: st.s.roleName(), FirstTokenFrom: sn.firstFrom}
	if sn.hasTTFT {
		ttft := sn.ttft
		info.TTFT = &ttft
	}
	if final {
		o.MetaInfo.FinishReason = sn.fin.reason
		info.QueueS = sn.fin.queue
	}
	o.MetaInfo.Emulator = info
	return o
}

func (s *Server) relayStream(w http.ResponseWriter, ctx context.Context, st *reqState) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	sent := 0
	for {
		select {
		case <-st.notify:
		case <-st.done:
		case <-ctx.Done():
			s.d.post(func(now float64) { s.abortReq(now, st, "Aborted: the client disconnected") })
			return
		}
		sn := st.snap()
		if sn.gen > sent || sn.fin != nil {
			from := 0
			if s.cfg.IncrementalStream {
				from = sent
			}
			if err := writeEvent(w, st.out(sn, sn.gen, from, sn.fin != nil)); err != nil {
				s.d.post(func(now float64) { s.abortReq(now, st, "Aborted: the client disconnected") })
				return
			}
			sent = sn.gen
		}
		if sn.fin != nil {
			fmt.Fprint(w, "data: [DONE]\n\n")
			if fl != nil {
				fl.Flush()
			}
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func writeEvent(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

// streamError is how SGLang answers a streamed request refused while
// tokenizing: 200, one error event, [DONE].
func (s *Server) streamError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var e errorBody
	e.Error.Message = msg
	writeEvent(w, e)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
