package sim

import (
	"context"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/kvc/kvctest"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TestExecutorConformance runs the conformance suite's scripted sessions
// (kvc/kvctest) through the simulator's executor: the dispatcher calls in
// order and the belief afterwards must be the row's, as the gateway's
// executor must (internal/gateway/conformance_test.go).
func TestExecutorConformance(t *testing.T) {
	for _, row := range kvctest.Rows {
		t.Run("sim/"+row.Name, func(t *testing.T) {
			if row.Only != "" && row.Only != "sim" {
				t.Skip(row.Why)
			}
			calls, snap, s := simConformance(t, row)
			t.Logf("calls %q", calls)
			if sum := s.collector.Summary(0); sum.Completed != len(row.Turns)-row.Failures() {
				t.Fatalf("%d of %d requests completed; the row wants %d failures", sum.Completed, len(row.Turns), row.Failures())
			}
			if err := row.Check(calls, snap, s.disp.LifecycleErr()); err != nil {
				t.Fatal(err)
			}
			if row.MaxResident > 0 {
				for _, wi := range s.decodes {
					if n := s.workers[wi].ResidentSessions(); n > row.MaxResident {
						t.Fatalf("%s holds %d sessions, at most %d allowed", s.workers[wi].Name(), n, row.MaxResident)
					}
				}
			}
		})
	}
}

// simConformance runs a row's turns one after another (each long after the
// last ended) and returns the dispatcher's calls and final belief.
func simConformance(t *testing.T, row kvctest.Row) ([]string, kvc.Snapshot, *Sim) {
	t.Helper()
	const bs = 64
	prompts := kvctest.NewPrompts()
	last := map[string]int64{}
	outs := map[string][]int{}
	var reqs []trace.Request
	for i, turn := range row.Turns {
		toks := prompts.Next(turn, outs[turn.Session])
		id := int64(i + 1)
		r := trace.Request{SessionID: turn.Session, ChatID: id, ParentChatID: -1, Turn: 1, Timestamp: 100 * float64(i),
			InputLength: len(toks), OutputLength: turn.Output, HashIDs: kvctest.Blocks(toks, bs)}
		if p, ok := last[turn.Session]; ok {
			r.ParentChatID, r.Turn = p, int(reqs[p-1].Turn)+1
		}
		last[turn.Session] = id
		out := make([]int, turn.Output)
		for k := range out {
			out[k] = 900_000_000 + 1000*i + k
		}
		outs[turn.Session] = out
		reqs = append(reqs, r)
	}
	cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: max(row.Decoders, 1), Profile: profile(t)}
	cfg.KVC.SessionCap = row.SessionCap // the engine's; the router's is the row's below
	v := row.V3
	cfg.KVC.V3 = KVCv3{DBudgetTokens: v.DBudgetTokens, MarginTokens: v.Margin, ColdRoute: v.ColdRoute, ColdInflightTokens: v.ColdInflightTokens,
		Inline: v.Inline, LocalFallback: v.LocalFallback, TypedRejects: v.TypedRejects, WholeOnP: v.WholeOnP, ColdOnP: v.ColdOnP, PHosts: v.PHosts}
	rc := row.Config()
	cfg.editDispatch = func(dc *kvc.DispatchConfig) {
		dc.Gate, dc.Belief, dc.SessionCap = rc.Gate, rc.Belief, rc.SessionCap
		rtt := dc.V3.RTTS
		dc.V3 = rc.V3
		dc.V3.RTTS = rtt
	}
	switch row.Fault {
	case "":
	case kvctest.FaultTransfer:
		cfg.TransferTimeoutS = 1e-9 // every transfer is still on the link then
	case kvctest.FaultClientLeavesPrefill:
		// After the admission round trip (6 ms) and the acceptance, long
		// before a 3000-token prefill's KV lands.
		cfg.TimeoutS = 0.02
	case kvctest.FaultClientLeavesMidStream:
		// The KV landed and decoding began; 2000 tokens take far longer.
		cfg.TimeoutS = 2
	default:
		t.Fatalf("the simulator cannot inject %s", row.Fault)
	}
	s, err := newSim(cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: bs}, Reqs: reqs}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	s.disp.SetTrace(func(c string) { calls = append(calls, c) })
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return calls, s.disp.Snapshot(), s
}
