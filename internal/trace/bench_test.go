package trace_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
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

// BenchmarkReadShaped reads 12,000 lines shaped like the converted
// Mooncake trace's (3.6 MB): 512-token blocks, a new session id on most
// lines, times in milliseconds, 1 to 50 hash ids of up to six digits.
//
//	go test ./internal/trace -run '^$' -bench ReadShaped -cpu 1
func BenchmarkReadShaped(b *testing.B) {
	data := shapedTrace(12000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rd, err := trace.NewReader(bytes.NewReader(data), "bench", 0)
		if err != nil {
			b.Fatal(err)
		}
		var req trace.Request
		for n := 0; ; n++ {
			err := rd.Next(&req)
			if err == io.EOF {
				if n != 12000 {
					b.Fatalf("read %d of 12000", n)
				}
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func shapedTrace(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 5))
	var buf bytes.Buffer
	buf.WriteString(`{"pdhybrid_trace":1,"block_size":512,"source":"mooncake"}` + "\n")
	next := uint64(1)
	for i := range n {
		ids := 1 + rng.IntN(50)
		parent, turn := int64(-1), 1
		if i > 300 && rng.IntN(3) == 0 {
			parent, turn = int64(i-1-rng.IntN(300)), 2
		}
		fmt.Fprintf(&buf, `{"session_id":"mc%d","chat_id":%d,"parent_chat_id":%d,"turn":%d,"timestamp":%.3f,"input_length":%d,"output_length":%d,"type":"text","hash_ids":[0`,
			i-i/3, i, parent, turn, float64(i)*0.2934, ids*512-rng.IntN(512), 1+rng.IntN(800))
		for range ids - 1 {
			next += uint64(1 + rng.IntN(3))
			fmt.Fprintf(&buf, ",%d", next)
		}
		buf.WriteString("]}\n")
	}
	return buf.Bytes()
}
