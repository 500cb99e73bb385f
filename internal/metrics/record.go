// Package metrics defines what a run records: one Record per request
// (metrics.jsonl), a Summary per run (summary.json) using both the seed's
// field names and vLLM `bench serve` names, and the structural time series of
// worker occupancy. Simulator, gateway and replay all write these shapes, so
// reports read every run the same way.
package metrics

import "encoding/json"

// Status says how a request ended. Every request ends in exactly one status.
type Status string

const (
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"  // a worker or the control plane refused or broke it; Error says why
	StatusTimeout   Status = "timeout" // the per-request timeout fired before it finished
	StatusAborted   Status = "aborted" // the run ended (or the client gave up) before it finished
)

// Breakdown splits a request's end-to-end latency into where the time went.
// The parts add up to the e2e latency of a completed request.
type Breakdown struct {
	// PreallocWaitS is PD's wait for the decode worker to pre-allocate the
	// request's KV: SGLang's prefill worker holds a request in its bootstrap
	// queue until then, so prefill cannot start earlier.
	PreallocWaitS float64 `json:"prealloc_wait_s"`
	QueueS        float64 `json:"queue_s"`     // other waiting: scheduler queues, KV waits, joining D's batch
	AdmissionS    float64 `json:"admission_s"` // admission RPCs and routing
	PrefillS      float64 `json:"prefill_s"`   // prefill compute (on P, or the append on D)
	TransferS     float64 `json:"transfer_s"`  // P→D KV transfer
	DecodeS       float64 `json:"decode_s"`    // first token onwards on the decode worker
}

// Record is one line of metrics.jsonl.
type Record struct {
	RequestID      string  `json:"request_id"`
	SessionID      string  `json:"session_id"`
	ChatID         int64   `json:"chat_id"`
	Turn           int     `json:"turn"`
	TraceTimeS     float64 `json:"trace_time_s"` // the request's timestamp in the trace
	ArrivalS       float64 `json:"arrival_s"`    // when the client sent it (run clock); latencies count from here
	GateS          float64 `json:"gate_s"`       // time held by the client's concurrency limit before sending
	InputLength    int     `json:"input_length"`
	OutputLength   int     `json:"output_length"` // tokens generated (≤ requested when cut short)
	CachedTokens   int     `json:"cached_tokens"` // prompt tokens served from a prefix cache
	UncachedTokens int     `json:"uncached_tokens"`
	// Latencies of a completed request. A request that did not complete has
	// none: its line carries null for ttft_s, latency_s and tpot_s, and the
	// time from sending to its end as ended_after_s, which LatencyS holds in
	// memory (see MarshalJSON).
	TTFTS         float64   `json:"ttft_s"`
	LatencyS      float64   `json:"latency_s"` // end-to-end
	TPOTS         float64   `json:"tpot_s"`    // (latency − ttft)/(output − 1); 0 when output ≤ 1
	ExecutionMode string    `json:"execution_mode"`
	PrefillWorker string    `json:"prefill_worker,omitempty"`
	DecodeWorker  string    `json:"decode_worker,omitempty"`
	Status        Status    `json:"status"`
	Error         string    `json:"error,omitempty"` // cause, for every status but completed
	FinishReason  string    `json:"finish_reason"`   // stop | length | abort
	Breakdown     Breakdown `json:"breakdown"`
	// Path is the chain of control-plane decisions that led to the
	// execution mode (admission replies, rejects, fallbacks), in order.
	Path []string `json:"path,omitempty"`
}

// recordJSON is Record without its methods.
type recordJSON Record

// RecordLine is a Record as a line of metrics.jsonl: a request that did not
// complete has null latencies (a tool that averages ttft_s must not take a
// failure for a 0 s TTFT) and its time to failure as ended_after_s. Writers
// of many records encode a reused RecordLine (Set) rather than the Record,
// which saves the MarshalJSON round trip.
type RecordLine struct {
	recordJSON
	TTFTS       *float64 `json:"ttft_s"`
	LatencyS    *float64 `json:"latency_s"`
	TPOTS       *float64 `json:"tpot_s"`
	EndedAfterS *float64 `json:"ended_after_s,omitempty"`
}

// Set makes l the line of r.
func (l *RecordLine) Set(r *Record) {
	l.recordJSON = recordJSON(*r)
	if r.Status == StatusCompleted {
		l.TTFTS, l.LatencyS, l.TPOTS, l.EndedAfterS = &l.recordJSON.TTFTS, &l.recordJSON.LatencyS, &l.recordJSON.TPOTS, nil
		return
	}
	l.TTFTS, l.LatencyS, l.TPOTS, l.EndedAfterS = nil, nil, nil, &l.recordJSON.LatencyS
}

// MarshalJSON writes r as its RecordLine.
func (r Record) MarshalJSON() ([]byte, error) {
	var l RecordLine
	l.Set(&r)
	return json.Marshal(&l)
}

// UnmarshalJSON reads both forms of a line: with null latencies and
// ended_after_s, and as written before (latency_s then holds the time to
// failure of a request that did not complete).
func (r *Record) UnmarshalJSON(b []byte) error {
	x := struct {
		*recordJSON
		EndedAfterS *float64 `json:"ended_after_s"`
	}{recordJSON: (*recordJSON)(r)}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	if x.EndedAfterS != nil && r.Status != StatusCompleted {
		r.LatencyS = *x.EndedAfterS
	}
	return nil
}

// WorkerSample is one line of structural/workers.jsonl: a worker's pool and
// scheduler state at one instant.
type WorkerSample struct {
	TimeS        float64 `json:"t"`
	Worker       string  `json:"worker"`
	Role         string  `json:"role"`           // prefill | decode | colocated
	KVUsedTokens int64   `json:"kv_used_tokens"` // held now, tokens generated inside a running decode batch included
	// KVReservedTokens are output slots promised to admitted requests and
	// not yet generated: used + reserved never exceeds the capacity.
	KVReservedTokens int64 `json:"kv_reserved_tokens"`
	KVCachedTokens   int64 `json:"kv_cached_tokens"` // held only by the prefix cache (evictable)
	KVCapacityTokens int64 `json:"kv_capacity_tokens"`
	Running          int   `json:"running"`
	Queued           int   `json:"queued"`
}

// Event is one line of structural/events.jsonl: a control-plane or engine
// decision worth reading later (admission, binding, backpressure, eviction).
type Event struct {
	TimeS     float64 `json:"t"`
	Kind      string  `json:"kind"`
	Worker    string  `json:"worker,omitempty"`
	SessionID string  `json:"session_id,omitempty"`
	RequestID string  `json:"request_id,omitempty"`
	Detail    string  `json:"detail,omitempty"`
	Tokens    int64   `json:"tokens,omitempty"`
	// State is an eviction's session state: idle (no request of the
	// session on that worker) or hot (one admitted or queued there, which
	// only --trim any evicts).
	State string `json:"state,omitempty"`
	// *SnapshotSync: a d-to-p-sync event's stages, flattened into the
	// line (nil, and absent, on every other kind).
	*SnapshotSync
}

// SnapshotSync is what a d-to-p-sync event (one D→P snapshot) records
// beyond Event's fields: its outcome, the stage it happened at, and each
// stage it reached, so a log reader can tell where a snapshot's time went
// and where it stopped without parsing Detail. A stage it did not reach is
// absent.
type SnapshotSync struct {
	Outcome string `json:"event"`            // ok | skipped | failed
	Stage   string `json:"stage"`            // entry | prepare | dump | finalize: where the outcome happened
	Reason  string `json:"reason,omitempty"` // a skip's or failure's, as counted in Summary.DToPSync
	To      string `json:"to"`               // the prefill worker
	// Prepare is prepare_receive on P, Dump the KV's crossing of the P↔D
	// link (it starts as prepare ends), Finalize finalize_ingest on P.
	Prepare  *SyncStage `json:"prepare,omitempty"`
	Dump     *SyncStage `json:"dump,omitempty"`
	Finalize *SyncStage `json:"finalize,omitempty"`
	// Bytes is the snapshot's KV (what prepare_receive reserves in P's
	// buffer); BytesPushed what crossed the link (0 unless the dump landed).
	Bytes             int64 `json:"bytes"`
	BytesPushed       int64 `json:"bytes_pushed"`
	KVCommittedLen    int64 `json:"kv_committed_len"`    // the snapshot's tokens
	InsertedPrefixLen int64 `json:"inserted_prefix_len"` // tokens P's cache lacked and got (ok only)
}

// SyncStage is one stage of a D→P snapshot: its start and end in run
// seconds, and its length in milliseconds.
type SyncStage struct {
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	MS     float64 `json:"ms"`
}

// NewSyncStage is the stage from start to end (seconds).
func NewSyncStage(start, end float64) *SyncStage {
	return &SyncStage{StartS: start, EndS: end, MS: 1000 * (end - start)}
}
