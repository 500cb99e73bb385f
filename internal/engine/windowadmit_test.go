package engine

import (
	"errors"
	"testing"
)

// windowAdmitProfile is windowProfile with a 64-token step budget: a
// sliding layer of one request then holds at most windowHoldCap =
// ceil((32 − 1 + 64) / 16) · 16 + 16 = 112 tokens.
func windowAdmitProfile(sliding int, pool int64) Config {
	cfg := windowProfile(sliding)
	cfg.ChunkTokens = 64
	cfg.PoolTokens = pool
	return cfg
}

// runChecked drives w to idle, failing t if the pool is ever over-committed
// (used + reserved over the capacity) at a step boundary, and returns each
// request's first-token and finish times.
func runChecked(t *testing.T, w *Worker) (first, done map[int64]float64) {
	t.Helper()
	first, done = map[int64]float64{}, map[int64]float64{}
	now := 0.0
	if _, busy := w.NextTime(); !busy {
		w.Advance(now)
	}
	for {
		if u := w.Used() + w.Reserved(); u > w.Capacity() {
			t.Fatalf("at %v: %d used + %d reserved over the %d-token pool", now, w.Used(), w.Reserved(), w.Capacity())
		}
		for _, ev := range w.TakeEvents() {
			switch ev.Kind {
			case EvFirstToken:
				first[ev.Req.ID] = ev.Time
			case EvFinished:
				done[ev.Req.ID] = ev.Time
			}
		}
		next, ok := w.NextTime()
		if !ok {
			return first, done
		}
		now = next
		w.Advance(now)
	}
}

func TestWindowHoldCap(t *testing.T) {
	w, err := New(windowAdmitProfile(1, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.windowHoldCap(); got != 112 {
		t.Errorf("windowHoldCap %d, want 112", got)
	}
}

// vLLM admits a long prompt of a model with sliding layers for its full
// layers' whole prompt and its sliding layers' window and chunk only
// (get_num_blocks_to_allocate counts from the skipped blocks on). Pool of
// 450 tokens, one sliding layer of two: A (400-token prompt, 40 output
// tokens) holds 400 − (400 − 112) / 2 = 256 pool tokens from its admission
// (and 1 reserved for its first token). Its prefill takes the whole
// 64-token budget of six steps (6 · 0.0164 = 0.0984); the seventh carries
// A's last 16 tokens and 48 of B's (100, 4), which needs 101 of the 193
// free: 0.010 + 64 · 1e-4 = 0.0164 → A's first token at 0.1148, then B's
// other 52 tokens with A's decode (0.010 + 0.0052 + 0.001 = 0.0162) →
// B's first token at 0.1310, before A ends. At every layer's charge A
// takes 401 and B waits for A to end.
func TestVLLMWindowAdmitsTheSlidingLayersWindowOnly(t *testing.T) {
	w, err := New(windowAdmitProfile(1, 450))
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 400, Output: 40}
	b := &Request{ID: 2, Kind: Full, Input: 100, Output: 4}
	if err := w.Submit(0, a); err != nil {
		t.Fatal(err)
	}
	if err := w.Submit(0, b); err != nil {
		t.Fatal(err)
	}
	w.Advance(0)
	if got := a.windowFreed(); got != 144 {
		t.Errorf("A frees %d pool tokens from its admission, want (400 − 112) / 2 = 144", got)
	}
	if got := w.Used(); got != 256 {
		t.Errorf("%d pool tokens used after A's admission, want 256", got)
	}
	first, done := runChecked(t, w)
	if !near(first[1], 0.1148) || !near(first[2], 0.1310) || done[1] <= first[2] {
		t.Errorf("first tokens A %v, B %v, A done %v; want 0.1148, 0.1310, later", first[1], first[2], done[1])
	}
	if len(done) != 2 || w.Stats().Preemptions != 0 {
		t.Errorf("finished %v with %d preemptions, want both, none", done, w.Stats().Preemptions)
	}
	if w.Used() != 0 || w.windowFreedNow() != 0 || w.Reserved() != 0 {
		t.Errorf("idle: %d used, %d freed, %d reserved; want 0", w.Used(), w.windowFreedNow(), w.Reserved())
	}
}

// A request longer than the pool fits an all-sliding model (Mistral-7B's
// window on every layer) when its window does, as in vLLM, whose startup
// check of max_model_len charges a sliding group windowHoldCap only. In a
// 200-token pool a 300-token prompt with 10 output tokens needs at most
// 112 (+ up to a block, as the freed tokens are whole blocks); it runs in chunks of 64, 64, 64, 64, 44 (4 · 0.0164 + 0.0144 =
// 0.080 to its first token) and 9 decode steps of 0.006 (0.134). With a
// full layer beside the sliding one it needs up to 310 − (310 − 112 − 32)
// / 2 = 227 tokens: too large, with the message of old. Without sliding
// layers too.
func TestVLLMAllSlidingRequestLongerThanThePool(t *testing.T) {
	for _, c := range []struct {
		sliding  int
		tooLarge bool
	}{{2, false}, {1, true}, {0, true}} {
		cfg := windowAdmitProfile(c.sliding, 200)
		cfg.Profile.Model.Layers = 2
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = w.Submit(0, &Request{ID: 1, Kind: Full, Input: 300, Output: 10})
		if c.tooLarge {
			if !errors.Is(err, ErrTooLarge) || err.Error() != ErrTooLarge.Error()+" (310 tokens, pool 200)" {
				t.Errorf("sliding %d: %v, want %v (310 tokens, pool 200)", c.sliding, err, ErrTooLarge)
			}
			continue
		}
		if err != nil {
			t.Fatalf("sliding %d: %v", c.sliding, err)
		}
		w.Advance(0)
		// Admitted at once: 300 − ⌊(300 − 112) / 16⌋ · 16 = 124 tokens held
		// (the freed tokens are whole blocks), 1 reserved for its first token.
		if w.Used() != 124 || w.Reserved() != 1 {
			t.Errorf("after admission: %d used, %d reserved; want 124, 1", w.Used(), w.Reserved())
		}
		first, done := runChecked(t, w)
		if !near(first[1], 0.080) || !near(done[1], 0.134) {
			t.Errorf("first token %v, done %v; want 0.080, 0.134", first[1], done[1])
		}
		if w.Used() != 0 || w.windowFreedNow() != 0 {
			t.Errorf("idle: %d used, %d freed; want 0, 0", w.Used(), w.windowFreedNow())
		}
	}
}

// The too-large check never lets in a request its own admission could not
// take: all-sliding, a 300-token prompt with 10 output tokens needs at most
// 310 − (310 − 112 − 32) = 144 pool tokens; it takes 124 (+1 reserved)
// at admission. In a 144-token pool it runs to its end; in 143 it is too
// large.
func TestVLLMWindowPeakCoversTheAdmission(t *testing.T) {
	for _, c := range []struct {
		pool     int64
		tooLarge bool
	}{{144, false}, {143, true}, {120, true}} {
		cfg := windowAdmitProfile(2, c.pool)
		cfg.Profile.Model.Layers = 2
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = w.Submit(0, &Request{ID: 1, Kind: Full, Input: 300, Output: 10})
		if (err != nil) != c.tooLarge {
			t.Fatalf("pool %d: %v, want too large %v", c.pool, err, c.tooLarge)
		}
		if err != nil {
			continue
		}
		if _, done := runChecked(t, w); len(done) != 1 {
			t.Errorf("pool %d: the request never ended", c.pool)
		}
	}
}
