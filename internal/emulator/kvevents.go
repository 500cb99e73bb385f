package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// KV events: a decoder's evictions as a stream the gateway reads
// (docs/worker-protocol.md, "KV events"). In the simulator a decoder's
// evictions and demotions reach the router's residency belief as engine
// events; a live gateway learns them from this stream, as Dynamo's and
// llm-d's routers learn a real SGLang's from its KV event publisher
// (--kv-events-config: BlockStored / BlockRemoved / AllBlocksCleared batches,
// msgpack over a ZMQ PUB socket, with a sequence number per batch and a
// replay socket for what a subscriber missed). Ours is the same batches
// and sequence numbers as JSON over SSE (GET /kvc/kv_events?after=SEQ),
// at session grain, because the router's belief is per session: a
// SessionEvicted names the session and the tier below HBM that still
// holds it. The worker keeps the last kvEventRing batches, so a consumer
// that reconnects gets what it missed; older ones are gone and the
// consumer sees the gap in the sequence numbers.

// FeatureKVEvents is the KV event stream, as kvc_protocol.features names it.
const FeatureKVEvents = "kv_events"

// KV event types (the wire's "type").
const (
	KVEventSessionEvicted   = "SessionEvicted"
	KVEventAllBlocksCleared = "AllBlocksCleared"
)

// kvEventRing is how many batches a worker keeps for consumers that
// reconnect (SGLang's publisher keeps buffer_steps, 10,000, for replay).
const kvEventRing = 4096

// KVEvent is one event of a batch.
type KVEvent struct {
	Type string `json:"type"`
	// SessionID and Tier (SessionEvicted): the session HBM dropped and
	// where its KV still is: host (the host tier kept it), storage (only
	// the storage pool below host holds it) or none.
	SessionID string `json:"session_id,omitempty"`
	Tier      string `json:"tier,omitempty"`
	// Tokens is the KV the eviction freed in HBM.
	Tokens int `json:"tokens,omitempty"`
}

// KVEventBatch is one published batch: its sequence number (1, 2, … per
// worker start), the wall time it was published in Unix seconds (the
// consumer's lag), and its events.
type KVEventBatch struct {
	Seq    int64     `json:"seq"`
	TS     float64   `json:"ts"`
	Events []KVEvent `json:"events"`
}

// kvEventLog holds the recent batches and wakes the streams when one is
// added. Publishing never blocks the driver.
type kvEventLog struct {
	mu     sync.Mutex
	ring   [][]byte // encoded batches, seq first−… in order
	first  int64    // seq of ring[0]
	next   int64    // the next batch's seq
	wake   chan struct{}
	closed bool
}

func newKVEventLog() *kvEventLog {
	return &kvEventLog{first: 1, next: 1, wake: make(chan struct{})}
}

// publish appends a batch of events (driver goroutine); ts is the wall
// time in Unix seconds.
func (l *kvEventLog) publish(ts float64, evs ...KVEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, _ := json.Marshal(KVEventBatch{Seq: l.next, TS: ts, Events: evs})
	l.next++
	l.ring = append(l.ring, b)
	if len(l.ring) > kvEventRing {
		l.ring = l.ring[1:]
		l.first++
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// from is where a stream that asked for the batches after seq after
// starts: after itself, or — a new consumer (−1), or one that read a
// stream of an earlier start of this worker (after ≥ next) — the last
// batch published, so it reads from the next one on. The handler resolves
// it before the stream opens: a batch published between the opening and
// the first read is the consumer's, not skipped.
func (l *kvEventLog) from(after int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after < 0 || after >= l.next {
		return l.next - 1
	}
	return after
}

// since is the batches after seq after (all that are kept, when after
// is older than the ring) and a channel closed when another is published;
// after −1 (a new consumer) is none, from the next one on. closed reports
// a worker shutting down.
func (l *kvEventLog) since(after int64) (out [][]byte, next int64, wake <-chan struct{}, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after < 0 || after >= l.next {
		// A new consumer, or one that read a stream of an earlier start of
		// this worker: from the next batch on (its seq tells it so).
		after = l.next - 1
	}
	if i := after + 1 - l.first; i < int64(len(l.ring)) {
		out = l.ring[max(i, 0):]
	}
	return out, l.next - 1, l.wake, l.closed
}

// lastSeq is the last batch's seq, 0 when none was published or the
// stream is off (nil): what an admission reply names as kv_events_seq.
func (l *kvEventLog) lastSeq() int64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// close ends every stream (the worker shuts down).
func (l *kvEventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
}

// kvEventOf is the stream's event for an engine eviction.
func kvEventOf(ev engine.Event) KVEvent {
	tier := "none"
	switch {
	case ev.Demoted:
		tier = "host"
	case ev.Stored:
		tier = "storage"
	}
	return KVEvent{Type: KVEventSessionEvicted, SessionID: ev.Session, Tier: tier, Tokens: ev.Tokens}
}

// publishEviction is the event hook's part for the stream (driver
// goroutine).
func (s *Server) publishEviction(ev engine.Event) {
	if s.kvEvents != nil && ev.Session != "" {
		s.kvEvents.publish(s.wallSeconds(), kvEventOf(ev))
	}
}

// wallSeconds is the injected clock's time in Unix seconds.
func (s *Server) wallSeconds() float64 {
	return float64(s.cfg.Clock.Now().UnixNano()) / 1e9
}

// handleKVEvents is GET /kvc/kv_events[?after=SEQ]: an SSE stream, one
// `id: SEQ` and `data: {batch}` event per batch, from the batch after SEQ
// (as many as the worker still keeps) or, without it, from the next one
// published; it ends when the worker shuts down or the client leaves.
func (s *Server) handleKVEvents(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	after := int64(-1)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("after=%q: want the sequence number (an integer ≥ 0) of the last batch read", v))
			return
		}
		after = n
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeHTTPError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	after = s.kvEvents.from(after)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": pdhybrid kv events\n\n")
	fl.Flush()
	for {
		batches, last, wake, closed := s.kvEvents.since(after)
		for i, b := range batches {
			seq := last - int64(len(batches)-1-i)
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, b); err != nil {
				return
			}
		}
		if len(batches) > 0 {
			fl.Flush()
		}
		after = last
		if closed {
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}
