package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// encoded is the line json.Encoder writes for r's RecordLine, the bytes
// AppendJSON must reproduce.
func encoded(r *Record) ([]byte, error) {
	var l RecordLine
	l.Set(r)
	var buf bytes.Buffer
	err := json.NewEncoder(&buf).Encode(&l)
	return buf.Bytes(), err
}

func checkAppendJSON(t *testing.T, r *Record) {
	t.Helper()
	want, werr := encoded(r)
	got, gerr := r.AppendJSON([]byte("x"))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%+v: error %v, encoding/json's %v", r, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got[1:], want) {
		t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got[1:], want)
	}
	if string(got[:1]) != "x" {
		t.Fatal("AppendJSON overwrote what b held")
	}
}

var jsonFloats = []float64{0, -0.0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-9, 1e-300, 1e20, 1e21, 123456789.123, -3.2e-8, math.MaxFloat64, math.SmallestNonzeroFloat64, 12.770569078269999}
var jsonStrings = []string{"", "s0", "decode-0", "pd-router-turn1-seed", "a\"b", `back\slash`, "<html>", "a&b", "tab\there", "\x00", "é", "\u2028", "\xff", "\x7f", "admit decode-0: seed (session-not-resident)"}

// TestAppendJSONIsEncodingJSON: random records drawn from awkward floats
// (exponent form, negative zero) and strings (escapes, HTML, control bytes,
// non-ASCII, invalid UTF-8), completed and not, with and without the
// optional fields, encode to encoding/json's bytes.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := func() float64 {
		if rng.IntN(3) == 0 {
			return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		return jsonFloats[rng.IntN(len(jsonFloats))]
	}
	s := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return jsonStrings[rng.IntN(len(jsonStrings))]
	}
	for range 20000 {
		r := &Record{RequestID: s(), SessionID: s(), ChatID: rng.Int64() - rng.Int64(), Turn: rng.IntN(100) - 2,
			TraceTimeS: f(), ArrivalS: f(), GateS: f(), InputLength: rng.IntN(1 << 20), OutputLength: rng.IntN(9000),
			CachedTokens: rng.IntN(1000), UncachedTokens: -rng.IntN(3), TTFTS: f(), LatencyS: f(), TPOTS: f(),
			ExecutionMode: s(), PrefillWorker: s(), DecodeWorker: s(), Status: []Status{StatusCompleted, StatusFailed, StatusTimeout, StatusAborted, "odd<"}[rng.IntN(5)],
			Error: s(), FinishReason: s(),
			Breakdown: Breakdown{PreallocWaitS: f(), QueueS: f(), AdmissionS: f(), PrefillS: f(), TransferS: f(), DecodeS: f()}}
		for range rng.IntN(4) {
			r.Path = append(r.Path, s())
		}
		if rng.IntN(10) == 0 {
			r.Path = []string{}
		}
		checkAppendJSON(t, r)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		checkAppendJSON(t, &Record{Status: StatusCompleted, TTFTS: bad})
		checkAppendJSON(t, &Record{Status: StatusFailed, Breakdown: Breakdown{DecodeS: bad}})
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("r1", "s1", int64(3), 0.25, 1.5e-7, "mode", "decode-0", "completed", "err", "p")
	f.Add("<", "\xff", int64(-1), math.Inf(1), 0.0, "", "", "failed", "a\nb", "")
	f.Fuzz(func(t *testing.T, id, sess string, chat int64, a, b float64, mode, dw, status, errs, path string) {
		r := &Record{RequestID: id, SessionID: sess, ChatID: chat, TraceTimeS: a, TTFTS: b, LatencyS: a * b,
			ExecutionMode: mode, DecodeWorker: dw, Status: Status(status), Error: errs, Path: []string{path},
			Breakdown: Breakdown{QueueS: b - a}}
		checkAppendJSON(t, r)
	})
}

// TestEventAppendJSONIsEncodingJSON: events with and without each optional
// field, awkward strings and times, and a sync's stages encode to
// encoding/json's bytes.
func TestEventAppendJSONIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := func() string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return jsonStrings[rng.IntN(len(jsonStrings))]
	}
	for i := range 20000 {
		e := &Event{TimeS: jsonFloats[rng.IntN(len(jsonFloats))], Kind: s(), Worker: s(), SessionID: s(), RequestID: s(),
			Detail: s(), Tokens: rng.Int64N(1<<40) - 1<<39, State: s()}
		if rng.IntN(3) == 0 {
			e.Tokens = 0
		}
		if i%500 == 0 {
			e.SnapshotSync = &SnapshotSync{}
		}
		if i == 7 {
			e.TimeS = math.NaN()
		}
		var buf bytes.Buffer
		werr := json.NewEncoder(&buf).Encode(e)
		got, gerr := e.AppendJSON(nil)
		if (werr != nil) != (gerr != nil) || (werr == nil && !bytes.Equal(got, buf.Bytes())) {
			t.Fatalf("AppendJSON %q (%v), encoding/json %q (%v)", got, gerr, buf.Bytes(), werr)
		}
	}
}
