package trace_test

import (
	"strconv"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// BenchmarkCheckClosing is the simulator's checker when sessions close
// after their last turn: 100,000 one-turn sessions checked, accepted and
// forgotten 200 requests later (about the requests in flight at 400/s).
//
//	go test ./internal/trace -run '^$' -bench CheckClosing -cpu 1 -count 6
func BenchmarkCheckClosing(b *testing.B) {
	const n, live = 100000, 200
	reqs := make([]trace.Request, n)
	for i := range reqs {
		reqs[i] = trace.Request{SessionID: "g0-s" + strconv.Itoa(i), ChatID: int64(i), ParentChatID: -1, Turn: 1,
			Timestamp: float64(i) / 400, InputLength: 500, OutputLength: 128, HashIDs: make([]uint64, 8)}
	}
	b.ReportAllocs()
	for b.Loop() {
		c := trace.NewChecker(64)
		c.TrackForgets()
		for i := range reqs {
			if errs := c.Check(&reqs[i], i+1); len(errs) > 0 {
				b.Fatal(errs[0])
			}
			c.Accept(&reqs[i], i+1)
			if i >= live {
				c.Forget(reqs[i-live].SessionID)
			}
		}
	}
}
