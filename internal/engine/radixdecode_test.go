package engine

import "testing"

func radixDecoder(t *testing.T, local bool, pool int64) *Worker {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool,
		DecodeRadix: true, LocalPrefill: local})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// receive runs one PD decode leg on w and returns the prompt tokens its
// cache already held at the reservation (the part P need not send).
func receive(t *testing.T, w *Worker, now float64, id int64, blocks []uint64, input, output int) (int, float64) {
	t.Helper()
	r := &Request{ID: id, Kind: DecodeOnly, Session: "s", KeepSession: true, Blocks: blocks, Input: input, Output: output}
	if err := w.Reserve(now, r); err != nil {
		t.Fatal(err)
	}
	if ev := w.TakeEvents(); len(ev) != 1 || ev[0].Kind != EvReserved {
		t.Fatalf("reservation events %v", ev)
	}
	cached := r.CachedTokens
	if err := w.StartDecode(now, r); err != nil {
		t.Fatal(err)
	}
	end, _ := drive(w, now)
	checkPool(t, w)
	return cached, end
}

// The decode radix cache: a second turn that extends the first one's
// prompt and output reserves (and so receives) only the tokens beyond what
// the decoder holds: turn 1's 6,400 prompt tokens plus the 64-token block
// its output filled, and the partial block ids of turn 1 become whole.
func TestDecodeRadixReservesOnlyTheDelta(t *testing.T) {
	w := radixDecoder(t, false, 50000)
	b := chain(1, 120)
	cached, now := receive(t, w, 0, 1, b[:100], 6400, 65) // 64 output tokens with KV
	if cached != 0 {
		t.Fatalf("cold decoder: %d cached, want 0", cached)
	}
	if w.CachedTokens() != 6400+64 {
		t.Fatalf("after turn 1 the cache holds %d tokens, want the 6,400-token prompt and its 64-token output", w.CachedTokens())
	}
	cached, _ = receive(t, w, now+1, 2, b, 7680, 5)
	if cached != 6464 {
		t.Fatalf("turn 2 matched %d tokens, want 6,464 (prompt + output of turn 1)", cached)
	}
	if w.Stats().CachedTokens != 6464 {
		t.Fatalf("stats count %d cached tokens, want 6,464", w.Stats().CachedTokens)
	}
	// A fully cached prompt still receives its last token.
	cached, _ = receive(t, w, now+2, 3, b, 7680, 2)
	if cached != 7679 {
		t.Fatalf("a repeated prompt matched %d, want 7,679 (all but the last token)", cached)
	}
}

// A plain decoder cannot prefill; one with local prefill takes a Full
// request and reuses its cache for it.
func TestDecodeRadixLocalPrefill(t *testing.T) {
	b := chain(2, 50)
	r := &Request{ID: 1, Kind: Full, Session: "s", Blocks: b, Input: 3200, Output: 3}
	if err := radixDecoder(t, false, 50000).Submit(0, r); err == nil {
		t.Fatal("a decode radix cache without local prefill took a prefill")
	}
	w := radixDecoder(t, true, 50000)
	_, now := receive(t, w, 0, 1, b[:40], 2560, 2)
	r = &Request{ID: 2, Kind: Full, Session: "s", Blocks: b, Input: 3200, Output: 3}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	drive(w, now)
	checkPool(t, w)
	if r.CachedTokens != 2560 || w.Stats().PrefillTokens != 640 {
		t.Fatalf("local prefill cached %d and computed %d tokens, want 2,560 and 640", r.CachedTokens, w.Stats().PrefillTokens)
	}
}

// A reservation that must wait for room does not keep its prefix locked.
func TestDecodeRadixWaitUnlocks(t *testing.T) {
	w := radixDecoder(t, false, 8000)
	b := chain(3, 100)
	big := &Request{ID: 1, Kind: DecodeOnly, Session: "a", KeepSession: true, Blocks: chain(4, 100), Input: 6400, Output: 10}
	if err := w.Reserve(0, big); err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 2, Kind: DecodeOnly, Session: "b", KeepSession: true, Blocks: b, Input: 6400, Output: 10}
	if err := w.Reserve(0, r); err != nil {
		t.Fatal(err)
	}
	if r.Stage != StageWaiting || r.locked {
		t.Fatalf("second reservation: stage %d locked %v, want waiting and unlocked", r.Stage, r.locked)
	}
	w.Abort(0, big)
	if r.Stage != StageReserved {
		t.Fatalf("after the abort the reservation is in stage %d, want reserved", r.Stage)
	}
	w.Abort(0, r)
	checkPool(t, w)
	if w.Used() != 0 || w.Reserved() != 0 {
		t.Fatalf("used %d reserved %d after both aborts", w.Used(), w.Reserved())
	}
}

// CachedFor counts the session's last output as cached (the KV events of
// a real decoder would have): after a 6,400-token prompt with 130 output
// tokens, the next prompt of 6,400 + 300 tokens has 6,528 tokens cached
// (two whole output blocks), where the radix match alone sees 6,400.
func TestCachedForCountsTheOutputTail(t *testing.T) {
	w := radixDecoder(t, false, 50000)
	b := chain(5, 105)
	_, now := receive(t, w, 0, 1, b[:100], 6400, 131)
	_ = now
	if got := w.PrefixMatch(b, 6700); got != 6400 {
		t.Fatalf("radix match %d, want 6,400", got)
	}
	if got := w.CachedFor("s", b, 6700); got != 6528 {
		t.Fatalf("CachedFor %d, want 6,528", got)
	}
	if got := w.CachedFor("other", b, 6700); got != 6400 {
		t.Fatalf("another session's view %d, want 6,400 (the tail is s's)", got)
	}
}
