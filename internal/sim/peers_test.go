package sim

import (
	"context"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/convert"
	"github.com/pdhybrid/pdhybrid/internal/trace/tracetest"
	"github.com/pdhybrid/pdhybrid/internal/trace/weka"
)

// Hand-computed scenarios of the peer baselines (kvc/peers.go). Block size
// 64; a session's turn 1 is 100 blocks (6,400 tokens) with one output token
// (no output KV kept), so after it the decoder holds exactly those 6,400
// tokens and the router believes so; turn 2 extends the prompt by add
// tokens, 10 minutes later (nothing else is running).

const peerBS = 64

func peerCfg(t *testing.T, m Mechanism) Config {
	return Config{Mechanism: m, Prefill: 1, Decode: 2, Profile: profile(t)}
}

// twoTurns runs sessions each of two turns: turn 1 of 6,400 tokens, turn 2
// of 6,400 + add[i] tokens. It returns the records by chat id and the sim's
// P→D transfer tokens.
func twoTurns(t *testing.T, cfg Config, adds ...int) (map[int64]metrics.Record, *Result) {
	t.Helper()
	var reqs []trace.Request
	think := 600.0
	for i, add := range adds {
		b := blocks(uint64(i+1), trace.BlocksFor(6400+add, peerBS))
		sess := string(rune('a' + i))
		id := int64(2*i + 1)
		reqs = append(reqs,
			trace.Request{SessionID: sess, ChatID: id, ParentChatID: -1, Turn: 1, Timestamp: float64(i), InputLength: 6400, OutputLength: 1, HashIDs: b[:100]},
			trace.Request{SessionID: sess, ChatID: id + 1, ParentChatID: id, Turn: 2, Timestamp: float64(i) + 1, InputLength: 6400 + add, OutputLength: 1, HashIDs: b, ThinkTimeS: &think})
	}
	// Turns in timestamp order (every turn 1 first; turn 2s are released by
	// their parents anyway).
	sorted := make([]trace.Request, 0, len(reqs))
	for _, r := range reqs {
		if r.Turn == 1 {
			sorted = append(sorted, r)
		}
	}
	for _, r := range reqs {
		if r.Turn == 2 {
			sorted = append(sorted, r)
		}
	}
	for i := range sorted {
		sorted[i].Timestamp = float64(i)
	}
	res, sink := run(t, cfg, sorted, peerBS)
	out := map[int64]metrics.Record{}
	for _, r := range sink.recs {
		if r.Status != metrics.StatusCompleted {
			t.Fatalf("chat %d %s: %s", r.ChatID, r.Status, r.Error)
		}
		out[r.ChatID] = r
	}
	return out, res
}

// Dynamo's isl_bounding: turn 2 stays on its decoder when its effective
// input (prompt − overlap) is < 2,048 tokens and < 0.7 of the prompt. Turn 1
// (cold: ratio 1) and an append of exactly 2,048 tokens go through P; an
// append of 2,047 is prefilled on the decoder, hitting its 6,400 cached
// tokens, and moves no KV.
func TestConditionalISLBounding(t *testing.T) {
	recs, res := twoTurns(t, peerCfg(t, PDConditional), 2047, 2048)
	for id, want := range map[int64]string{1: kvc.ModeCondPD, 2: kvc.ModeCondLocal, 3: kvc.ModeCondPD, 4: kvc.ModeCondPD} {
		if recs[id].ExecutionMode != want {
			t.Errorf("chat %d: mode %s, want %s (path %v)", id, recs[id].ExecutionMode, want, recs[id].Path)
		}
	}
	local := recs[2]
	if local.PrefillWorker != "" || local.DecodeWorker != recs[1].DecodeWorker || local.CachedTokens != 6400 {
		t.Errorf("local turn: P %q D %q (turn 1 on %q), cached %d; want no P, turn 1's decoder, 6,400 cached",
			local.PrefillWorker, local.DecodeWorker, recs[1].DecodeWorker, local.CachedTokens)
	}
	// Two cold turns of 6,400, then 2,048 beyond what the decoder holds.
	if got, want := res.Replay.KVTransferTokens, int64(6400+6400+2048); got != want {
		t.Errorf("KV moved P→D: %d tokens, want %d", got, want)
	}
	// The local prefill is charged on D: 2,047 new tokens computed there.
	d := res.Workers[local.DecodeWorker]
	if d.PrefillTokens != 2047 {
		t.Errorf("%s prefilled %d tokens, want the local turn's 2,047", local.DecodeWorker, d.PrefillTokens)
	}
}

// The ratio bound: after a 640-token turn 1, a turn 2 of 640 + 1,700
// tokens is small (1,700 < 2,048) but mostly new (1,700 / 2,340 = 0.73 ≥
// 0.7): it goes through P; with the ratio bound at 0.8 it stays on the
// decoder. A cold prompt (ratio 1) never qualifies.
func TestConditionalRatio(t *testing.T) {
	reqs := oneSession(640, 1, 2340)
	for _, c := range []struct {
		ratio      float64
		turn2, why string
	}{{0.7, kvc.ModeCondPD, "0.73 ≥ 0.7"}, {0.8, kvc.ModeCondLocal, "0.73 < 0.8"}} {
		cfg := peerCfg(t, PDConditional)
		cfg.Peer.EffISLRatio = c.ratio
		_, sink := run(t, cfg, reqs, peerBS)
		if m := sink.recs[0].ExecutionMode; m != kvc.ModeCondPD {
			t.Errorf("ratio %v: cold turn 1 %s, want %s", c.ratio, m, kvc.ModeCondPD)
		}
		if m := sink.recs[1].ExecutionMode; m != c.turn2 {
			t.Errorf("ratio %v: turn 2 %s, want %s (%s)", c.ratio, m, c.turn2, c.why)
		}
	}
}

// prefill_load bypasses P when it is busy: a 40,000-token prompt keeps P's
// active prefill tokens above 4 × 2,048 while a cold 3,000-token prompt
// arrives; isl_bounding would send that one through P (ratio 1).
func TestConditionalPrefillLoad(t *testing.T) {
	reqs := []trace.Request{
		{SessionID: "big", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 40000, OutputLength: 2, HashIDs: blocks(1, trace.BlocksFor(40000, peerBS))},
		{SessionID: "small", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 0.01, InputLength: 3000, OutputLength: 2, HashIDs: blocks(2, trace.BlocksFor(3000, peerBS))},
	}
	for _, c := range []struct {
		strategy string
		want     string
	}{{"isl_bounding", kvc.ModeCondPD}, {"prefill_load", kvc.ModeCondLocal}, {"isl_or_load", kvc.ModeCondLocal}} {
		cfg := peerCfg(t, PDConditional)
		cfg.ChunkTokens = 2048
		cfg.Peer.Strategy = c.strategy
		_, sink := run(t, cfg, reqs, peerBS)
		got := map[int64]string{}
		for _, r := range sink.recs {
			got[r.ChatID] = r.ExecutionMode
		}
		if got[1] != kvc.ModeCondPD || got[2] != c.want {
			t.Errorf("%s: modes %v, want the big prompt through P and the small one %s", c.strategy, got, c.want)
		}
	}
}

// The decode-busy gate vetoes a bypass the policy allows when the decoder's
// active blocks (this request's included) exceed the share of its pool.
func TestConditionalDecodeBusyGate(t *testing.T) {
	cfg := peerCfg(t, PDConditional)
	cfg.Peer.DecodeBusy = 1e-6
	recs, _ := twoTurns(t, cfg, 300)
	if m := recs[2].ExecutionMode; m != kvc.ModeCondPD {
		t.Fatalf("a 300-token append with the gate closed: %s, want %s", m, kvc.ModeCondPD)
	}
	cfg.Peer.DecodeBusy = 1
	if recs, _ = twoTurns(t, cfg, 300); recs[2].ExecutionMode != kvc.ModeCondLocal {
		t.Fatalf("gate open: %s, want %s", recs[2].ExecutionMode, kvc.ModeCondLocal)
	}
}

// llm-d's prefix-based-pd-decider: disaggregate iff the uncached suffix on
// the chosen decoder is ≥ nonCachedTokens (512 by default): 511 stays
// decode-only, 512 goes through P. nonCachedTokens 0 disables
// disaggregation (every turn on the decoder, cold ones too); a promptTokens
// gate above the prompt keeps it local as well.
func TestPrefixDeciderThreshold(t *testing.T) {
	recs, res := twoTurns(t, peerCfg(t, PDPrefixDecider), 511, 512)
	for id, want := range map[int64]string{1: kvc.ModeDeciderPD, 2: kvc.ModeDeciderLocal, 3: kvc.ModeDeciderPD, 4: kvc.ModeDeciderPD} {
		if recs[id].ExecutionMode != want {
			t.Errorf("chat %d: mode %s, want %s (path %v)", id, recs[id].ExecutionMode, want, recs[id].Path)
		}
	}
	if got, want := res.Replay.KVTransferTokens, int64(6400+6400+512); got != want {
		t.Errorf("KV moved P→D: %d tokens, want %d", got, want)
	}
	cfg := peerCfg(t, PDPrefixDecider)
	cfg.Peer.NonCachedTokens = -1 // the config's spelling of llm-d's 0
	recs, res = twoTurns(t, cfg, 5000)
	for id := int64(1); id <= 2; id++ {
		if recs[id].ExecutionMode != kvc.ModeDeciderLocal {
			t.Errorf("nonCachedTokens 0, chat %d: %s, want %s", id, recs[id].ExecutionMode, kvc.ModeDeciderLocal)
		}
	}
	if res.Replay.KVTransferTokens != 0 {
		t.Errorf("nonCachedTokens 0 moved %d tokens P→D", res.Replay.KVTransferTokens)
	}
	cfg = peerCfg(t, PDPrefixDecider)
	cfg.Peer.PromptTokens = 10000
	if recs, _ = twoTurns(t, cfg, 3000); recs[2].ExecutionMode != kvc.ModeDeciderLocal || recs[1].ExecutionMode != kvc.ModeDeciderLocal {
		t.Errorf("promptTokens 10,000: modes %s, %s; want both local", recs[1].ExecutionMode, recs[2].ExecutionMode)
	}
}

// SGLang's decode radix cache: every turn goes through P, which prefills
// (less its own cache) and sends only what the decoder lacks. Turn 2 of
// 6,400 + 300 tokens, with turn 1's 64 output tokens (output 65) on the
// decoder, moves 6,764 − 6,464 = 300 tokens where naive PD moves all 6,764;
// P computes the same in both.
func TestDecodeRadixSendsOnlyTheDelta(t *testing.T) {
	p := profile(t)
	reqs := oneSession(6400, 65, 6764)
	radix, rs := run(t, Config{Mechanism: PDDecodeRadix, Prefill: 1, Decode: 2, Profile: p}, reqs, peerBS)
	naive, ns := run(t, Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 2, Profile: p, Policy: kvc.PolicySticky}, reqs, peerBS)
	if got, want := radix.Replay.KVTransferTokens, int64(6400+300); got != want {
		t.Errorf("decode radix moved %d tokens, want %d (turn 1 whole, then the 300-token delta)", got, want)
	}
	if got, want := naive.Replay.KVTransferTokens, int64(6400+6764); got != want {
		t.Errorf("naive PD moved %d tokens, want %d", got, want)
	}
	for _, r := range rs.recs {
		if r.ExecutionMode != kvc.ModeDecodeRadixPD || r.PrefillWorker == "" {
			t.Errorf("chat %d: mode %s on P %q, want %s through P", r.ChatID, r.ExecutionMode, r.PrefillWorker, kvc.ModeDecodeRadixPD)
		}
	}
	if a, b := radix.Workers["prefill-0"].PrefillTokens, naive.Workers["prefill-0"].PrefillTokens; a != b || a != 6400+364 {
		t.Errorf("P computed %d tokens with the decode radix cache, %d without; want 6,764 in both", a, b)
	}
	if rs.recs[1].Breakdown.TransferS >= ns.recs[1].Breakdown.TransferS {
		t.Errorf("turn 2 transfer %.6f s with the delta, %.6f s without: the delta must be faster",
			rs.recs[1].Breakdown.TransferS, ns.recs[1].Breakdown.TransferS)
	}
}

// TestPeersOnWEKA replays the WEKA Claude Code sessions (Poisson session
// arrivals at 0.005/s, docs/peer-baselines.md) through naive PD
// and the three peers on 1P3D: every request is accounted for (the only
// failures are prompts over the context), the two deciders keep a share of
// the turns on the decoder and beat naive PD's TTFT p50, and the decode
// radix cache moves less than a fifth of naive PD's KV.
func TestPeersOnWEKA(t *testing.T) {
	if testing.Short() {
		t.Skip("four replays of 5,049 requests; skipped with -short")
	}
	p := profile(t)
	// pdhybrid trace convert --from weka --arrival poisson --rate 0.005 (seed 1)
	src := loadWith(t, tracetest.SharedTraces(t, "weka"), convert.Options{From: "weka",
		Weka: weka.Options{Arrival: "poisson", Rate: 0.005, Seed: 1}})
	sums := map[Mechanism]*Result{}
	for _, m := range []Mechanism{PDDisaggregation, PDConditional, PDPrefixDecider, PDDecodeRadix} {
		s := *src
		res, err := Run(context.Background(), Config{Mechanism: m, Prefill: 1, Decode: 3, Profile: p}, &s, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum := res.Summary
		if sum.Requests != 5049 {
			t.Fatalf("%s: %d requests recorded, want 5049", m, sum.Requests)
		}
		for cause := range sum.FailureCauses {
			if cause != "failed: input-too-long" {
				t.Fatalf("%s: unexpected failure cause %q", m, cause)
			}
		}
		sums[m] = res
	}
	naive := sums[PDDisaggregation]
	for m, mode := range map[Mechanism]string{PDConditional: kvc.ModeCondLocal, PDPrefixDecider: kvc.ModeDeciderLocal} {
		s := sums[m].Summary
		share := float64(s.ExecutionModes[mode]) / float64(s.Completed)
		t.Logf("%s: local share %.3f, TTFT p50 %.3f s (naive PD %.3f s)", m, share, s.P50TTFTMs/1e3, naive.Summary.P50TTFTMs/1e3)
		if share < 0.2 || s.P50TTFTMs >= naive.Summary.P50TTFTMs {
			t.Errorf("%s: local share %.3f, TTFT p50 %.1f ms against naive PD's %.1f ms", m, share, s.P50TTFTMs, naive.Summary.P50TTFTMs)
		}
	}
	if r, n := sums[PDDecodeRadix].Replay.KVTransferTokens, naive.Replay.KVTransferTokens; 5*r >= n {
		t.Errorf("decode radix moved %d KV tokens, naive PD %d: want less than a fifth", r, n)
	}
}

// Dynamo's router sees a decoder's cache through its KV events by default,
// the previous turn's output included; without them (--no-router-kv-events)
// it knows only the prompts it sent. After a 6,400-token turn with 2,001
// output tokens (2,000 with KV: 31 whole blocks), a turn of 8,500 tokens
// has an effective input of 8,500 − 6,400 − 1,984 = 116 tokens by the
// events (local) and 2,100 by the router's belief (through P).
func TestConditionalKVEvents(t *testing.T) {
	reqs := oneSession(6400, 2001, 8500)
	for _, c := range []struct {
		approx bool
		want   string
	}{{false, kvc.ModeCondLocal}, {true, kvc.ModeCondPD}} {
		cfg := peerCfg(t, PDConditional)
		cfg.Peer.ApproxOverlap = c.approx
		_, sink := run(t, cfg, reqs, peerBS)
		if r := sink.recs[1]; r.ExecutionMode != c.want {
			t.Errorf("approximate %v: turn 2 %s, want %s (path %v)", c.approx, r.ExecutionMode, c.want, r.Path)
		}
	}
}

// oneSession is one session: a turn of in1 tokens (whole blocks) with out1
// output tokens, then 600 s later a turn of in2 tokens that extends it.
func oneSession(in1, out1, in2 int) []trace.Request {
	b := blocks(1, trace.BlocksFor(in2, peerBS))
	think := 600.0
	return []trace.Request{
		{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: in1, OutputLength: out1, HashIDs: b[:in1/peerBS]},
		{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1, InputLength: in2, OutputLength: 1, HashIDs: b, ThinkTimeS: &think},
	}
}
