package trace_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
)

// BenchmarkRead measures reading canonical JSONL (decode every field, hash
// ids included) from memory. Run on one core:
//
//	go test ./internal/trace -run '^$' -bench Read -cpu 1
func BenchmarkRead(b *testing.B) {
	reqs := tracetest.Sessions(1, 40, 30, 64)
	var buf bytes.Buffer
	w, _ := trace.NewWriter(&buf, trace.Header{BlockSize: 64, Source: "bench"})
	for i := range reqs {
		w.Write(&reqs[i])
	}
	w.Flush()
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd, err := trace.NewReader(bytes.NewReader(data), "bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		var req trace.Request
		n := 0
		for {
			err := rd.Next(&req)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != len(reqs) {
			b.Fatalf("read %d of %d", n, len(reqs))
		}
	}
}
