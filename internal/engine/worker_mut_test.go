package engine

import (
	"errors"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Tests that pin worker.go's rules, values worked out by hand.

// stepWorker is a colocated worker without a prefix cache whose steps are
// powers of two: a prefill step 1/64 s whatever its tokens, a decode step
// 1/512 s whatever its batch.
func stepWorker(t *testing.T, chunk int) *Worker {
	t.Helper()
	p := *testProfile(t)
	p.Timing = model.Timing{PrefillOverheadS: 1.0 / 64, DecodeOverheadS: 1.0 / 512}
	w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1 << 20, ChunkTokens: chunk})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestMutNewBlockSize(t *testing.T) {
	for _, bs := range []int{0, -1} {
		if _, err := New(Config{Name: "c", Profile: testProfile(t), BlockSize: bs}); err == nil {
			t.Errorf("block size %d accepted", bs)
		}
	}
	if _, err := New(Config{Name: "c", Profile: testProfile(t), BlockSize: 1}); err != nil {
		t.Errorf("block size 1: %v", err)
	}
}

// Queued counts both queues: admission and reservation.
func TestMutQueuedCountsBothQueues(t *testing.T) {
	w := stepWorker(t, 8192)
	w.waiting.push(&Request{ID: 1})
	w.prealloc.push(&Request{ID: 2})
	w.prealloc.push(&Request{ID: 3})
	if w.Queued() != 3 {
		t.Fatalf("Queued %d, want 1 + 2", w.Queued())
	}
}

// Reserve takes a prompt plus its output up to the whole pool, and no more.
func TestMutReserveBound(t *testing.T) {
	for _, tc := range []struct {
		input, output int
		ok            bool
	}{
		{999, 1, true},    // 1,000 of 1,000
		{1000, 1, false},  // 1,001
		{990, 20, false},  // 1,010
		{1000, 0, false},  // output counts at least 1: 1,001
		{500, 500, true},  // 1,000
		{500, 501, false}, // 1,001
	} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1000})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Reserve(0, &Request{ID: 1, Kind: DecodeOnly, Input: tc.input, Output: tc.output})
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrTooLarge) {
			t.Errorf("reserve %d + %d in a pool of 1,000: %v, want ok %v", tc.input, tc.output, err, tc.ok)
		}
	}
}

// An aborted reservation stops counting against MaxRunning and the
// transfer queue.
func TestMutAbortReserved(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: DecodeOnly, Input: 100, Output: 10}
	if err := w.Reserve(0, r); err != nil {
		t.Fatal(err)
	}
	if r.Stage != StageReserved || w.Running() != 1 || w.Transferring() != 1 {
		t.Fatalf("after Reserve: stage %v, running %d, transferring %d; want reserved, 1, 1", r.Stage, w.Running(), w.Transferring())
	}
	w.Abort(0, r)
	if w.Running() != 0 || w.Transferring() != 0 || w.Used() != 0 || w.Reserved() != 0 {
		t.Fatalf("after Abort: running %d, transferring %d, used %d, reserved %d; want all 0",
			w.Running(), w.Transferring(), w.Used(), w.Reserved())
	}
}

// lastBlockTokens: the prompt's tokens in its last block, a whole block
// when the blocks do not reach past the prompt's end by a partial one.
func TestMutLastBlockTokens(t *testing.T) {
	w := stepWorker(t, 8192)
	for _, tc := range []struct {
		input, blocks int
		want          int64
	}{
		{130, 3, 2},  // 130 − 2·64
		{192, 3, 64}, // a full last block
		{128, 3, 64}, // 128 − 128 = 0: the blocks run past the prompt
		{100, 3, 64}, // negative: the same
		{200, 3, 64}, // 72 > 64: more tokens than blocks
	} {
		if got := w.lastBlockTokens(tc.input, tc.blocks); got != tc.want {
			t.Errorf("%d tokens in %d blocks: last block %d, want %d", tc.input, tc.blocks, got, tc.want)
		}
	}
}

// The decode run a: 100 prompt tokens, 11 output; its prefill step ends at
// 1/64 s with the first token, then one run of 10 steps of 1/512 s.
func decodeRunA(t *testing.T) (*Worker, *Request) {
	t.Helper()
	w := stepWorker(t, 8192)
	a := &Request{ID: 1, Kind: Full, Input: 100, Output: 11}
	if err := w.Submit(0, a); err != nil {
		t.Fatal(err)
	}
	w.Advance(0)
	w.Advance(1.0 / 64)
	if a.Stage != StageDecoding || a.generated != 1 || w.plan.decodeK != 10 || w.stepStart != 1.0/64 {
		t.Fatalf("a: stage %v, generated %d; run of %d steps from %v; want decoding, 1, 10 from 1/64",
			a.Stage, a.generated, w.plan.decodeK, w.stepStart)
	}
	return w, a
}

// A sample inside a decode run counts the steps done as used KV, not
// reserved: 2.5 steps in, 2 tokens move; at the run's start none.
func TestMutSampleInsideARun(t *testing.T) {
	w, _ := decodeRunA(t)
	start := 1.0 / 64
	s0 := w.Sample(start)
	if s0.KVUsedTokens != w.Used() || s0.KVReservedTokens != w.Reserved() {
		t.Fatalf("at the run's start: used %d reserved %d, want the pool's %d and %d", s0.KVUsedTokens, s0.KVReservedTokens, w.Used(), w.Reserved())
	}
	s := w.Sample(start + 2.5/512)
	if s.KVUsedTokens != s0.KVUsedTokens+2 || s.KVReservedTokens != s0.KVReservedTokens-2 {
		t.Fatalf("2.5 steps in: used %d reserved %d, want %d + 2 and %d − 2", s.KVUsedTokens, s.KVReservedTokens, s0.KVUsedTokens, s0.KVReservedTokens)
	}
	// 100 prompt tokens and 11 output tokens are all a holds or was promised.
	if s.KVUsedTokens+s.KVReservedTokens != 111 {
		t.Fatalf("used %d + reserved %d, want 111", s.KVUsedTokens, s.KVReservedTokens)
	}
}

// A request cut short mid-run is credited the whole steps run by then: a,
// aborted 3.5 steps into its run (which started at 1/64 s), generated 1 +
// 3; GeneratedBy says the same just before.
func TestMutAbortCreditsTheRunFromItsStart(t *testing.T) {
	w, a := decodeRunA(t)
	at := 1.0/64 + 3.5/512
	if got := w.GeneratedBy(at, a); got != 4 {
		t.Fatalf("GeneratedBy 3.5 steps in: %d, want 4", got)
	}
	if got := w.GeneratedBy(1.0/64, a); got != 1 {
		t.Fatalf("GeneratedBy at the run's start: %d, want 1", got)
	}
	w.Abort(at, a)
	if a.Generated() != 4 {
		t.Fatalf("aborted 3.5 steps in: generated %d, want 4", a.Generated())
	}
}

// Aborting a decoding request leaves the prompt being chunked in place
// (it still finishes), and aborting the chunked one leaves none.
func TestMutAbortAndTheChunkedPrefill(t *testing.T) {
	for _, abortChunked := range []bool{false, true} {
		w := stepWorker(t, 256)
		d := &Request{ID: 1, Kind: Full, Input: 10, Output: 50}
		big := &Request{ID: 2, Kind: Full, Input: 1000, Output: 2}
		w.Submit(0, d)
		w.Submit(0, big)
		w.Advance(0) // d's 10 tokens and big's first 246: big is chunked
		if w.chunked != big {
			t.Fatalf("big not chunked after the first step")
		}
		w.Advance(1.0 / 64) // d decodes from here; big's second chunk
		// Inside that prefill step d makes no token (no mixed chunks): no
		// decode step to credit, none to count as used.
		if w.plan.decodeK != 0 || w.GeneratedBy(1.5/64, d) != 1 {
			t.Fatalf("in big's second chunk: %d decode steps planned, d generated %d by 1.5/64 s; want 0 and 1", w.plan.decodeK, w.GeneratedBy(1.5/64, d))
		}
		if s := w.Sample(1.5 / 64); s.KVUsedTokens != w.Used() || s.KVReservedTokens != w.Reserved() {
			t.Fatalf("in big's second chunk: sample used %d reserved %d, want the pool's %d and %d", s.KVUsedTokens, s.KVReservedTokens, w.Used(), w.Reserved())
		}
		victim, other := d, big
		if abortChunked {
			victim, other = big, d
		}
		w.Abort(1.5/64, victim)
		if !abortChunked && d.Generated() != 1 {
			t.Fatalf("d aborted inside a prefill step: generated %d, want 1", d.Generated())
		}
		if abortChunked && w.chunked != nil || !abortChunked && w.chunked != big {
			t.Fatalf("abort chunked %v: chunked %v after the abort", abortChunked, w.chunked)
		}
		drive(w, 1.5/64)
		checkPool(t, w)
		if other.Stage != StageDone || other.Generated() != max(other.Output, 1) {
			t.Fatalf("abort chunked %v: the other request ended in stage %v with %d tokens", abortChunked, other.Stage, other.Generated())
		}
		if w.Used() != 0 || w.Reserved() != 0 || w.Running() != 0 {
			t.Fatalf("abort chunked %v: used %d reserved %d running %d at the end", abortChunked, w.Used(), w.Reserved(), w.Running())
		}
	}
}

// An aborted turn of a session stops counting as the session's request
// here: the session's in-flight count goes back to 0.
func TestMutAbortSessionTurn(t *testing.T) {
	w := sessionWorker(t, EvictSession, 50000)
	b := chain(1, 20)
	now := seedOn(t, w, 0, "s", b[:10], 640, 4)
	r := &Request{ID: 2, Kind: Full, Session: "s", KeepSession: true, Blocks: b, Input: 1280, Output: 4}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	if s := w.sess(SessionKey{ID: "s"}); s == nil || s.inflight != 1 || !r.sessCounted {
		t.Fatalf("after the second turn's Submit: session %+v, counted %v; want 1 in flight", s, r.sessCounted)
	}
	w.Abort(now, r)
	if s := w.sess(SessionKey{ID: "s"}); s.inflight != 0 || r.sessCounted {
		t.Fatalf("after its Abort: %d in flight, counted %v; want 0, false", s.inflight, r.sessCounted)
	}
	checkPool(t, w)
}

// Shortest first, a request that arrives while the queue is blocked on KV
// room goes in at the next step boundary when it fits: being shorter, it
// goes before the blocked one. d (100 + 401 tokens) decodes in a pool of
// 1,000; big (600 + 1) cannot have the 499 left and blocks the queue from
// the step boundary at 1/64 + 1/512 s; small (50 + 1) arrives 10.5 steps
// into the run, fits, and is admitted at the boundary 1/64 + 11/512: its
// prefill step (1/64 s) ends at 2/64 + 11/512 = 27/512 s. In arrival order
// it waits behind big until d's run ends, 1/64 + 400/512 s, and its
// arrival does not cut the run (nothing can be admitted before big).
func TestMutShortestFirstArrivalWhileBlocked(t *testing.T) {
	for _, shortest := range []bool{true, false} {
		p := *testProfile(t)
		p.Timing = model.Timing{PrefillOverheadS: 1.0 / 64, DecodeOverheadS: 1.0 / 512}
		w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1000, ShortestFirst: shortest})
		if err != nil {
			t.Fatal(err)
		}
		d := &Request{ID: 1, Kind: Full, Input: 100, Output: 401}
		big := &Request{ID: 2, Kind: Full, Input: 600, Output: 1}
		small := &Request{ID: 3, Kind: Full, Input: 50, Output: 1}
		w.Submit(0, d)
		advanceTo(w, 1.0/64) // d's prefill; its run of 400 steps starts
		w.Submit(1.0/64+0.5/512, big)
		advanceTo(w, 1.0/64+1.0/512) // big does not fit: blocked
		if !w.blocked || big.Stage != StageWaiting {
			t.Fatalf("shortest %v: big %v, blocked %v; want waiting and blocked", shortest, big.Stage, w.blocked)
		}
		w.Submit(1.0/64+10.5/512, small)
		// Shortest first the run (399 steps from 1/64 + 1/512) is cut at
		// its 10th step; in arrival order it runs on to d's end.
		wantK, wantEnd := 399, 1.0/64+400.0/512
		if shortest {
			wantK, wantEnd = 10, 1.0/64+11.0/512
		}
		if w.plan.decodeK != wantK || w.stepEnd != wantEnd {
			t.Fatalf("shortest %v: after small's arrival the run has %d steps to %v s, want %d to %v", shortest, w.plan.decodeK, w.stepEnd, wantK, wantEnd)
		}
		drive(w, 1.0/64+10.5/512)
		checkPool(t, w)
		if shortest && small.FirstTokenAt != 27.0/512 {
			t.Fatalf("shortest first: small's first token at %v s, want 27/512 = %v", small.FirstTokenAt, 27.0/512)
		}
		if !shortest && small.FirstTokenAt <= 1.0/64+400.0/512 {
			t.Fatalf("arrival order: small's first token at %v s, before d's run ends at %v", small.FirstTokenAt, 1.0/64+400.0/512)
		}
	}
}
