package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Eviction reports from the decoders (Config.KVEvents; serve --kv-events).
// In the simulator a decoder's evictions and demotions reach the router's
// residency belief as engine events; without reports the live gateway
// learns them only from the next admission reply, so between the two it
// routes a session to a decoder that no longer holds it, or believes
// HBM where the decoder kept only a host or storage copy. With reports
// the gateway reads each decoder's KV event stream (docs/worker-protocol.md,
// "KV events": GET /kvc/kv_events, SSE, one JSON batch per event with a
// sequence number) and applies each eviction through the dispatcher's
// entry points the simulator calls (SessionEvicted, SessionDemoted,
// SessionStored; ForgetDecoder for a flush). A stream that is lost,
// refused or garbled costs only the belief's freshness: what a batch
// could not say is learnt from admission replies, as without reports, and
// every loss is logged and counted (pdhybrid_kv_events_dropped_total,
// pdhybrid_kv_events_stream_errors_total).

const (
	kvEventsPath = "/kvc/kv_events"
	// kvEventMaxLine bounds one SSE line (a batch): a worker that sends a
	// longer one is cut off and read again from its next batch.
	kvEventMaxLine = 1 << 20
	// kvEventBackoff and kvEventMaxBackoff pace reconnections.
	kvEventBackoff    = 250 * time.Millisecond
	kvEventMaxBackoff = 10 * time.Second
)

// kvEventBatch and kvEvent are the stream's batches as the gateway reads
// them (the worker contract, not the emulator's types: either side may be
// another implementation).
type kvEventBatch struct {
	Seq    int64     `json:"seq"`
	TS     float64   `json:"ts"`
	Events []kvEvent `json:"events"`
}

type kvEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Tier      string `json:"tier"`
	Tokens    int    `json:"tokens"`
}

// The event types the gateway applies; any other is skipped (a later
// revision may add types) and counted as received under type "other".
const (
	kvEvSessionEvicted = "SessionEvicted"
	kvEvAllCleared     = "AllBlocksCleared"
)

// parseKVEventBatch reads one batch, naming what is wrong: not a JSON
// object, a sequence number below 1, a time that is not a finite Unix
// time ≥ 0, no events array, an event without a type, a SessionEvicted
// without a session or with a tier other than host, storage or none.
func parseKVEventBatch(b []byte) (kvEventBatch, error) {
	var raw struct {
		Seq    *int64           `json:"seq"`
		TS     *float64         `json:"ts"`
		Events *json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return kvEventBatch{}, fmt.Errorf("kv event batch: %v", err)
	}
	if raw.Seq == nil || *raw.Seq < 1 {
		return kvEventBatch{}, errors.New("kv event batch: seq missing or below 1")
	}
	out := kvEventBatch{Seq: *raw.Seq}
	if raw.TS == nil || !(*raw.TS >= 0) || math.IsInf(*raw.TS, 0) {
		return out, fmt.Errorf("kv event batch seq %d: ts missing or not a Unix time ≥ 0", out.Seq)
	}
	out.TS = *raw.TS
	if raw.Events == nil {
		return out, fmt.Errorf("kv event batch seq %d: no events array", out.Seq)
	}
	if err := json.Unmarshal(*raw.Events, &out.Events); err != nil {
		return out, fmt.Errorf("kv event batch seq %d: events: %v", out.Seq, err)
	}
	for i, e := range out.Events {
		switch {
		case e.Type == "":
			return out, fmt.Errorf("kv event batch seq %d: event %d: no type", out.Seq, i)
		case e.Type != kvEvSessionEvicted:
		case e.SessionID == "":
			return out, fmt.Errorf("kv event batch seq %d: event %d: SessionEvicted without session_id", out.Seq, i)
		case e.Tier != "host" && e.Tier != "storage" && e.Tier != "none":
			return out, fmt.Errorf("kv event batch seq %d: event %d: tier %q, want host, storage or none", out.Seq, i, e.Tier)
		}
	}
	return out, nil
}

// kvEventMetrics are the reports' counters, by decoder.
type kvEventMetrics struct {
	received  *prometheus.CounterVec   // worker, type
	dropped   *prometheus.CounterVec   // worker, reason
	errs      *prometheus.CounterVec   // worker, reason
	lag       *prometheus.HistogramVec // worker
	connected *prometheus.GaugeVec     // worker
}

// Reasons a report is lost (dropped) or a stream fails (errs).
const (
	kvDropGap     = "gap"     // batches the sequence skipped: the worker's ring no longer held them
	kvDropGarbled = "garbled" // a batch that did not parse
	// kvDropSuperseded is an event, not a batch: a SessionEvicted in a
	// batch at or below the seq the session's later admission reply named.
	kvDropSuperseded = "superseded"
	kvErrConnect     = "connect" // no stream: the worker did not answer
	kvErrStatus      = "status"  // an answer other than 200 (404: the worker does not offer the stream)
	kvErrRead        = "read"    // the stream broke or a line passed kvEventMaxLine
	kvErrReset       = "reset"   // the sequence started again: the worker restarted
)

func newKVEventMetrics(reg *prometheus.Registry) *kvEventMetrics {
	m := &kvEventMetrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdhybrid_kv_events_received_total",
			Help: "Eviction reports read from the decoders' KV event streams (serve --kv-events) and applied to the residency belief, by decoder and event type (SessionEvicted, AllBlocksCleared, other: skipped)."}, []string{"worker", "type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdhybrid_kv_events_dropped_total",
			Help: "Eviction report batches lost, by decoder and reason: gap (sequence numbers skipped, the worker no longer kept them), garbled (a batch that did not parse). What they said is learnt from admission replies, as without reports. Reason superseded counts events, not batches: a session's eviction older than that session's later admission reply (its kv_events_seq), not applied."}, []string{"worker", "reason"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdhybrid_kv_events_stream_errors_total",
			Help: "KV event streams that failed, by decoder and reason: connect, status (not 200; 404: not offered), read (broken, or a line over 1 MiB), reset (the worker's sequence started again). Each is retried with backoff."}, []string{"worker", "reason"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pdhybrid_kv_events_lag_seconds",
			Help:    "Time from a batch's publication (its ts, the worker's wall clock) to the gateway applying it, by decoder; across hosts it includes their clocks' offset.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}}, []string{"worker"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pdhybrid_kv_events_connected",
			Help: "1 while the gateway reads the decoder's KV event stream, else 0."}, []string{"worker"}),
	}
	reg.MustRegister(m.received, m.dropped, m.errs, m.lag, m.connected)
	return m
}

// startKVEvents reads every decoder's stream until Close (with
// Config.KVEvents on a mechanism with decoders).
func (s *Server) startKVEvents() {
	if !s.cfg.KVEvents || s.cfg.Dispatch.Mechanism == kvc.MechColo {
		return
	}
	s.kvm = newKVEventMetrics(s.met.reg)
	for i, u := range s.cfg.Decode {
		s.streamKVEvents(i, u)
	}
}

// streamKVEvents starts reading decoder d's stream at base, with
// Config.KVEvents (a decoder the pool gains at run time too, through the
// admin API or discovery); a no-op without.
func (s *Server) streamKVEvents(d int, base string) {
	if s.kvm == nil {
		return
	}
	s.kvm.connected.WithLabelValues(base)
	for _, r := range []string{kvDropGap, kvDropGarbled, kvDropSuperseded} {
		s.kvm.dropped.WithLabelValues(base, r)
	}
	s.polling.Add(1)
	go func() {
		defer s.polling.Done()
		s.kvEventsLoop(d, base)
	}()
}

// kvEventsLoop keeps decoder d's stream open, reconnecting with backoff
// and asking for what it missed (after the last sequence number read).
func (s *Server) kvEventsLoop(d int, base string) {
	ctx, cancel := s.untilStop()
	defer cancel()
	r := &kvEventReader{s: s, d: d, worker: base}
	wait := kvEventBackoff
	last := "" // the last error logged: a decoder that keeps refusing is logged once
	for {
		read, reason, err := r.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		s.kvm.errs.WithLabelValues(base, reason).Inc()
		if msg := err.Error(); read || msg != last {
			s.log.Warn("kv events", "worker", base, "error", msg, "retry_in", wait.String())
			last = msg
		}
		if read {
			wait = kvEventBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if !read {
			wait = min(2*wait, kvEventMaxBackoff)
		}
	}
}

// kvEventReader is one decoder's stream state.
type kvEventReader struct {
	s      *Server
	d      int
	worker string
	last   int64 // the last sequence number read; 0: none yet
	bad    int64 // garbled batches so far (the log names the first and every 100th)
}

// stream reads one connection until it ends: whether it read a batch, and
// why it ended.
func (r *kvEventReader) stream(ctx context.Context) (read bool, reason string, err error) {
	url := r.worker + kvEventsPath
	if r.last > 0 {
		url += "?after=" + strconv.FormatInt(r.last, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, kvErrConnect, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := r.s.cfg.Client.Do(req)
	if err != nil {
		return false, kvErrConnect, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, kvErrStatus, fmt.Errorf("%s: HTTP %d (404: the decoder does not offer KV events; start it with --kv-events)", kvEventsPath, resp.StatusCode)
	}
	m := r.s.kvm.connected.WithLabelValues(r.worker)
	m.Set(1)
	defer m.Set(0)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), kvEventMaxLine)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil {
				r.batch(data)
				read, data = true, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(append([]byte{}, data...), v...)
		}
		// id:, event:, retry: and comments carry nothing the batch lacks.
	}
	if err := sc.Err(); err != nil {
		return read, kvErrRead, fmt.Errorf("%s: %w", kvEventsPath, err)
	}
	return read, kvErrRead, fmt.Errorf("%s: the stream ended", kvEventsPath)
}

// batch applies one batch's data: parsed, its sequence checked against
// the last one, its lag observed, its events applied under the lock.
func (r *kvEventReader) batch(data []byte) {
	s, m := r.s, r.s.kvm
	b, err := parseKVEventBatch(data)
	if err != nil {
		m.dropped.WithLabelValues(r.worker, kvDropGarbled).Inc()
		if r.bad%100 == 0 {
			s.log.Warn("kv events", "worker", r.worker, "garbled", err.Error(), "so_far", r.bad+1)
		}
		r.bad++
		return
	}
	reset := false
	switch {
	case r.last > 0 && b.Seq > r.last+1:
		m.dropped.WithLabelValues(r.worker, kvDropGap).Add(float64(b.Seq - r.last - 1))
		s.log.Warn("kv events", "worker", r.worker, "gap_after", r.last, "next", b.Seq)
	case r.last > 0 && b.Seq <= r.last:
		m.errs.WithLabelValues(r.worker, kvErrReset).Inc()
		s.log.Warn("kv events", "worker", r.worker, "reset_after", r.last, "next", b.Seq, "belief", "cleared")
		reset = true
	}
	r.last = b.Seq
	m.lag.WithLabelValues(r.worker).Observe(max(0, float64(time.Now().UnixNano())/1e9-b.TS))
	s.locked(func() {
		if s.decoderRemoved(r.d) {
			return
		}
		if reset {
			// A restarted worker starts with an empty cache: what the
			// belief holds of this decoder is of its earlier start, so it
			// goes as a flush's does; the admission replies since the
			// restart teach it again.
			s.disp.ForgetDecoder(r.d)
			s.kvOrder.forget(r.d)
		}
		defer s.kvOrder.advance(r.d, b.Seq)
		for _, e := range b.Events {
			typ := e.Type
			switch e.Type {
			case kvEvSessionEvicted:
				if s.kvOrder.superseded(r.d, e.SessionID, b.Seq) {
					m.dropped.WithLabelValues(r.worker, kvDropSuperseded).Inc()
					continue
				}
				switch e.Tier {
				case "host":
					s.disp.SessionDemoted(r.d, e.SessionID)
				case "storage":
					s.disp.SessionStored(r.d, e.SessionID)
				default:
					s.disp.SessionEvicted(r.d, e.SessionID)
				}
			case kvEvAllCleared:
				s.disp.ForgetDecoder(r.d)
			default:
				typ = "other"
			}
			m.received.WithLabelValues(r.worker, typ).Inc()
		}
	})
}

// decoderRemoved reports whether decoder d left the pool through the
// admin API (held lock): its reports no longer concern the belief.
func (s *Server) decoderRemoved(d int) bool {
	for _, w := range s.workers {
		if w.Role == roleDecode && w.idx == d {
			return w.removed
		}
	}
	return false
}

// kvEventOrder orders a decoder's reports against its admission replies,
// exactly where the worker names its stream position in them: an
// admission reply's kv_events_seq is the last batch the worker had
// published when it answered (revision 1.3), so a report of that session
// in a batch at or below it happened before the answer, which already
// says what the decoder holds of the session — the report must not undo
// it (it would forget a session the decoder was just re-seeded with). A
// report in a later batch happened after and is applied. Held lock.
type kvEventOrder struct {
	read map[int]int64 // per decoder, the last batch applied
	// admitted is, per decoder, the seq a session's last admission reply
	// named, kept only while the stream is behind it: once the stream has
	// applied that batch no older report can come.
	admitted map[int]map[string]int64
}

// kvAdmittedMax bounds one decoder's entries (a stream that is down
// while admissions go on): past it a reply is not kept, and its session's
// late reports are applied, as before revision 1.3.
const kvAdmittedMax = 1 << 16

// kvAdmitted keeps an admission reply's kv_events_seq (0: the worker sent
// none, or had published nothing) with reports on.
func (s *Server) kvAdmitted(d int, session string, seq int64) {
	if s.kvm == nil || session == "" || seq <= 0 {
		return
	}
	s.locked(func() { s.kvOrder.admit(d, session, seq) })
}

func (o *kvEventOrder) admit(d int, session string, seq int64) {
	if seq <= o.read[d] {
		// The stream has applied every batch the answer follows.
		delete(o.admitted[d], session)
		return
	}
	if o.admitted == nil {
		o.admitted = map[int]map[string]int64{}
	}
	m := o.admitted[d]
	if m == nil {
		m = map[string]int64{}
		o.admitted[d] = m
	}
	if _, ok := m[session]; ok || len(m) < kvAdmittedMax {
		m[session] = seq
	}
}

// superseded reports whether a report of session in batch seq is older
// than the session's last admission reply from decoder d.
func (o *kvEventOrder) superseded(d int, session string, seq int64) bool {
	a, ok := o.admitted[d][session]
	return ok && seq <= a
}

// advance notes batch seq applied and drops the entries it passed.
func (o *kvEventOrder) advance(d int, seq int64) {
	if o.read == nil {
		o.read = map[int]int64{}
	}
	o.read[d] = seq
	for sess, a := range o.admitted[d] {
		if a <= seq {
			delete(o.admitted[d], sess)
		}
	}
}

// forget drops decoder d's entries (its worker restarted: its sequence
// started again).
func (o *kvEventOrder) forget(d int) {
	delete(o.admitted, d)
	delete(o.read, d)
}
