package sim

import (
	"errors"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// dispatch routes r and starts it on its workers.
func (s *Sim) dispatch(r *req) {
	blocks := r.t.HashIDs
	switch s.cfg.Mechanism {
	case PDDisaggregation:
		pd := s.pRouter.Pick(r.t.SessionID, blocks)
		dd := s.dRouter.Pick(r.t.SessionID, blocks)
		r.p, r.d = s.prefills[pd.Worker], s.decodes[dd.Worker]
		r.pe = engine.Request{ID: r.t.ChatID, Kind: engine.PrefillOnly, Blocks: blocks, Input: r.t.InputLength, Tag: r}
		r.de = engine.Request{ID: r.t.ChatID, Kind: engine.DecodeOnly, Input: r.t.InputLength, Output: r.t.OutputLength, Tag: r}
		// SGLang's order: D pre-allocates the KV, and P holds the request in
		// its bootstrap queue until then (P is submitted on EvReserved). A
		// P that could never take it refuses before D reserves anything.
		if err := s.workers[r.p].Admissible(&r.pe); err != nil {
			s.failLegs(r, reason(err, s.workers[r.p].Name()))
			return
		}
		if err := s.workers[r.d].Reserve(s.now, &r.de); err != nil {
			s.failLegs(r, reason(err, s.workers[r.d].Name()))
			return
		}
		// Only accepted requests move the routers' state (pins, counters,
		// belief of what each worker caches).
		s.noteBinding(r, dd.Worker)
		s.pRouter.Dispatched(pd.Worker, r.t.SessionID, blocks)
		s.dRouter.Dispatched(dd.Worker, r.t.SessionID, blocks)
		r.routed = true
		s.collect(r.d)
	case PDColo:
		dd := s.dRouter.Pick(r.t.SessionID, blocks)
		r.d = s.colos[dd.Worker]
		r.de = engine.Request{ID: r.t.ChatID, Kind: engine.Full, Blocks: blocks, Input: r.t.InputLength, Output: r.t.OutputLength,
			Session: r.t.SessionID, Tag: r}
		if err := s.workers[r.d].Submit(s.now, &r.de); err != nil {
			s.failLegs(r, reason(err, s.workers[r.d].Name()))
			return
		}
		s.noteBinding(r, dd.Worker)
		s.dRouter.Dispatched(dd.Worker, r.t.SessionID, blocks)
		r.routed = true
		s.collect(r.d)
	}
}

// reason turns a worker's refusal into "<cause>: <detail>"; the cause
// before the colon is what summaries group by.
func reason(err error, worker string) string {
	if errors.Is(err, engine.ErrTooLarge) {
		return "kv-pool-too-small: " + worker + ": " + err.Error()
	}
	return "worker-refused: " + worker + ": " + err.Error()
}

// noteBinding logs a session's move to a new decode (or colocated) worker.
func (s *Sim) noteBinding(r *req, w int) {
	prev, ok := s.dRouter.Pin(r.t.SessionID)
	if ok && prev == w {
		return
	}
	detail := "bind"
	if ok {
		detail = "move from " + s.dRouter.Names()[prev]
	}
	s.logEvent("session-binding", s.dRouter.Names()[w], r, detail, int64(r.t.InputLength))
}

// handle reacts to one worker event.
func (s *Sim) handle(ev engine.Event) {
	r := ev.Req.Tag.(*req)
	if r.dead {
		return // its legs were aborted; nothing late matters
	}
	switch ev.Kind {
	case engine.EvReserved:
		// D holds the KV: P's bootstrap queue lets the request through.
		if err := s.workers[r.p].Submit(s.now, &r.pe); err != nil {
			s.failLegs(r, reason(err, s.workers[r.p].Name()))
			return
		}
		s.collect(r.p)
	case engine.EvChunkDone:
		s.sendKV(r, ev.Tokens)
	case engine.EvPrefillDone:
		s.doneReading(r)
		r.pDone = true
		s.sendKV(r, ev.Tokens)
	case engine.EvFirstToken:
		s.doneReading(r)
		r.firstAt = ev.Time
		r.ttft, r.hasTTFT = ev.Time-r.sent, true
	case engine.EvFinished:
		s.dRouter.Done(s.routerIndex(r))
		s.record(r, metrics.StatusCompleted, "")
		s.end(r)
	}
}

// routerIndex maps r's decode/colocated worker back to its router index.
func (s *Sim) routerIndex(r *req) int {
	if s.cfg.Mechanism == PDColo {
		return r.d - s.colos[0]
	}
	return r.d - s.decodes[0]
}

// sendKV streams the KV of r's prompt up to tokens from P to D, as SGLang's
// send_kv_chunk does after each prefill chunk: the first chunk's transfer
// carries the prefix P had cached too (D keeps nothing), later ones their
// own tokens, and only the last chunk's transfer is left exposed once the
// prefill ends. The transfers share the link with everyone else's.
func (s *Sim) sendKV(r *req, tokens int) {
	n := tokens - r.sentKV
	if n <= 0 && !r.pDone {
		return
	}
	r.sentKV = tokens
	li := r.p - s.prefills[0]
	r.xferLive++
	s.links[li].Start(s.now, &engine.Transfer{Bytes: int64(max(n, 0)) * s.kvBytes, Tag: r})
	s.reschedLink(li)
}

// transferDone lands one of r's chunk transfers. When the last lands, P
// frees its KV (into its prefix cache) and D starts decoding: the first
// token came from P with the KV.
func (s *Sim) transferDone(r *req) {
	r.xferLive--
	r.xferEnd = s.now
	if r.xferLive > 0 || !r.pDone {
		return
	}
	if r.dead {
		if r.pe.Stage == engine.StageHeld {
			s.workers[r.p].Release(s.now, &r.pe)
			s.collect(r.p)
		}
		return
	}
	s.pRouter.Done(r.p - s.prefills[0])
	r.pLeft = true
	if err := s.workers[r.p].Release(s.now, &r.pe); err != nil {
		s.failLegs(r, "engine-error: prefill release: "+err.Error())
		return
	}
	s.collect(r.p)
	if err := s.workers[r.d].StartDecode(s.now, &r.de); err != nil {
		s.failLegs(r, "engine-error: decode start: "+err.Error())
		return
	}
	s.collect(r.d)
}

// failLegs aborts whatever r holds and records it failed with cause.
func (s *Sim) failLegs(r *req, cause string) {
	s.abortLegs(r)
	s.fail(r, metrics.StatusFailed, cause)
}

// abortLegs frees r's KV on its workers. A transfer in flight cannot be
// called back; P's KV is released when it lands (see transferDone).
func (s *Sim) abortLegs(r *req) {
	r.dead = true
	if r.p >= 0 {
		// A prompt fully prefilled with chunks still on the link stays held
		// until they land (transferDone releases it); anything else goes now.
		if r.pe.Stage != engine.StageHeld || r.xferLive == 0 {
			s.workers[r.p].Abort(s.now, &r.pe)
			s.collect(r.p)
		}
		if r.routed && !r.pLeft {
			s.pRouter.Done(r.p - s.prefills[0])
			r.pLeft = true
		}
	}
	if r.d >= 0 {
		s.workers[r.d].Abort(s.now, &r.de)
		s.collect(r.d)
		if r.routed {
			s.dRouter.Done(s.routerIndex(r))
		}
	}
}

// record writes r's metrics line and folds it into the summary.
func (s *Sim) record(r *req, st metrics.Status, cause string) {
	m := &s.rec
	*m = metrics.Record{
		RequestID:    strconv.FormatInt(r.t.ChatID, 10),
		SessionID:    r.t.SessionID,
		ChatID:       r.t.ChatID,
		Turn:         r.t.Turn,
		TraceTimeS:   r.t.Timestamp,
		ArrivalS:     r.sent,
		GateS:        r.sent - r.released,
		InputLength:  r.t.InputLength,
		OutputLength: r.t.OutputLength,
		Status:       st,
		Error:        cause,
	}
	switch s.cfg.Mechanism {
	case PDDisaggregation:
		m.ExecutionMode = ModePDRouter
	case PDColo:
		m.ExecutionMode = ModeColoRoute
	}
	if r.p >= 0 {
		m.PrefillWorker = s.workers[r.p].Name()
	}
	if r.d >= 0 {
		m.DecodeWorker = s.workers[r.d].Name()
	}
	if st != metrics.StatusCompleted {
		m.FinishReason = "abort"
		m.OutputLength = r.de.Generated() // abortLegs credited the steps run so far
		m.LatencyS = s.now - r.sent
		s.emit(m)
		return
	}
	m.FinishReason = "length"
	m.LatencyS = s.now - r.sent
	m.TTFTS = r.ttft
	if r.t.OutputLength > 1 {
		m.TPOTS = (m.LatencyS - m.TTFTS) / float64(r.t.OutputLength-1)
	}
	b := &m.Breakdown
	if r.p >= 0 {
		m.CachedTokens = r.pe.CachedTokens
		b.PreallocWaitS = r.de.AdmittedAt - r.sent
		b.QueueS = (r.pe.AdmittedAt - r.pe.SubmittedAt) + (r.firstAt - r.xferEnd)
		b.PrefillS = r.pe.PrefillEndAt - r.pe.AdmittedAt
		b.TransferS = r.xferEnd - r.pe.PrefillEndAt
		b.DecodeS = s.now - r.firstAt
	} else {
		m.CachedTokens = r.de.CachedTokens
		b.QueueS = r.de.AdmittedAt - r.sent
		b.PrefillS = r.de.PrefillEndAt - r.de.AdmittedAt
		b.DecodeS = s.now - r.de.PrefillEndAt
	}
	m.UncachedTokens = r.t.InputLength - m.CachedTokens
	s.emit(m)
}

func (s *Sim) emit(m *metrics.Record) {
	s.collector.Add(m)
	if err := s.sink.Request(m); err != nil && s.err == nil {
		s.err = err
	}
}
