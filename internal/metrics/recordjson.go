package metrics

import (
	"encoding/json"
	"math"
	"strconv"
)

// AppendJSON appends r's line of metrics.jsonl, newline included, to b: the
// bytes json.Encoder writes for its RecordLine, field for field (the
// record's own fields in order, then the three latencies, null unless it
// completed, and ended_after_s when it did not). A simulator writes one per
// request, and encoding/json's reflection was a sixth of a million-request
// run's time. A string with a byte JSON would escape, or a number JSON cannot
// hold, takes encoding/json's own path, so the bytes (and the error) are its.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	if !r.plainJSON() {
		var l RecordLine
		l.Set(r)
		out, err := json.Marshal(&l)
		if err != nil {
			return b, err
		}
		return append(append(b, out...), '\n'), nil
	}
	b = appendKey(b, '{', "request_id")
	b = appendStr(b, r.RequestID)
	b = appendKey(b, ',', "session_id")
	b = appendStr(b, r.SessionID)
	b = appendKey(b, ',', "chat_id")
	b = strconv.AppendInt(b, r.ChatID, 10)
	b = appendKey(b, ',', "turn")
	b = strconv.AppendInt(b, int64(r.Turn), 10)
	b = appendKey(b, ',', "trace_time_s")
	b = appendFloat(b, r.TraceTimeS)
	b = appendKey(b, ',', "arrival_s")
	b = appendFloat(b, r.ArrivalS)
	b = appendKey(b, ',', "gate_s")
	b = appendFloat(b, r.GateS)
	b = appendKey(b, ',', "input_length")
	b = strconv.AppendInt(b, int64(r.InputLength), 10)
	b = appendKey(b, ',', "output_length")
	b = strconv.AppendInt(b, int64(r.OutputLength), 10)
	b = appendKey(b, ',', "cached_tokens")
	b = strconv.AppendInt(b, int64(r.CachedTokens), 10)
	b = appendKey(b, ',', "uncached_tokens")
	b = strconv.AppendInt(b, int64(r.UncachedTokens), 10)
	b = appendKey(b, ',', "execution_mode")
	b = appendStr(b, r.ExecutionMode)
	if r.PrefillWorker != "" {
		b = appendKey(b, ',', "prefill_worker")
		b = appendStr(b, r.PrefillWorker)
	}
	if r.DecodeWorker != "" {
		b = appendKey(b, ',', "decode_worker")
		b = appendStr(b, r.DecodeWorker)
	}
	b = appendKey(b, ',', "status")
	b = appendStr(b, string(r.Status))
	if r.Error != "" {
		b = appendKey(b, ',', "error")
		b = appendStr(b, r.Error)
	}
	b = appendKey(b, ',', "finish_reason")
	b = appendStr(b, r.FinishReason)
	k := &r.Breakdown
	b = appendKey(b, ',', "breakdown")
	b = appendKey(b, '{', "prealloc_wait_s")
	b = appendFloat(b, k.PreallocWaitS)
	b = appendKey(b, ',', "queue_s")
	b = appendFloat(b, k.QueueS)
	b = appendKey(b, ',', "admission_s")
	b = appendFloat(b, k.AdmissionS)
	b = appendKey(b, ',', "prefill_s")
	b = appendFloat(b, k.PrefillS)
	b = appendKey(b, ',', "transfer_s")
	b = appendFloat(b, k.TransferS)
	b = appendKey(b, ',', "decode_s")
	b = appendFloat(b, k.DecodeS)
	b = append(b, '}')
	if len(r.Path) > 0 {
		b = appendKey(b, ',', "path")
		for i, p := range r.Path {
			if i == 0 {
				b = append(b, '[')
			} else {
				b = append(b, ',')
			}
			b = appendStr(b, p)
		}
		b = append(b, ']')
	}
	if r.Status == StatusCompleted {
		b = appendKey(b, ',', "ttft_s")
		b = appendFloat(b, r.TTFTS)
		b = appendKey(b, ',', "latency_s")
		b = appendFloat(b, r.LatencyS)
		b = appendKey(b, ',', "tpot_s")
		b = appendFloat(b, r.TPOTS)
	} else {
		b = append(b, `,"ttft_s":null,"latency_s":null,"tpot_s":null`...)
		b = appendKey(b, ',', "ended_after_s")
		b = appendFloat(b, r.LatencyS)
	}
	return append(b, '}', '\n'), nil
}

// plainJSON says every string of r is printable ASCII that JSON writes as it
// is (no quote, backslash, or the <, >, & that json.Encoder escapes) and
// every number finite, so AppendJSON's own encoding is encoding/json's.
func (r *Record) plainJSON() bool {
	if !plainStr(r.RequestID) || !plainStr(r.SessionID) || !plainStr(r.ExecutionMode) ||
		!plainStr(r.PrefillWorker) || !plainStr(r.DecodeWorker) || !plainStr(string(r.Status)) ||
		!plainStr(r.Error) || !plainStr(r.FinishReason) {
		return false
	}
	for _, p := range r.Path {
		if !plainStr(p) {
			return false
		}
	}
	k := &r.Breakdown
	for _, f := range [...]float64{r.TraceTimeS, r.ArrivalS, r.GateS, r.TTFTS, r.LatencyS, r.TPOTS,
		k.PreallocWaitS, k.QueueS, k.AdmissionS, k.PrefillS, k.TransferS, k.DecodeS} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

func plainStr(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func appendKey(b []byte, sep byte, k string) []byte {
	b = append(b, sep, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendStr(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat writes f as encoding/json does: the shortest decimal that
// reads back as f, in exponent form below 1e-6 and from 1e21, with a
// one-digit negative exponent written without its leading zero.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// AppendJSON appends e's line of an events file, newline included: the
// bytes json.Encoder writes for it (a KVC run logs several events a
// request). An event with a D→P sync's stages, a string JSON would escape,
// or a number JSON cannot hold takes encoding/json's own path.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	if e.SnapshotSync != nil || math.IsNaN(e.TimeS) || math.IsInf(e.TimeS, 0) ||
		!plainStr(e.Kind) || !plainStr(e.Worker) || !plainStr(e.SessionID) ||
		!plainStr(e.RequestID) || !plainStr(e.Detail) || !plainStr(e.State) {
		out, err := json.Marshal(e)
		if err != nil {
			return b, err
		}
		return append(append(b, out...), '\n'), nil
	}
	b = appendKey(b, '{', "t")
	b = appendFloat(b, e.TimeS)
	b = appendKey(b, ',', "kind")
	b = appendStr(b, e.Kind)
	for _, f := range [...]struct{ k, v string }{{"worker", e.Worker}, {"session_id", e.SessionID}, {"request_id", e.RequestID}, {"detail", e.Detail}} {
		if f.v != "" {
			b = appendKey(b, ',', f.k)
			b = appendStr(b, f.v)
		}
	}
	if e.Tokens != 0 {
		b = appendKey(b, ',', "tokens")
		b = strconv.AppendInt(b, e.Tokens, 10)
	}
	if e.State != "" {
		b = appendKey(b, ',', "state")
		b = appendStr(b, e.State)
	}
	return append(b, '}', '\n'), nil
}
