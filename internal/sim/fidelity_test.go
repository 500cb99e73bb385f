package sim

import (
	"context"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Hand-computed scenarios: each expected figure is derived here from the
// profile's coefficients, so a change in how the engine charges time shows
// up as a broken formula, not as a new golden number.

// TestPDFirstTokenFromP: in naive PD the prefill worker samples the first
// token and ships it with the KV, so TTFT is P's prefill + the exposed
// transfer, with no decode step on D; each later token is one D step.
func TestPDFirstTokenFromP(t *testing.T) {
	p := profile(t)
	tm, m := p.Timing, p.Model
	link := p.Links["rdma-400g"]
	const input, output = 1000, 50
	cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p, ChunkTokens: 8192}
	_, sink := run(t, cfg, one(input, output), 64)
	r := sink.recs[0]
	if r.Status != metrics.StatusCompleted {
		t.Fatalf("record %+v", r)
	}
	prefill := tm.PrefillS(input, 0)
	transfer := link.TransferS(int64(input) * m.KVBytesPerToken())
	if want := prefill + transfer; !near(r.TTFTS, want) {
		t.Fatalf("TTFT %.9f, want prefill %.6f + transfer %.6f = %.9f", r.TTFTS, prefill, transfer, want)
	}
	want := prefill + transfer
	for k := 1; k < output; k++ {
		want += tm.DecodeStepS(m, 1, int64(input+k))
	}
	if !near(r.LatencyS, want) {
		t.Fatalf("latency %.9f, want %.9f", r.LatencyS, want)
	}
	b := r.Breakdown
	if !near(b.PrefillS, prefill) || !near(b.TransferS, transfer) || b.QueueS != 0 || b.PreallocWaitS != 0 ||
		!near(b.PreallocWaitS+b.QueueS+b.PrefillS+b.TransferS+b.DecodeS, r.LatencyS) {
		t.Fatalf("breakdown %+v, want prefill %v + transfer %v + decode adding up to %v", b, prefill, transfer, r.LatencyS)
	}
}

// TestPDChunkedTransferOverlap: a two-chunk prompt sends chunk 1's KV while
// chunk 2 computes. On a fast link only chunk 2's transfer is exposed; on a
// slow one the link stays busy from chunk 1's end, so both chunks' bytes are
// exposed from there: TTFT = t1 + setup + (x1 + x2)/bandwidth.
func TestPDChunkedTransferOverlap(t *testing.T) {
	p := profile(t)
	tm, kvb := p.Timing, p.Model.KVBytesPerToken()
	const chunk, tail = 8192, 1000
	t1 := tm.PrefillS(chunk, 0)
	t2 := t1 + tm.PrefillS(tail, chunk)
	x1, x2 := float64(chunk*kvb), float64(tail*kvb)
	for _, tc := range []struct {
		link string
		want func(l float64, bw float64) float64
	}{
		{"rdma-400g", func(setup, bw float64) float64 { return t2 + setup + x2/bw }},
		{"tcp-loopback", func(setup, bw float64) float64 { return t1 + setup + (x1+x2)/bw }},
	} {
		l := p.Links[tc.link]
		if tc.link == "rdma-400g" && t1+l.SetupS+x1/l.BandwidthBytes > t2 {
			t.Fatalf("scenario broken: chunk 1's transfer outlasts chunk 2's prefill on %s", tc.link)
		}
		if tc.link == "tcp-loopback" && t1+l.SetupS+x1/l.BandwidthBytes < t2+l.SetupS+2*x2/l.BandwidthBytes {
			t.Fatalf("scenario broken: chunk 1's transfer ends before chunk 2's on %s", tc.link)
		}
		cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p, ChunkTokens: chunk, Link: tc.link}
		_, sink := run(t, cfg, one(chunk+tail, 2), 64)
		r := sink.recs[0]
		if want := tc.want(l.SetupS, l.BandwidthBytes); !near(r.TTFTS, want) {
			t.Errorf("%s: TTFT %.9f, want %.9f", tc.link, r.TTFTS, want)
		}
		if !near(r.Breakdown.PrefillS, t2) || !near(r.Breakdown.TransferS, r.TTFTS-t2) {
			t.Errorf("%s: breakdown %+v, want prefill %v and the exposed transfer after it", tc.link, r.Breakdown, t2)
		}
	}
}

// TestPDPreallocWait: D's pool holds one request at a time, so the second
// waits for D's pre-allocation until the first finishes, and P does not
// start its prefill before that (SGLang's bootstrap queue).
func TestPDPreallocWait(t *testing.T) {
	p := profile(t)
	tm, m := p.Timing, p.Model
	link := p.Links["rdma-400g"]
	const input, output = 20000, 4
	kvb := m.KVBytesPerToken()
	// A decode pool of 30,000 tokens: one request's 20,004 fit, two do not.
	frac := float64(m.WeightBytes+p.Hardware.WorkspaceBytes+30000*kvb) / float64(p.Hardware.HBMBytes)
	cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p, ChunkTokens: 32768, DecodeMemFraction: frac}
	reqs := []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: input, OutputLength: output, HashIDs: blocks(1, trace.BlocksFor(input, 64))},
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, InputLength: input, OutputLength: output, HashIDs: blocks(2, trace.BlocksFor(input, 64))},
	}
	_, sink := run(t, cfg, reqs, 64)
	first := tm.PrefillS(input, 0) + link.TransferS(int64(input)*kvb)
	end1 := first
	for k := 1; k < output; k++ {
		end1 += tm.DecodeStepS(m, 1, int64(input+k))
	}
	a, b := sink.recs[0], sink.recs[1]
	if a.ChatID != 1 || !near(a.LatencyS, end1) {
		t.Fatalf("first request %+v, want latency %v", a, end1)
	}
	if !near(b.Breakdown.PreallocWaitS, end1) {
		t.Fatalf("second request's prealloc wait %v, want the first's end %v", b.Breakdown.PreallocWaitS, end1)
	}
	if want := end1 + first; !near(b.TTFTS, want) {
		t.Fatalf("second TTFT %v, want prealloc wait %v + its own prefill and transfer %v", b.TTFTS, end1, first)
	}
}

// TestColoFollowUpHitsPreviousOutput: a colocated worker keeps a finished
// turn's output KV; the next turn's blocks over those positions are named
// on arrival and its prefill starts after them.
func TestColoFollowUpHitsPreviousOutput(t *testing.T) {
	p := profile(t)
	const bs, in1, out1, add = 64, 6430, 200, 1000 // 100 whole blocks + 30 tokens
	in2 := in1 + out1 + add
	b2 := blocks(3, trace.BlocksFor(in2, bs))
	b1 := append(append([]uint64(nil), b2[:100]...), 999) // turn 1's partial last block has its own id
	think := 1.0
	reqs := []trace.Request{
		{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: in1, OutputLength: out1, HashIDs: b1},
		{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1, InputLength: in2, OutputLength: 5, HashIDs: b2, ThinkTimeS: &think},
	}
	_, sink := run(t, Config{Mechanism: PDColo, Colo: 1, Profile: p}, reqs, bs)
	// KV exists for prompt + all output tokens but the last: 6,629 tokens,
	// of which blocks 100..102 of turn 2 lie wholly inside.
	named := ((in1+out1-1)/bs - in1/bs) * bs
	want := (in1/bs)*bs + named
	r := sink.recs[1]
	if r.CachedTokens != want {
		t.Fatalf("turn 2 cached %d tokens, want %d (turn 1's whole prompt blocks + %d named output tokens)", r.CachedTokens, want, named)
	}
	if pf := p.Timing.PrefillS(in2-want, want); !near(r.Breakdown.PrefillS, pf) || !near(r.TTFTS, pf) {
		t.Fatalf("turn 2 prefill %v / TTFT %v, want %v", r.Breakdown.PrefillS, r.TTFTS, pf)
	}
}

// TestITLIsInterTokenGaps: ITL comes from the gaps between a request's
// tokens, not from TPOT. One colocated request: its gaps are its decode
// steps. With a second request arriving mid-decode, the first one's next
// gap swallows the second one's prefill step (no mixed chunk), which TPOT
// averages away but ITL's tail shows.
func TestITLIsInterTokenGaps(t *testing.T) {
	p := profile(t)
	tm, m := p.Timing, p.Model
	const input, output = 3000, 10
	res, _ := run(t, Config{Mechanism: PDColo, Colo: 1, Profile: p}, one(input, output), 64)
	var sum float64
	for k := 1; k < output; k++ {
		sum += tm.DecodeStepS(m, 1, int64(input+k))
	}
	s := res.Summary
	if s.MeanITLMs == nil || !near(*s.MeanITLMs, 1000*sum/(output-1)) {
		t.Fatalf("mean ITL %v ms, want the mean decode step %v ms", s.MeanITLMs, 1000*sum/(output-1))
	}

	const late = 20000
	at := tm.PrefillS(input, 0) + tm.DecodeStepS(m, 1, input+1)/2
	reqs := []trace.Request{one(input, 200)[0],
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: at, InputLength: late, OutputLength: 2, HashIDs: blocks(2, trace.BlocksFor(late, 64))}}
	sim, err := newSim(Config{Mechanism: PDColo, Colo: 1, Profile: p, ChunkTokens: 32768},
		&SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: reqs}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The request's second token waits for the end of its first decode
	// step, then for the late prompt's prefill, then for a batch-2 step
	// (its context: prompt + 2 tokens; the late one's: prompt + 1).
	stall := tm.PrefillS(late, 0) + tm.DecodeStepS(m, 2, input+2+late+1)
	if got := sim.gaps.Max(); !near(got, stall) {
		t.Fatalf("largest gap %v s, want the gap across the prefill stall %v s", got, stall)
	}
	if want := int64(200 - 1 + 2 - 1); sim.gaps.Count() != want {
		t.Fatalf("%d gaps, want one per token after each request's first: %d", sim.gaps.Count(), want)
	}
}
