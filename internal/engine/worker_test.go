package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

func testProfile(t testing.TB) *model.Profile {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// drive advances w until idle, returning its events.
func drive(w *Worker, now float64) (float64, []Event) {
	var evs []Event
	for {
		t, ok := w.NextTime()
		if !ok {
			return now, evs
		}
		now = t
		w.Advance(now)
		evs = append(evs, w.TakeEvents()...)
	}
}

func checkPool(t *testing.T, w *Worker) {
	t.Helper()
	if w.own < 0 || w.reserved < 0 || w.Used() < 0 {
		t.Fatalf("%s: negative accounting own=%d reserved=%d used=%d", w.cfg.Name, w.own, w.reserved, w.Used())
	}
	if w.Used()+w.reserved > w.capacity {
		t.Fatalf("%s: used %d + reserved %d > capacity %d", w.cfg.Name, w.Used(), w.reserved, w.capacity)
	}
	if w.tree != nil {
		if err := w.tree.Check(); err != nil {
			t.Fatal(err)
		}
	}
	var tails int64
	w.tails.Each(func(tl *outputTail) {
		if got, _ := w.tails.Get(tl.session); !tl.live || got != tl || tl.tokens <= 0 {
			t.Fatalf("%s: bad output tail %+v for session %v", w.cfg.Name, tl, tl.session)
		}
		tails += tl.tokens
	})
	if tails != w.tailTokens {
		t.Fatalf("%s: output tails hold %d tokens, counter says %d", w.cfg.Name, tails, w.tailTokens)
	}
	resident, pinned := 0, 0
	var oldest *dSession
	w.dsess.Each(func(s *dSession) {
		if s.pinned || s.inflight > 0 {
			resident++
		}
		if !s.pinned {
			return
		}
		pinned++
		if s.inflight > 0 && w.cfg.Session.Trim == TrimIdle {
			return
		}
		if oldest == nil || s.lastUse < oldest.lastUse || (s.lastUse == oldest.lastUse && s.id < oldest.id) {
			oldest = s
		}
	})
	if pinned != w.nPinned {
		t.Fatalf("%s: %d pinned sessions, counter says %d", w.cfg.Name, pinned, w.nPinned)
	}
	if resident != w.nResident {
		t.Fatalf("%s: %d resident sessions, counter says %d", w.cfg.Name, resident, w.nResident)
	}
	// The trim order's heap finds the session a scan of the pinned ones would.
	if got := w.oldestPinned(""); got != oldest {
		t.Fatalf("%s: the trim order's oldest pinned session is %v, a scan says %v", w.cfg.Name, got, oldest)
	}
}

// TestWorkerKVProperty drives colocated and prefill workers with random
// sessions on a small pool, checking after every call that KV use is never
// negative nor above the pool, and that every request ends exactly once.
func TestWorkerKVProperty(t *testing.T) {
	p := testProfile(t)
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		role := RoleColocated
		if seed%3 == 0 {
			role = RolePrefill
		}
		w, err := New(Config{Name: "w", Role: role, Profile: p, BlockSize: 16, PoolTokens: 4000 + int64(rng.IntN(4000)),
			ChunkTokens: 512, MaxRunning: 1 + rng.IntN(8), PrefixCache: true, MixedChunk: seed%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		chains := make([][]uint64, 5)
		now := 0.0
		ended := map[int64]int{}
		var live []*Request
		var held []*Request
		for i := 0; i < 300; i++ {
			now += rng.Float64() * 0.05
			// advance through due steps
			for {
				tn, ok := w.NextTime()
				if !ok || tn > now {
					break
				}
				w.Advance(tn)
				for _, ev := range w.TakeEvents() {
					switch ev.Kind {
					case EvFinished:
						ended[ev.Req.ID]++
					case EvPrefillDone:
						held = append(held, ev.Req)
					}
				}
				checkPool(t, w)
			}
			switch op := rng.IntN(10); {
			case op < 6:
				s := rng.IntN(len(chains))
				for k := rng.IntN(20) + 1; k > 0; k-- {
					chains[s] = append(chains[s], uint64(s)<<40|uint64(len(chains[s])+1))
				}
				if len(chains[s])*16 > 2000 {
					chains[s] = chains[s][:1]
				}
				input := (len(chains[s])-1)*16 + 1 + rng.IntN(16)
				kind := Full
				if role == RolePrefill {
					kind = PrefillOnly
				}
				r := &Request{ID: int64(i), Kind: kind, Blocks: append([]uint64(nil), chains[s]...), Input: input, Output: 1 + rng.IntN(40),
					Session: string(rune('a' + s))}
				if err := w.Submit(now, r); err != nil {
					ended[r.ID]++ // refused up front: accounted for by the caller
				} else {
					live = append(live, r)
				}
			case op < 8 && len(held) > 0:
				r := held[0]
				held = held[1:]
				if err := w.Release(now, r); err != nil {
					t.Fatal(err)
				}
				ended[r.ID]++
			case len(live) > 0:
				r := live[rng.IntN(len(live))]
				if r.Stage != StageDone && r.Stage != StageAborted && r.Stage != StageHeld {
					w.Abort(now, r)
					ended[r.ID]++
				}
			}
			for _, ev := range w.TakeEvents() {
				if ev.Kind == EvFinished {
					ended[ev.Req.ID]++
				}
				if ev.Kind == EvPrefillDone {
					held = append(held, ev.Req)
				}
			}
			checkPool(t, w)
		}
		// Let everything finish, releasing held prefills.
		for {
			var evs []Event
			now, evs = drive(w, now)
			for _, ev := range evs {
				switch ev.Kind {
				case EvFinished:
					ended[ev.Req.ID]++
				case EvPrefillDone:
					held = append(held, ev.Req)
				}
			}
			if len(held) == 0 {
				break
			}
			for _, r := range held {
				w.Release(now, r)
				ended[r.ID]++
			}
			held = nil
			for _, ev := range w.TakeEvents() {
				if ev.Kind == EvFinished {
					ended[ev.Req.ID]++
				}
			}
		}
		checkPool(t, w)
		for _, r := range live {
			if ended[r.ID] != 1 {
				t.Fatalf("seed %d: request %d ended %d times (stage %d)", seed, r.ID, ended[r.ID], r.Stage)
			}
		}
		if w.own != 0 || w.reserved != 0 || w.Running() != 0 || w.tree.EvictableTokens() != w.tree.Tokens() ||
			w.CachedTokens() != w.Used() {
			t.Fatalf("seed %d: idle worker holds own=%d reserved=%d running=%d", seed, w.own, w.reserved, w.Running())
		}
	}
}

// TestDecodeRunIsArithmetic: a decode run over a fixed batch costs the sum
// of its steps, a request joining mid-run waits for the step boundary, and a
// DecodeOnly request's first token (sampled on P, sent with the KV) is
// emitted when it joins, with no forward of its own.
func TestDecodeRunIsArithmetic(t *testing.T) {
	p := testProfile(t)
	step := func(b int, ctx int64) float64 { return p.Timing.DecodeStepS(p.Model, b, ctx) }
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: p, BlockSize: 64})
	a := &Request{ID: 1, Kind: DecodeOnly, Input: 1000, Output: 100}
	w.Reserve(0, a)
	w.StartDecode(0, a)
	w.Advance(0) // the plan made at the owner's first Advance
	for _, ev := range w.TakeEvents() {
		if ev.Kind != EvReserved && !(ev.Kind == EvFirstToken && ev.Req == a && ev.Time == 0) {
			t.Fatalf("unexpected event %v at %v", ev.Kind, ev.Time)
		}
	}
	// b arrives in the middle of a's third step; a's context holds its
	// prompt and the tokens generated so far.
	b := &Request{ID: 2, Kind: DecodeOnly, Input: 2000, Output: 3}
	w.Reserve(0, b)
	at := step(1, 1001) + step(1, 1002)
	w.StartDecode(at+step(1, 1003)/2, b)
	end, ok := w.NextTime()
	wantEnd := at + step(1, 1003)
	if !ok || end-wantEnd > 1e-12 || wantEnd-end > 1e-12 {
		t.Fatalf("run cut at %v, want end of step 3 at %v", end, wantEnd)
	}
	w.Advance(end)
	var bFirst float64 = -1
	for _, ev := range w.TakeEvents() {
		switch {
		case ev.Kind == EvReserved:
		case ev.Kind == EvFirstToken && ev.Req == b:
			bFirst = ev.Time
		default:
			t.Fatalf("unexpected event %v", ev.Kind)
		}
	}
	if bFirst != end {
		t.Fatalf("b's first token at %v, want its join at %v", bFirst, end)
	}
	// Next step holds both: batch 2, context (1000 + 4) + (2000 + 1).
	next, _ := w.NextTime()
	if got, want := next-end, step(2, 3005); got < want-1e-12 {
		t.Fatalf("two-request step %v shorter than %v", got, want)
	}
	_, evs := drive(w, end)
	var bDone float64
	for _, ev := range evs {
		if ev.Req == b && ev.Kind == EvFinished {
			bDone = ev.Time
		}
	}
	if want := end + step(2, 3005) + step(2, 3007); !near(bDone, want) {
		t.Fatalf("b finished at %v, want two steps after joining, %v", bDone, want)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func testProfileB() (*model.Profile, error) { return model.Builtin("qwen3-30b-a3b", "h200-141g") }

// TestFullHitNeverStuck: a prompt that fills the pool, sent twice, is
// admitted the second time from a full cache hit (its locked prefix plus
// one recomputed token plus its output fit), and the queue behind it moves.
// KV waits count requests, not scheduling attempts.
func TestFullHitNeverStuck(t *testing.T) {
	p := testProfile(t)
	w, _ := New(Config{Name: "w", Profile: p, BlockSize: 10, PoolTokens: 1000, PrefixCache: true})
	blocks := make([]uint64, 99)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	big := func(id int64) *Request { return &Request{ID: id, Kind: Full, Blocks: blocks, Input: 990, Output: 9} }
	if err := w.Submit(0, &Request{ID: 9, Kind: Full, Blocks: blocks, Input: 990, Output: 10}); err == nil {
		t.Fatal("a request whose footprint is pool+1 was accepted")
	}
	a, b := big(1), big(2)
	small := &Request{ID: 3, Kind: Full, Blocks: []uint64{500}, Input: 5, Output: 2}
	for _, r := range []*Request{a, b, small} {
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err)
		}
	}
	_, evs := drive(w, 0)
	done := map[int64]bool{}
	for _, ev := range evs {
		if ev.Kind == EvFinished {
			done[ev.Req.ID] = true
		}
	}
	if !done[1] || !done[2] || !done[3] {
		t.Fatalf("finished %v, want all three", done)
	}
	if b.CachedTokens != 989 {
		t.Fatalf("second copy cached %d tokens, want 989 (all but the recomputed last)", b.CachedTokens)
	}
	if got := w.Stats().KVWaits; got != 2 {
		t.Fatalf("KV waits %d, want 2 (b and small each waited once)", got)
	}
}
