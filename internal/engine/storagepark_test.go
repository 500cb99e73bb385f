package engine

import "testing"

// A request waiting for its storage prefetch waits in the queue, not in a
// prefill step, so the worker runs other work meanwhile (SGLang's
// check_prefetch_progress). a's 2,048 tokens are in storage only
// (pastHost); its 2,064-token turn prefetches them over the Mooncake link
// in 5.469 ms (wait_complete). With the profile's figures: a 64-token
// prompt's step cb = 20.568 ms (eager step + compute), a's 16-token step
// after 2,048 cached ca = 20.152 ms, with the 3.65 ms PCIe load of the
// 2,048 beside it 20.228 ms (max(ca + load/48, load + ca/48)).
//   - a alone: parked 5.469 ms while the worker idles, admitted when its
//     pages are in: first token at 5.469 + 20.228 = 25.697 ms, as before;
//     but the GPU was busy 20.228 ms, not 25.697 (the wait was a step's).
//   - a with b, a new 64-token prompt arriving with it: b runs alone at
//     once (first token at 20.568 ms, where a step shared with a's
//     prefetch ended at 5.469 + ~20.7 ms), and a, parked, is admitted at
//     the end of b's step: its first token at 20.568 + 20.228 = 40.796 ms.
//   - a arriving 1 ms into b's decode run: admitted at the first decode
//     step boundary at or after its pages are in, within one decode step
//     (4.1 ms at this batch) of arrival + 5.469 ms.
func TestStoragePrefetchWaitsInTheQueue(t *testing.T) {
	mk := func() (*Worker, []uint64, float64) {
		w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchWaitComplete})
		a, now := pastHost(t, w)
		return w, a, now + 1
	}
	submit := func(w *Worker, at float64, rs ...*Request) {
		for _, r := range rs {
			if err := w.Submit(at, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("alone: the worker idles", func(t *testing.T) {
		w, a, start := mk()
		fetch := storageS(w, 2048)
		ca := overlapS(w, w.tm.PrefillStepS()+w.tm.PrefillWorkS(16, 2048), 2048)
		ra := &Request{ID: 5, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1}
		busy := w.stats.BusyS
		submit(w, start, ra)
		if w.Queued() != 1 {
			t.Fatalf("queued %d, want a", w.Queued())
		}
		drive(w, start)
		if ra.Stage != StageDone || !near(ra.AdmittedAt-start, fetch) || !near(ra.FirstTokenAt-start, fetch+ca) {
			t.Fatalf("a admitted at +%v, first token at +%v; want +%v and +%v", ra.AdmittedAt-start, ra.FirstTokenAt-start, fetch, fetch+ca)
		}
		if got := w.stats.BusyS - busy; !near(got, ca) {
			t.Fatalf("busy %v s, want the step's %v: the wait is idle", got, ca)
		}
		if !near(w.stats.StorageWaitS, fetch) || w.stats.StoragePrefetchedTokens != 2048 || len(w.parked) != 0 || w.parkWait {
			t.Fatalf("waited %v s for %d tokens, %d parked, idle wait %v; want %v for 2048, none left", w.stats.StorageWaitS,
				w.stats.StoragePrefetchedTokens, len(w.parked), w.parkWait, fetch)
		}
	})
	t.Run("another prompt runs meanwhile", func(t *testing.T) {
		w, a, start := mk()
		ra := &Request{ID: 5, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1}
		rb := &Request{ID: 6, Kind: Full, Session: "n", Blocks: chain(9, 4), Input: 64, Output: 1}
		submit(w, start, ra, rb)
		drive(w, start)
		cb := w.tm.PrefillStepS() + w.tm.PrefillWorkS(64, 0)
		ca := overlapS(w, w.tm.PrefillStepS()+w.tm.PrefillWorkS(16, 2048), 2048)
		if !near(rb.FirstTokenAt-start, cb) {
			t.Fatalf("b's first token at +%v, want +%v: alone, not behind a's prefetch", rb.FirstTokenAt-start, cb)
		}
		if !near(ra.AdmittedAt-start, cb) || !near(ra.FirstTokenAt-start, cb+ca) || ra.CachedTokens != 2048 {
			t.Fatalf("a admitted at +%v with %d cached, first token at +%v; want +%v, 2048, +%v", ra.AdmittedAt-start, ra.CachedTokens, ra.FirstTokenAt-start, cb, cb+ca)
		}
	})
	t.Run("a decode run is cut when its pages are in", func(t *testing.T) {
		w, a, start := mk()
		rb := &Request{ID: 6, Kind: Full, Session: "n", Blocks: chain(9, 4), Input: 64, Output: 200}
		submit(w, start, rb)
		cb := w.tm.PrefillStepS() + w.tm.PrefillWorkS(64, 0)
		at := start + cb + 0.001
		for {
			next, ok := w.NextTime()
			if !ok || next > at {
				break
			}
			w.Advance(next)
		}
		ra := &Request{ID: 5, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1}
		submit(w, at, ra)
		drive(w, at)
		ready := at + storageS(w, 2048)
		step := w.tm.DecodeStepS(w.mdl, 1, 64+200)
		if ra.Stage != StageDone || ra.AdmittedAt < ready-1e-12 || ra.AdmittedAt > ready+step {
			t.Fatalf("a admitted at %v; want within a decode step (%v s) after its pages are in at %v", ra.AdmittedAt, step, ready)
		}
		// b's 200 tokens (about 0.8 s of decode steps) end after a's
		// admission: the cut run ends later than it began.
		if rb.Stage != StageDone || rb.Generated() != 200 || rb.FinishedAt <= ra.AdmittedAt {
			t.Fatalf("b in stage %d with %d tokens, finished at %v, a admitted at %v", rb.Stage, rb.Generated(), rb.FinishedAt, ra.AdmittedAt)
		}
	})
}

// An aborted parked request leaves the worker with nothing to wait for,
// and a new arrival during an idle wait is planned at once.
func TestStorageParkedAbortAndArrival(t *testing.T) {
	w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchWaitComplete})
	a, now := pastHost(t, w)
	start := now + 1
	ra := &Request{ID: 5, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1}
	if err := w.Submit(start, ra); err != nil {
		t.Fatal(err)
	}
	w.Advance(start) // plans: a parks, the worker waits idle for its pages
	if len(w.parked) != 1 || !w.parkWait {
		t.Fatalf("%d parked, idle wait %v; want a parked and an idle wait", len(w.parked), w.parkWait)
	}
	if next, ok := w.NextTime(); !ok || !near(next, start+storageS(w, 2048)) {
		t.Fatalf("next %v (%v), want when a's pages are in", next, ok)
	}
	rb := &Request{ID: 6, Kind: Full, Session: "n", Blocks: chain(9, 4), Input: 64, Output: 1}
	if err := w.Submit(start+0.001, rb); err != nil {
		t.Fatal(err)
	}
	if next, ok := w.NextTime(); !ok || !near(next, start+0.001) {
		t.Fatalf("after an arrival the worker plans at %v (%v), want at once", next, ok)
	}
	w.Abort(start+0.001, ra)
	if len(w.parked) != 0 || w.Queued() != 1 {
		t.Fatalf("%d parked, %d queued after the abort; want 0 and b", len(w.parked), w.Queued())
	}
	drive(w, start+0.001)
	if rb.Stage != StageDone || ra.Stage != StageAborted {
		t.Fatalf("b in stage %d, a in %d", rb.Stage, ra.Stage)
	}
}
