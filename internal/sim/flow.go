package sim

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// dispatch hands r to the control plane and executes what it decides.
func (s *Sim) dispatch(r *req) {
	if s.snaps != nil {
		s.syncSeeTurn(r)
	}
	r.x = s.disp.Begin(s.now, kvc.Request{Session: r.t.SessionID, SessionNum: r.sess.num, Turn: r.t.Turn, Blocks: r.t.HashIDs, SharedBlocks: r.shared,
		Input: r.t.InputLength, Output: r.t.OutputLength})
	s.execute(r)
}

// execute carries out the dispatcher's actions until one is in flight: an
// admission RPC (a modelled round trip, then evAdmit), or a request started
// on its workers.
func (s *Sim) execute(r *req) {
	r.alive()
	for {
		a := r.x.Action()
		if a.Delay > 0 && !r.delayed {
			// Backpressure: the router holds the request for the pause the
			// decoder recommended (capped), then acts.
			r.delayed = true
			s.pushFor(r, event{t: s.now + a.Delay, kind: evExecute})
			return
		}
		r.delayed = false
		switch a.Kind {
		case kvc.ActAdmit:
			if s.routerAdmits(r, a) {
				continue // a decoder without the session cache (decoderkind.go)
			}
			rtt := s.cfg.KVC.AdmissionRTTS
			if a.Inline {
				rtt = 0 // v3: the check rides on the request; a refusal pays it after
			}
			s.pushFor(r, event{t: s.now + rtt, kind: evAdmit})
			return
		case kvc.ActColo, kvc.ActDirect, kvc.ActLocal:
			if s.startWhole(r, a) {
				return
			}
		case kvc.ActWholeP:
			if s.startWholeP(r, a) {
				return
			}
		case kvc.ActPD, kvc.ActSeed:
			if s.startPD(r, a) {
				return
			}
		case kvc.ActFail:
			s.failLegs(r, a.Cause)
			return
		default:
			return
		}
	}
}

// admit answers r's admission RPC from the decoder's own bookkeeping
// (Algorithm 2) and feeds the reply to the dispatcher.
func (s *Sim) admit(r *req) {
	if r.alive().ended {
		return
	}
	a := r.x.Action()
	wi := s.decodes[a.D]
	w := s.workers[wi]
	rep := w.AdmitSession(s.now, engine.AdmitQuery{Session: r.t.SessionID, SessionNum: r.sess.num, Blocks: r.t.HashIDs,
		Input: r.t.InputLength, Output: r.t.OutputLength, MaxAppend: a.MaxAppend, ForceSeed: a.ForceSeed, DirectOnly: a.DirectOnly})
	s.collect(wi)
	if !s.quiet {
		s.logAdmission(w, r, rep)
	}
	r.x.Reply(kvc.AdmitReply{CanAdmit: rep.CanAdmit, Direct: rep.Mode == engine.AdmitDirect, Reason: rep.Reason, PauseMs: rep.PauseMs, CachedTokens: rep.CachedTokens,
		Tier: rep.Tier, HostTokens: rep.HostTokens, StorageTokens: rep.StorageTokens, StorageQueueS: rep.StorageQueueS})
	s.execute(r)
}

// logAdmission writes an admission RPC's reply to the admission and
// backpressure logs.
func (s *Sim) logAdmission(w *engine.Worker, r *req, rep engine.AdmitReply) {
	if s.quiet {
		return // nothing reads the details: not formatted
	}
	s.logEvent("admission", w.Name(), r, admissionDetail(rep, s.cfg.KVC.AdmissionRTTS), rep.TrimmedTok)
	if rep.PauseMs > 0 {
		s.logEvent("backpressure", w.Name(), r, backpressureDetail(rep, w.Queued()), 0)
	}
}

// admissionDetail is "mode=%s can_admit=%t reason=%s cached=%d pause_ms=%g
// trimmed=%d rtt_ms=%g" of the reply, written without fmt (an event per
// admission RPC; TestAdmissionDetailIsSprintf).
func admissionDetail(rep engine.AdmitReply, rttS float64) string {
	b := make([]byte, 0, 128)
	b = append(b, "mode="...)
	b = append(b, rep.Mode.String()...)
	b = append(b, " can_admit="...)
	b = strconv.AppendBool(b, rep.CanAdmit)
	b = append(b, " reason="...)
	b = append(b, rep.Reason...)
	b = append(b, " cached="...)
	b = strconv.AppendInt(b, int64(rep.CachedTokens), 10)
	b = append(b, " pause_ms="...)
	b = strconv.AppendFloat(b, rep.PauseMs, 'g', -1, 64)
	b = append(b, " trimmed="...)
	b = strconv.AppendInt(b, int64(rep.Trimmed), 10)
	b = append(b, " rtt_ms="...)
	b = strconv.AppendFloat(b, 1000*rttS, 'g', -1, 64)
	return string(b)
}

// backpressureDetail is "recommended_pause_ms=%g can_admit=%t queued=%d".
func backpressureDetail(rep engine.AdmitReply, queued int) string {
	b := make([]byte, 0, 64)
	b = append(b, "recommended_pause_ms="...)
	b = strconv.AppendFloat(b, rep.PauseMs, 'g', -1, 64)
	b = append(b, " can_admit="...)
	b = strconv.AppendBool(b, rep.CanAdmit)
	b = append(b, " queued="...)
	b = strconv.AppendInt(b, int64(queued), 10)
	return string(b)
}

// startWhole serves r prefill and decode on one worker: a colocated worker
// (DP), or its decoder as a direct append (KVC: D prefills the new tokens on
// its own scheduler, interleaved with its decode batch, and keeps the
// session) or a peer's local prefill (the same, into D's decode radix
// cache).
func (s *Sim) startWhole(r *req, a kvc.Action) bool {
	pool, keep := s.colos, false
	if a.Kind == kvc.ActDirect || a.Kind == kvc.ActLocal {
		pool, keep = s.decodes, true
	}
	r.p, r.d = -1, pool[a.D]
	r.startAt = s.now
	r.de.Renew(engine.Request{ID: r.t.ChatID, Kind: engine.Full, Blocks: r.t.HashIDs, SharedBlocks: r.shared, Input: r.t.InputLength, Output: r.t.OutputLength,
		Session: r.t.SessionID, SessionNum: r.sess.num, KeepSession: keep, Tag: r})
	s.onWorker(r, r.d)
	if err := s.workers[r.d].Submit(s.now, &r.de); err != nil {
		r.x.Refused(reason(err, s.workers[r.d].Name()))
		return false
	}
	s.noteBinding(r, a.D)
	r.x.Accepted()
	s.collect(r.d)
	return true
}

// onWorker notes that r's session may have a record on worker i from now
// on (closeSession asks only such workers to forget it).
func (s *Sim) onWorker(r *req, i int) {
	if i < 64 {
		r.sess.onWorkers |= 1 << i
	}
}

// submitPrefill hands r to its prefill worker.
func (s *Sim) submitPrefill(r *req) {
	s.onWorker(r, r.p)
	if err := s.workers[r.p].Submit(s.now, r.pe); err != nil {
		s.failLegs(r, reason(err, s.workers[r.p].Name()))
		return
	}
	s.collect(r.p)
}

// startPD starts a P→D request: plain PD, or a KVC seed/reseed whose
// decoder keeps the session.
func (s *Sim) startPD(r *req, a kvc.Action) bool {
	r.p, r.d = s.prefills[a.P], s.decodes[a.D]
	r.startAt = s.now
	seed := a.Kind == kvc.ActSeed
	pe := engine.Request{ID: r.t.ChatID, Kind: engine.PrefillOnly, Blocks: r.t.HashIDs, SharedBlocks: r.shared, Input: r.t.InputLength, Tag: r}
	if r.pe == nil {
		r.pe = &pe
	} else {
		r.pe.Renew(pe) // a recycled record's, or an earlier attempt's that no worker took
	}
	r.de.Renew(engine.Request{ID: r.t.ChatID, Kind: engine.DecodeOnly, Input: r.t.InputLength, Output: r.t.OutputLength, Tag: r})
	if seed {
		r.de.Blocks, r.de.Session, r.de.SessionNum, r.de.KeepSession = r.t.HashIDs, r.t.SessionID, r.sess.num, true
		r.pe.Session, r.pe.SessionNum, r.pe.KeepSession = r.t.SessionID, r.sess.num, true // a capacity-backup P keeps it
		r.pe.LowPriority = true                                                           // a decoder keeps it (prefill priority eviction)
	}
	if s.dPath(a.D) == kvc.PathPlainPD {
		// A stock decoder keeps nothing: the seed is plain PD to it.
		r.de.Blocks, r.de.Session, r.de.SessionNum, r.de.KeepSession = nil, "", 0, false
	}
	if s.cfg.Mechanism.isPeer() || s.dPath(a.D) == kvc.PathDeltaPD || s.dPath(a.D) == kvc.PathLocalPrefill {
		// D's decode radix cache matches the prompt at its reservation and
		// keeps what it receives and generates.
		r.de.Blocks, r.de.Session, r.de.SessionNum, r.de.KeepSession = r.t.HashIDs, r.t.SessionID, r.sess.num, true
	}
	// SGLang's order: D pre-allocates the KV, and P holds the request in
	// its bootstrap queue until then (P is submitted on EvReserved). A P
	// that could never take it refuses before D reserves anything.
	if err := s.workers[r.p].Admissible(r.pe); err != nil {
		r.x.Refused(reason(err, s.workers[r.p].Name()))
		return false
	}
	s.onWorker(r, r.d)
	if err := s.workers[r.d].Reserve(s.now, &r.de); err != nil {
		r.x.Refused(reason(err, s.workers[r.d].Name()))
		return false
	}
	if seed {
		s.syncBeforeReseed(r, a.P)
	}
	s.noteBinding(r, a.D)
	r.x.Accepted()
	s.collect(r.d)
	return true
}

// reason turns a worker's refusal into "<cause>: <detail>"; the cause
// before the colon is what summaries group by.
func reason(err error, worker string) string {
	if errors.Is(err, engine.ErrTooLarge) {
		return "kv-pool-too-small: " + worker + ": " + err.Error()
	}
	return "worker-refused: " + worker + ": " + err.Error()
}

// noteBinding logs every turn's decode (or colocated) worker, before the
// dispatcher pins the session there: "bind" for a session's first, "stay",
// or "move from <worker>".
func (s *Sim) noteBinding(r *req, w int) {
	if s.quiet {
		return // no sink: no "move from" string built a request
	}
	d := s.disp.DRouter()
	prev, ok := d.PinKey(r.sessKey())
	detail := "bind"
	switch {
	case ok && prev == w:
		detail = "stay"
	case ok:
		detail = "move from " + d.Names()[prev]
	}
	s.logEvent("session-binding", d.Names()[w], r, detail, int64(r.t.InputLength))
}

// handle reacts to one worker event.
func (s *Sim) handle(ev engine.Event) {
	r := ev.Req.Tag.(*req).alive()
	if r.dead {
		return // its legs were aborted; nothing late matters
	}
	switch ev.Kind {
	case engine.EvReserved:
		// D holds the KV: P's bootstrap queue lets the request through
		// (once a passive D→P snapshot it waits for has landed).
		r.dReady = true
		// P sends only what D's decode radix cache lacks (0 elsewhere):
		// SGLang's decode_prefix_len.
		r.sentKV = r.de.CachedTokens
		if !r.syncWait {
			s.submitPrefill(r)
		}
	case engine.EvChunkDone:
		s.sendKV(r, ev.Tokens)
	case engine.EvPrefillDone:
		if !r.de.KeepSession {
			s.doneReading(r) // a seed's decoder reads the ids again when it joins
		}
		r.pDone = true
		s.sendKV(r, ev.Tokens)
	case engine.EvFirstToken:
		if r.p < 0 {
			r.x.PrefillDone() // prefilled on its own worker: its prefill load is over
		}
		s.doneReading(r)
		r.firstAt = ev.Time
	case engine.EvFinished:
		s.syncAfterAppend(r)
		r.x.Finished(true)
		s.record(r, metrics.StatusCompleted, "")
		s.end(r)
	}
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
	if s.peerDead(r) {
		s.failLegs(r, fmt.Sprintf("peer-dead: %s → %s: the peer was marked dead after a transfer timeout (--peer-failure hair-trigger)",
			s.workers[r.p].Name(), s.workers[r.d].Name()))
		return
	}
	r.sentKV = tokens
	s.kvSentTokens += int64(max(n, 0))
	li := r.p - s.prefills[0]
	r.xferLive++
	t := &kvXfer{r: r} // one allocation for the transfer and its tag
	t.Transfer = engine.Transfer{Bytes: int64(max(n, 0)) * s.kvBytes, Tag: t}
	s.links[li].Start(s.now, &t.Transfer)
	s.reschedLink(li)
	s.watchTransfer(r, &t.Transfer)
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
			s.workers[r.p].Release(s.now, r.pe)
			s.collect(r.p)
		}
		return
	}
	r.x.TransferLanded()
	r.x.PrefillDone()
	if err := s.workers[r.p].Release(s.now, r.pe); err != nil {
		s.failLegs(r, "engine-error: prefill release: "+err.Error())
		return
	}
	if r.pe.KeepSession && s.cfg.KVC.PrefillBackup == "capacity-backup" {
		// What P keeps now, for the reseed labels (-after-prefill-backed-eviction).
		s.disp.PrefillBackups(r.p-s.prefills[0], s.workers[r.p].BackupKeys())
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
			s.workers[r.p].Abort(s.now, r.pe)
			s.collect(r.p)
		}
	}
	if r.d >= 0 {
		s.workers[r.d].Abort(s.now, &r.de)
		s.collect(r.d)
	}
	if r.x != nil {
		r.x.Finished(false)
	}
}

// record writes r's metrics line and folds it into the summary.
func (s *Sim) record(r *req, st metrics.Status, cause string) {
	m := &s.rec
	*m = metrics.Record{
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
	if !s.quiet {
		m.RequestID = strconv.FormatInt(r.t.ChatID, 10) // read by the sink alone
	}
	if r.x != nil {
		m.ExecutionMode, m.Path = kvc.PathMode(r.x.Mode(), s.dPath(r.x.Decoder())), r.x.Path()
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
	m.TTFTS = r.firstAt - r.sent // r.sent is set once, before any token
	if r.t.OutputLength > 1 {
		m.TPOTS = (m.LatencyS - m.TTFTS) / float64(r.t.OutputLength-1)
	}
	b := &m.Breakdown
	b.AdmissionS = r.startAt - r.sent // admission RPCs and backpressure pauses
	if r.p >= 0 {
		m.CachedTokens = r.pe.CachedTokens
		b.PreallocWaitS = r.de.AdmittedAt - r.startAt
		b.QueueS = (r.pe.AdmittedAt - r.pe.SubmittedAt) + (r.firstAt - r.xferEnd)
		b.PrefillS = r.pe.PrefillEndAt - r.pe.AdmittedAt
		b.TransferS = r.xferEnd - r.pe.PrefillEndAt
		b.DecodeS = s.now - r.firstAt
	} else {
		m.CachedTokens = r.de.CachedTokens
		b.QueueS = r.de.AdmittedAt - r.startAt
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
