package emulator

import (
	"math"
	"strings"
	"testing"
	"time"
)

// expectedColo is the engine model's timing for one request alone on an
// idle colocated worker: the prefill step (its first token at its end),
// then one decode run of out−1 steps.
func expectedColo(t *testing.T, in, out int) (ttft float64, steps []float64) {
	p := testProfile(t)
	tm := p.Timing
	ttft = tm.PrefillS(in, 0)
	base := tm.DecodeStepS(p.Model, 1, int64(in+1))
	at := ttft
	for j := 0; j < out-1; j++ {
		at += base + tm.DecodePerCtxTokenS*float64(j)
		steps = append(steps, at)
	}
	return ttft, steps
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestColoNonStreamExactTiming: with a fake clock, the answer's
// e2e_latency and TTFT are exactly the engine model's.
func TestColoNonStreamExactTiming(t *testing.T) {
	clk := NewFakeClock()
	cfg := colo()
	cfg.Clock = clk
	s := start(t, cfg)
	const in, out = 1000, 5
	done := make(chan struct{})
	var status int
	var body []byte
	go func() {
		defer close(done)
		status, body = post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, in), "rid": "r1", "sampling_params": map[string]any{"max_new_tokens": out}})
	}()
	driveFake(t, clk, done, 10*time.Second)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	o := decodeOut(t, body)
	ttft, steps := expectedColo(t, in, out)
	m := o.MetaInfo
	if m.ID != "r1" || m.PromptTokens != in || m.CompletionTokens != out || m.CachedTokens != 0 {
		t.Fatalf("meta_info %+v", m)
	}
	if m.FinishReason == nil || m.FinishReason.Type != "length" || m.FinishReason.Length == nil || *m.FinishReason.Length != out {
		t.Fatalf("finish_reason %+v", m.FinishReason)
	}
	if !near(m.E2ELatency, steps[len(steps)-1], 1e-9) || m.Emulator == nil || m.Emulator.TTFT == nil || !near(*m.Emulator.TTFT, ttft, 1e-9) {
		t.Fatalf("e2e %v ttft %v; want %v and %v", m.E2ELatency, m.Emulator.TTFT, steps[len(steps)-1], ttft)
	}
	if len(o.OutputIDs) != out {
		t.Fatalf("output_ids %v", o.OutputIDs)
	}
	for i, id := range o.OutputIDs {
		if id != OutputToken("r1", i) {
			t.Fatalf("output id %d = %d, want OutputToken(r1, %d) = %d", i, id, i, OutputToken("r1", i))
		}
	}
	if o.Text != outputText(o.OutputIDs) || len(o.Text) != 4*out {
		t.Fatalf("text %q", o.Text)
	}
}

// TestColoStreamEveryToken: streamed, every token arrives in its own event
// at its decode step's end (model time in e2e_latency), text and ids
// cumulative, then a final event with finish_reason and [DONE].
func TestColoStreamEveryToken(t *testing.T) {
	clk := NewFakeClock()
	cfg := colo()
	cfg.Clock = clk
	s := start(t, cfg)
	const in, out = 3000, 6
	done := make(chan struct{})
	var evs []GenerateOut
	var fin bool
	got := make(chan struct{}, 64)
	go func() {
		defer close(done)
		evs, _, fin = streamEach(t, s.URL(), map[string]any{"input_ids": ids(5, in), "rid": "s1", "sampling_params": map[string]any{"max_new_tokens": out}}, func() { got <- struct{}{} })
	}()
	// After each step, wait for the client to read the step's token (or,
	// when the step made none, for a bound), so none coalesce. The bound is
	// long: a loaded machine once took over 20 ms to read one, and two
	// tokens came as one event.
	driveFake(t, clk, done, 10*time.Second, func() {
		select {
		case <-got:
		case <-time.After(time.Second):
		}
	})
	if !fin {
		t.Fatal("no [DONE]")
	}
	ttft, steps := expectedColo(t, in, out)
	want := append([]float64{ttft}, steps...)
	// One event per token; the last token's event is the final one.
	if len(evs) != out {
		for _, e := range evs {
			t.Logf("%d tokens at %v finish %+v", e.MetaInfo.CompletionTokens, e.MetaInfo.E2ELatency, e.MetaInfo.FinishReason)
		}
		t.Fatalf("%d events, want %d", len(evs), out)
	}
	for i, e := range evs {
		m := e.MetaInfo
		if m.CompletionTokens != i+1 || len(e.OutputIDs) != i+1 || e.Text != outputText(e.OutputIDs) {
			t.Fatalf("event %d: %d tokens, ids %v", i, m.CompletionTokens, e.OutputIDs)
		}
		if !near(m.E2ELatency, want[i], 1e-6) {
			t.Errorf("event %d at %.9f, want %.9f", i, m.E2ELatency, want[i])
		}
		if (m.FinishReason != nil) != (i == out-1) {
			t.Errorf("event %d finish_reason %+v", i, m.FinishReason)
		}
	}
}

// TestPrefixReuse: a second request sharing the first's prompt (and
// continuing its output) reports the shared whole blocks as cached_tokens.
func TestPrefixReuse(t *testing.T) {
	s := start(t, Config{Role: 0, TimeScale: 1000})
	first := ids(11, 700)
	st, b := post(t, s.URL()+"/generate", map[string]any{"input_ids": first, "rid": "a", "sampling_params": map[string]any{"max_new_tokens": 200}})
	if st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	o := decodeOut(t, b)
	if o.MetaInfo.CachedTokens != 0 {
		t.Fatalf("cold request cached %d", o.MetaInfo.CachedTokens)
	}
	// Turn 2: the whole conversation so far plus an append.
	second := append(append(append([]int{}, first...), o.OutputIDs...), ids(99, 50)...)
	st, b = post(t, s.URL()+"/generate", map[string]any{"input_ids": second, "rid": "b", "sampling_params": map[string]any{"max_new_tokens": 4}})
	if st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	o2 := decodeOut(t, b)
	// 700 prompt tokens = 10 whole blocks of 64 (640) + 60; the output (199
	// tokens with KV) brings whole blocks up to (700+199)/64 = 14 blocks.
	if got, want := o2.MetaInfo.CachedTokens, 14*64; got != want {
		t.Fatalf("turn 2 cached_tokens %d, want %d", got, want)
	}
	// An unrelated prompt shares nothing.
	st, b = post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(12345, 700), "rid": "c", "sampling_params": map[string]any{"max_new_tokens": 1}})
	if o3 := decodeOut(t, b); st != 200 || o3.MetaInfo.CachedTokens != 0 {
		t.Fatalf("unrelated: %d cached %d", st, o3.MetaInfo.CachedTokens)
	}
	// Text prompts share prefixes too (4 bytes a token).
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 40)
	post(t, s.URL()+"/generate", map[string]any{"text": text, "rid": "t1", "sampling_params": map[string]any{"max_new_tokens": 1}})
	st, b = post(t, s.URL()+"/generate", map[string]any{"text": text + "and again", "rid": "t2", "sampling_params": map[string]any{"max_new_tokens": 1}})
	if o4 := decodeOut(t, b); st != 200 || o4.MetaInfo.PromptTokens != (len(text)+9+3)/4 || o4.MetaInfo.CachedTokens != len(text)/4/64*64 {
		t.Fatalf("text: %d prompt %d cached %d", st, o4.MetaInfo.PromptTokens, o4.MetaInfo.CachedTokens)
	}
}

// TestTimerSweep: cancelled timeouts do not pile up in the driver.
func TestTimerSweep(t *testing.T) {
	d := &driver{}
	for i := range 100000 {
		d.after(float64(i), func(float64) {}).cancel()
	}
	live := d.after(1e9, func(float64) {})
	if len(d.timers) > 4096 {
		t.Fatalf("%d timers kept for 1 live one", len(d.timers))
	}
	n := 0
	for _, x := range d.timers {
		if !x.cancelled {
			n++
			if x != live {
				t.Fatal("a cancelled timer is live")
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d live timers, want 1", n)
	}
}
