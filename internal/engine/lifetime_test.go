package engine

import (
	"math/rand/v2"
	"testing"
)

// TestRenewedRequestsChangeNothing drives two shortest-first workers with
// the same random requests, aborts and steps: one gets a new Request for
// each, the other reuses the Requests it is done with (finished, or
// aborted with Holds empty), filled again by Renew. Their events, in
// kind, request, time and tokens, and their Work must be the same: a
// Request is reusable exactly when Holds says so, and a reused one's
// stale watch entries of its earlier lives stay stale (an assignment in
// place of Renew starts the generation over, and the stale entries then
// make the order match requests again that no change touched: more Work).
// It also checks Holds on the finished and aborted ones, and that a
// Request the worker still queues is held.
func TestRenewedRequestsChangeNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bypass int
	}{{"shortest", 0}, {"shortest-bypass", 512}} {
		for seed := uint64(1); seed <= 4; seed++ {
			mk := func() *Worker {
				cfg := Config{Name: "w", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000, ChunkTokens: 1024,
					MaxRunning: 6, PrefixCache: true, ShortestFirst: true, MaxWaitS: 0.05}
				if tc.bypass > 0 {
					cfg.Session = SessionConfig{Enabled: true, BypassTokens: tc.bypass}
				}
				w, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			fresh, reuse := mk(), mk()
			rng := rand.New(rand.NewPCG(seed, 5))
			var liveF, liveR []*Request // the same requests, index for index
			var spare, aborted []*Request
			reused := 0
			now := 0.0
			drop := func(list []*Request, r *Request) []*Request {
				for i, x := range list {
					if x == r {
						return append(list[:i], list[i+1:]...)
					}
				}
				t.Fatalf("request %d not live", r.ID)
				return nil
			}
			for step := 0; step < 800; step++ {
				if rng.IntN(3) > 0 {
					fam := uint64(1 + rng.IntN(4))
					n := 1 + rng.IntN(40)
					blocks := chain(fam, n)
					for i := rng.IntN(n + 1); i < n; i++ {
						blocks[i] = uint64(step)<<40 | uint64(i)
					}
					in := (n-1)*16 + 1 + rng.IntN(16)
					n0 := Request{ID: int64(step), Kind: Full, Blocks: blocks, Input: in, Output: 1 + rng.IntN(8)}
					if tc.bypass > 0 {
						n0.Session = "s" + string(rune('a'+rng.IntN(20)))
					}
					f := new(Request)
					*f = n0
					var r *Request
					if k := len(spare); k > 0 {
						r, spare = spare[k-1], spare[:k-1]
						if where := reuse.Holds(r); where != "" {
							t.Fatalf("seed %d step %d: a spare request is held (%s)", seed, step, where)
						}
						r.Renew(n0)
						reused++
					} else {
						r = new(Request)
						*r = n0
					}
					errF, errR := fresh.Submit(now, f), reuse.Submit(now, r)
					if (errF == nil) != (errR == nil) {
						t.Fatalf("seed %d step %d: submit %v and %v", seed, step, errF, errR)
					}
					if errF == nil {
						liveF, liveR = append(liveF, f), append(liveR, r)
						if r.Stage == StageWaiting && reuse.Holds(r) == "" {
							t.Fatalf("seed %d step %d: a waiting request not held", seed, step)
						}
					} else {
						spare = append(spare, r)
					}
				}
				if len(liveF) > 0 && rng.IntN(25) == 0 {
					i := rng.IntN(len(liveF))
					f, r := liveF[i], liveR[i]
					fresh.Abort(now, f)
					reuse.Abort(now, r)
					liveF, liveR = drop(liveF, f), drop(liveR, r)
					aborted = append(aborted, r)
				}
				if t1, ok := fresh.NextTime(); ok {
					t2, _ := reuse.NextTime()
					if t1 != t2 {
						t.Fatalf("seed %d step %d: next times %v and %v", seed, step, t1, t2)
					}
					now = max(now, t1)
					fresh.Advance(now)
					reuse.Advance(now)
				} else {
					now += 0.001
				}
				evF, evR := fresh.TakeEvents(), reuse.TakeEvents()
				if len(evF) != len(evR) {
					t.Fatalf("seed %d step %d: %d and %d events", seed, step, len(evF), len(evR))
				}
				for i := range evF {
					a, b := evF[i], evR[i]
					if a.Kind != b.Kind || a.Time != b.Time || a.Tokens != b.Tokens || (a.Req == nil) != (b.Req == nil) ||
						a.Req != nil && a.Req.ID != b.Req.ID {
						t.Fatalf("seed %d step %d: event %d differs: %+v and %+v", seed, step, i, a, b)
					}
					if b.Kind == EvFinished {
						liveF, liveR = drop(liveF, a.Req), drop(liveR, b.Req)
						if where := reuse.Holds(b.Req); where != "" {
							t.Fatalf("seed %d step %d: finished request %d still held (%s)", seed, step, b.Req.ID, where)
						}
						spare = append(spare, b.Req)
					}
				}
				kept := aborted[:0]
				for _, r := range aborted {
					if reuse.Holds(r) == "" {
						spare = append(spare, r)
					} else {
						kept = append(kept, r)
					}
				}
				aborted = kept
				if fresh.Work() != reuse.Work() {
					t.Fatalf("seed %d step %d: work %d fresh, %d with reused requests", seed, step, fresh.Work(), reuse.Work())
				}
			}
			if reused < 100 {
				t.Fatalf("seed %d: only %d requests reused", seed, reused)
			}
		}
	}
}

// TestHoldsNamesTheRecord checks Holds against records made by hand.
func TestHoldsNamesTheRecord(t *testing.T) {
	w, err := New(Config{Name: "w", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000, ChunkTokens: 64,
		MaxRunning: 1, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Blocks: chain(1, 20), Input: 320, Output: 4}
	b := &Request{ID: 2, Kind: Full, Blocks: chain(2, 4), Input: 64, Output: 4}
	if w.Holds(a) != "" || w.Holds(nil) != "" {
		t.Fatal("a request never submitted is held")
	}
	if err := w.Submit(0, a); err != nil {
		t.Fatal(err)
	}
	if err := w.Submit(0, b); err != nil {
		t.Fatal(err)
	}
	if got := w.Holds(a); got != "waiting queue" {
		t.Errorf("a submitted: held by %q", got)
	}
	w.Advance(0) // plans the first step: a's first chunk
	if got := w.Holds(a); got != "chunked prefill" {
		t.Errorf("a prefilling in chunks: held by %q", got)
	}
	if got := w.Holds(b); got != "waiting queue" {
		t.Errorf("b waiting: held by %q", got)
	}
	w.Abort(0, a) // in the step in progress
	if got := w.Holds(a); got != "step in progress" {
		t.Errorf("a aborted mid-step: held by %q", got)
	}
	for i := 0; i < 100 && w.Holds(b) != ""; i++ {
		t2, ok := w.NextTime()
		if !ok {
			break
		}
		w.Advance(t2)
		if i == 0 && w.Holds(a) != "" {
			t.Errorf("a aborted: still held (%q) after its step ended", w.Holds(a))
		}
		w.TakeEvents()
	}
	if got := w.Holds(b); got != "" {
		t.Errorf("b finished: held by %q", got)
	}
}
