package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// admitWire is a decoder's admission reply as the gateway reads it
// (docs/worker-protocol.md, "Admission"). The optional fields of later
// revisions that a worker may get wrong without the rest of the reply
// being wrong are kept raw and read one by one (reply), so that a bad one
// costs only itself.
type admitWire struct {
	CanAdmit bool    `json:"can_admit"`
	Mode     string  `json:"mode"`
	Reason   string  `json:"reason"`
	PauseMs  float64 `json:"recommended_pause_ms"`
	Cached   int     `json:"cached_tokens"`
	Tier     string  `json:"tier"`
	Host     int     `json:"host_tokens"`
	Storage  int     `json:"storage_tokens"`
	KVSeq    int64   `json:"kv_events_seq"`
	// StorageQueue is storage_queue_ms (revision 1.4): how long the shared
	// storage pool's aggregate link is booked ahead of this answer.
	StorageQueue json.RawMessage `json:"storage_queue_ms"`
}

// fieldStorageQueue names the field in errors, logs and metrics.
const fieldStorageQueue = "storage_queue_ms"

// reply is the reply the dispatcher sees, and the error of an optional
// field read as absent (nil when none was bad).
func (o *admitWire) reply() (kvc.AdmitReply, error) {
	rep := kvc.AdmitReply{CanAdmit: o.CanAdmit, Direct: o.Mode == "direct_append", Reason: o.Reason, PauseMs: o.PauseMs,
		CachedTokens: o.Cached, Tier: o.Tier, HostTokens: o.Host, StorageTokens: o.Storage}
	q, err := storageQueueS(o.StorageQueue)
	rep.StorageQueueS = q
	return rep, err
}

// storageQueueS reads storage_queue_ms into seconds. Absent or null (what
// a worker serialising NaN as null sends) is 0, nothing booked, as the
// contract's "left out" is. A value that is not a finite number ≥ 0 — a
// negative one, a string (also "NaN"), a bool, an object, a number past
// float64 — is an error, and 0: the tier cost then prices the prefetch by
// the decoder's own link, as from a worker of an earlier revision, rather
// than trust a queue it cannot read.
func storageQueueS(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	// raw is valid JSON (the reply parsed), so ParseFloat reads exactly
	// its numbers: a string, bool, array or object fails, and NaN or Inf,
	// which ParseFloat would take, cannot be JSON.
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(ms >= 0) || math.IsInf(ms, 0) {
		return 0, fmt.Errorf("%s: %.40s, want a finite number of milliseconds ≥ 0", fieldStorageQueue, raw)
	}
	return ms / 1000, nil
}

// badFields counts and logs the optional reply fields a decoder got
// wrong, by decoder and field (pdhybrid_admission_bad_fields_total): the
// first of each pair and every 100th after are logged, as a garbled KV
// event batch is, so a worker that always sends one does not flood the
// log.
type badFields struct {
	total *prometheus.CounterVec // worker, field
	mu    sync.Mutex
	seen  map[[2]string]int64
}

func newBadFields(reg *prometheus.Registry) *badFields {
	b := &badFields{seen: map[[2]string]int64{}, total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pdhybrid_admission_bad_fields_total",
		Help: "Optional fields of decoders' admission replies that were not of the contract's type or range and were read as absent (storage_queue_ms: not a finite number ≥ 0), by decoder and field."},
		[]string{"worker", "field"})}
	reg.MustRegister(b.total)
	return b
}

// note counts one bad field of worker's reply and logs it when due.
func (s *Server) noteBadField(worker, field string, err error) {
	b := s.badFields
	b.total.WithLabelValues(worker, field).Inc()
	b.mu.Lock()
	n := b.seen[[2]string{worker, field}]
	b.seen[[2]string{worker, field}] = n + 1
	b.mu.Unlock()
	if n%100 == 0 {
		s.log.Warn("admission reply field read as absent", "worker", worker, "field", field, "error", err.Error(), "so_far", n+1)
	}
}
