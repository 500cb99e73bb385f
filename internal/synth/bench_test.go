package synth

import (
	"io"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// BenchmarkSynthAgentic measures generation speed on an unbounded default
// workload: ns/op is per request, and blocks/s counts the hash ids filled
// (the dominant cost: about 1,400 per request).
func BenchmarkSynthAgentic(b *testing.B) {
	c := DefaultAgentic()
	c.Sessions, c.Requests = 0, int64(b.N)
	g := mustAgentic(b, c)
	var r trace.Request
	blocks := 0
	b.ReportAllocs()
	b.ResetTimer()
	for {
		if err := g.Next(&r); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		blocks += len(r.HashIDs)
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkSynthAgenticWrite adds canonical JSONL encoding (to io.Discard),
// the cost of `pdhybrid trace synth` per request.
func BenchmarkSynthAgenticWrite(b *testing.B) {
	c := DefaultAgentic()
	c.Sessions, c.Requests = 0, int64(b.N)
	g := mustAgentic(b, c)
	w, err := trace.NewWriter(io.Discard, g.Header())
	if err != nil {
		b.Fatal(err)
	}
	var r trace.Request
	b.ReportAllocs()
	b.ResetTimer()
	for g.Next(&r) == nil {
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
}
