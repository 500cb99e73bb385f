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

// BenchmarkCheck measures the checker over 12,000 requests in 4,000
// sessions, chat ids 0, 1, 2, … as converters write them (Mooncake's
// shape). Run on one core:
//
//	go test ./internal/trace -run '^$' -bench Check -cpu 1
func BenchmarkCheck(b *testing.B) {
	reqs := tracetest.Sessions(1, 4000, 3, 64)
	b.ReportAllocs()
	for b.Loop() {
		c := trace.NewChecker(0)
		for i := range reqs {
			r := reqs[i]
			if errs := c.Check(&r, i+1); len(errs) > 0 {
				b.Fatal(errs[0])
			}
			c.Accept(&r, i+1)
		}
	}
}
