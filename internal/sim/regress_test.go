package sim

import (
	"fmt"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TestTransferLandingDuringAnotherStart: B's transfer starts a few ns
// before A's lands. A's completion must not be lost inside B's Start (it
// once was: A never ended, its KV stayed locked and its next turn never
// came).
func TestTransferLandingDuringAnotherStart(t *testing.T) {
	p := profile(t)
	const inA, inB = 8000, 4000
	link := p.Links["tcp-loopback"]
	xferEnd := p.Timing.PrefillS(inA, 0) + link.TransferS(int64(inA)*p.Model.KVBytesPerToken())
	for _, eps := range []float64{0, 1e-8, 5e-9} {
		tsB := xferEnd - p.Timing.PrefillS(inB, 0) - eps
		reqs := []trace.Request{
			{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: inA, OutputLength: 5, HashIDs: blocks(1, trace.BlocksFor(inA, 64))},
			{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: tsB, InputLength: inB, OutputLength: 5, HashIDs: blocks(2, trace.BlocksFor(inB, 64))},
			{SessionID: "a", ChatID: 3, ParentChatID: 1, Turn: 2, Timestamp: 10, InputLength: inA + 100, OutputLength: 5, HashIDs: blocks(1, trace.BlocksFor(inA+100, 64))},
		}
		cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p, Link: "tcp-loopback", TimeoutS: 60}
		_, sink := run(t, cfg, reqs, 64)
		if len(sink.recs) != 3 {
			t.Fatalf("eps %g: %d of 3 requests recorded", eps, len(sink.recs))
		}
		for _, r := range sink.recs {
			if r.Status != metrics.StatusCompleted {
				t.Fatalf("eps %g: request %s %s (%s)", eps, r.RequestID, r.Status, r.Error)
			}
		}
	}
}

// TestLateTinyTransfers: tiny transfers late in a run, where a completion
// time rounds onto the link's current time, must finish (the link once
// spun forever there).
func TestLateTinyTransfers(t *testing.T) {
	p := profile(t)
	for _, link := range []string{"d2d-h200", "nvlink", "rdma-400g"} {
		var reqs []trace.Request
		for i := 0; i < 200; i++ {
			in := 1 + i*7
			reqs = append(reqs, trace.Request{SessionID: fmt.Sprint("s", i), ChatID: int64(i + 1), ParentChatID: -1, Turn: 1,
				Timestamp: 1e5 + float64(i)*0.37, InputLength: in, OutputLength: 2, HashIDs: blocks(uint64(i+1), trace.BlocksFor(in, 64))})
		}
		for _, ts := range []float64{1e4, 3e5} {
			for in := 1; in <= 400; in += 13 {
				reqs = append(reqs, trace.Request{SessionID: fmt.Sprint("x", ts, in), ChatID: int64(len(reqs) + 1), ParentChatID: -1, Turn: 1,
					Timestamp: ts + float64(in), InputLength: in, OutputLength: 2, HashIDs: blocks(uint64(len(reqs)+1), trace.BlocksFor(in, 64))})
			}
		}
		sortByTime(reqs)
		cfg := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 2, Profile: p, Link: link}
		res, _ := run(t, cfg, reqs, 64)
		if res.Summary.Completed != len(reqs) {
			t.Fatalf("%s: %d of %d completed", link, res.Summary.Completed, len(reqs))
		}
	}
}

func sortByTime(rs []trace.Request) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Timestamp < rs[j-1].Timestamp; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// TestGateIsFIFO: a request waiting at the concurrency gate is sent before
// a next turn released later (it once was overtaken by turns released
// inside the ending request's bookkeeping).
func TestGateIsFIFO(t *testing.T) {
	p := profile(t)
	reqs := []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 1000, OutputLength: 50, HashIDs: blocks(1, trace.BlocksFor(1000, 64))},
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 0.001, InputLength: 1000, OutputLength: 50, HashIDs: blocks(2, trace.BlocksFor(1000, 64))},
		{SessionID: "a", ChatID: 3, ParentChatID: 1, Turn: 2, Timestamp: 0.002, InputLength: 1100, OutputLength: 50, HashIDs: blocks(1, trace.BlocksFor(1100, 64))},
	}
	cfg := Config{Mechanism: PDColo, Colo: 1, Profile: p, Concurrency: 1, IgnoreThink: true}
	_, sink := run(t, cfg, reqs, 64)
	sent := map[string]float64{}
	for _, r := range sink.recs {
		sent[r.RequestID] = r.ArrivalS
	}
	if !(sent["1"] < sent["2"] && sent["2"] < sent["3"]) {
		t.Fatalf("send order %v, want 1 < 2 < 3 (2 waited at the gate first)", sent)
	}
}
