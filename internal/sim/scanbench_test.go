package sim

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// BenchmarkScanSessionEnds is the session-end scan of a trace file
// (20,000 one-turn short requests, 8 hash ids each, from memory): "file"
// hands it the trace.Reader, as the CLI does; "decoded" hides the reader's
// ids-only read, so every line is decoded whole.
//
//	go test ./internal/sim -run '^$' -bench ScanSessionEnds -cpu 1 -count 6
func BenchmarkScanSessionEnds(b *testing.B) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{BlockSize: 64, Source: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20000 {
		r := trace.Request{SessionID: "g0-s" + strconv.Itoa(i), ChatID: int64(i), ParentChatID: -1, Turn: 1,
			Timestamp: float64(i) / 400, InputLength: 500, OutputLength: 128, Type: "text"}
		for j := range 8 {
			r.HashIDs = append(r.HashIDs, uint64(8*i+j+1))
		}
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
	w.Flush()
	data := buf.Bytes()
	for _, c := range []struct {
		name string
		wrap func(*trace.Reader) Source
	}{
		{"file", func(r *trace.Reader) Source { return r }},
		{"decoded", func(r *trace.Reader) Source { return struct{ Source }{r} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				rd, err := trace.NewReader(bytes.NewReader(data), "bench", 0)
				if err != nil {
					b.Fatal(err)
				}
				if l, err := ScanSessionEnds(c.wrap(rd)); err != nil || l == nil {
					b.Fatal(l, err)
				}
			}
		})
	}
}
