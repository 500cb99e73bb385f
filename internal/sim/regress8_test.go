package sim

import (
	"context"
	"github.com/pdhybrid/pdhybrid/internal/trace"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Naive-PD decode workers cache nothing, so kv-aware routing must not score
// them on blocks it once sent there: the requests spread over every decode
// worker instead of piling onto decode-0 (they all did before).
func TestPDKVAwareSpreadsDecodes(t *testing.T) {
	cfg := Config{Profile: profile(t), Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Policy: kvc.PolicyKVAware}
	sink := &memSink{}
	if _, err := runSource(t, cfg, agentic(t, 30, 0.2), sink); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, r := range sink.recs {
		per[r.DecodeWorker]++
	}
	for _, d := range []string{"decode-0", "decode-1", "decode-2"} {
		if per[d] < len(sink.recs)/10 {
			t.Errorf("%s got %d of %d requests; want a fair share (per worker: %v)", d, per[d], len(sink.recs), per)
		}
	}
}

func runSource(t testing.TB, cfg Config, src Source, sink Sink) (*Result, error) {
	t.Helper()
	return Run(context.Background(), cfg, src, sink, nil)
}

// The simulator refuses an invalid trace with the located error instead of
// running it (each case once corrupted a run silently).
func TestSimRefusesInvalidTrace(t *testing.T) {
	p := profile(t)
	good := func() []trace.Request {
		return []trace.Request{
			{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 100, OutputLength: 2, HashIDs: blocks(1, 2)},
			{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1, InputLength: 150, OutputLength: 2, HashIDs: blocks(1, 3)},
		}
	}
	for _, tc := range []struct {
		name, want, at string
		edit           func([]trace.Request) []trace.Request
	}{
		{"hash count", `field "hash_ids"`, "built-in workload:2", func(rs []trace.Request) []trace.Request { rs[1].HashIDs = blocks(1, 9); return rs }},
		{"child first", `field "parent_chat_id"`, "built-in workload:1", func(rs []trace.Request) []trace.Request {
			rs[0], rs[1] = rs[1], rs[0]
			rs[0].Timestamp, rs[1].Timestamp = 0, 0
			return rs
		}},
		{"duplicate chat", `field "chat_id"`, "built-in workload:2", func(rs []trace.Request) []trace.Request {
			rs[1].ChatID, rs[1].ParentChatID, rs[1].SessionID, rs[1].Turn = 1, -1, "t", 1
			return rs
		}},
	} {
		for _, mech := range []Config{{Mechanism: PDColo, Colo: 1, Profile: p}, {Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p}} {
			src := &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: tc.edit(good())}
			_, err := Run(context.Background(), mech, src, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.at) {
				t.Errorf("%s on %s: err = %v, want the located %s error", tc.name, mech.Mechanism, err, tc.want)
			}
		}
	}
}
