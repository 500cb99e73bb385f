package engine

import (
	"fmt"
	"testing"
)

// appendRun is what 16 sessions decoding on one decoder see when a direct
// append of appendTok uncached tokens (0: none) arrives for another session
// at t = 1 s.
type appendRun struct {
	worstGap float64 // the longest gap between two tokens of any decoding request
	meanGap  float64 // a decoding session's mean gap from the append's arrival to its first token
	ttft     float64 // the append's time to first token
}

func (a appendRun) String() string {
	return fmt.Sprintf("worst gap %.1f ms, mean gap %.1f ms, append TTFT %.1f ms", 1000*a.worstGap, 1000*a.meanGap, 1000*a.ttft)
}

func runAppend(t *testing.T, mixed bool, chunk, appendTok int) appendRun {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, ChunkTokens: chunk, MixedChunk: mixed,
		Session: SessionConfig{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	seed := func(r *Request) {
		if err := w.Reserve(0, r); err != nil {
			t.Fatal(err)
		}
		if err := w.StartDecode(0, r); err != nil {
			t.Fatal(err)
		}
	}
	var others []*Request
	for i := range 16 {
		r := &Request{ID: int64(i + 1), Kind: DecodeOnly, Session: fmt.Sprint("s", i), KeepSession: true,
			Blocks: chain(uint64(i+1), 63), Input: 4000, Output: 3000}
		seed(r)
		others = append(others, r)
	}
	// The appending session holds 1,024 tokens on D already (its seed).
	const held = 1024
	b := chain(100, (held+appendTok)/64)
	seed(&Request{ID: 100, Kind: DecodeOnly, Session: "big", KeepSession: true, Blocks: b[:held/64], Input: held, Output: 1})
	const at, until, tick = 1.0, 2.5, 0.0001
	advanceTo(w, at)
	var ap *Request
	if appendTok > 0 {
		ap = &Request{ID: 200, Kind: Full, Session: "big", KeepSession: true, Blocks: b, Input: held + appendTok, Output: 4}
		if err := w.Submit(at, ap); err != nil {
			t.Fatal(err)
		}
	}
	// Sample every session's token count each 0.1 ms: a gap is the time
	// between two increments (tokens of a decode run are credited step by
	// step, GeneratedBy).
	n := make([]int, len(others))
	last := make([]float64, len(others))
	for i, r := range others {
		n[i], last[i] = w.GeneratedBy(at, r), at
	}
	before := n[0]
	var out appendRun // the first gap, cut short by the arrival, is counted from it: never above the true gap
	for k := 1; float64(k)*tick <= until-at; k++ {
		now := at + float64(k)*tick
		advanceTo(w, now)
		for i, r := range others {
			if g := w.GeneratedBy(now, r); g > n[i] {
				out.worstGap = max(out.worstGap, now-last[i])
				n[i], last[i] = g, now
			}
		}
	}
	end := at + 0.5
	if ap != nil {
		if ap.FirstTokenAt == 0 || ap.CachedTokens != held {
			t.Fatalf("append: first token at %v, %d tokens cached; want it done within %g s over the %d held", ap.FirstTokenAt, ap.CachedTokens, until-at, held)
		}
		end, out.ttft = ap.FirstTokenAt, ap.FirstTokenAt-at
	}
	out.meanGap = (end - at) / float64(w.GeneratedBy(end, others[0])-before)
	return out
}

// A direct append runs on the decoder's own scheduler, so a large one slows
// every other session decoding there: SGLang's scheduler gives prefill
// priority, and without --mixed-chunk the decode batch waits for the
// append's every chunk (its sessions get no token for the whole prefill);
// with --mixed-chunk the batch rides in each prefill step, so a session
// waits one chunk at a time, and smaller chunks bound its worst gap (at the
// price of the append's own TTFT: every chunk pays the step overhead and
// attends to the context before it).
//
// Qwen3-30B-A3B on an H200 decoder, 16 sessions of 4,000 context decoding,
// a 16,384-token uncached append for a session holding 1,024 (beyond the
// default τ_append 8,192, as with a raised --direct-max-uncached-tokens).
// Measured (ms):
//
//	                        worst gap  mean gap in append  append TTFT
//	no append                   13.0          12.8
//	no mixed, chunk 8192       413.6         100.7             403.0
//	no mixed, chunk 2048       513.8         125.8             503.2
//	mixed, chunk 8192          248.2          67.7             406.2
//	mixed, chunk 4096          144.9          55.4             442.8
//	mixed, chunk 2048           84.5          43.0             516.1
//	mixed, chunk 1024           52.2          33.1             662.6
func TestDirectAppendSlowsOtherSessions(t *testing.T) {
	base := runAppend(t, false, 8192, 0)
	t.Logf("no append: worst gap %.1f ms, mean %.1f ms", 1000*base.worstGap, 1000*base.meanGap)
	if base.worstGap <= 0 || base.worstGap > 1.2*base.meanGap {
		t.Fatalf("no append: worst gap %.1f ms, mean %.1f ms; want steady decode steps", 1000*base.worstGap, 1000*base.meanGap)
	}
	// The default, no mixed chunk: frozen for the whole prefill.
	plain := runAppend(t, false, 8192, 16384)
	t.Logf("no mixed, chunk 8192: %v", plain)
	if plain.worstGap < 20*base.worstGap || plain.worstGap < plain.ttft {
		t.Errorf("no mixed: worst gap %.1f ms; want ≥ 20× the %.1f ms step and ≥ the append's %.1f ms prefill (no token meanwhile)",
			1000*plain.worstGap, 1000*base.worstGap, 1000*plain.ttft)
	}
	if plain.meanGap < 5*base.meanGap {
		t.Errorf("no mixed: mean gap during the append %.1f ms; want ≥ 5× the %.1f ms without it", 1000*plain.meanGap, 1000*base.meanGap)
	}
	// Smaller chunks do not help when the batch does not ride along.
	small := runAppend(t, false, 2048, 16384)
	t.Logf("no mixed, chunk 2048: %v", small)
	if small.worstGap < plain.worstGap {
		t.Errorf("no mixed: worst gap %.1f ms at chunk 2048 < %.1f ms at 8192; want no relief from chunking alone", 1000*small.worstGap, 1000*plain.worstGap)
	}
	// Mixed chunks: the worst gap is about one chunk's step and shrinks with it.
	prev := appendRun{worstGap: plain.worstGap}
	for _, chunk := range []int{8192, 4096, 2048, 1024} {
		m := runAppend(t, true, chunk, 16384)
		t.Logf("mixed, chunk %d: %v", chunk, m)
		if m.worstGap < 3*base.worstGap {
			t.Errorf("mixed, chunk %d: worst gap %.1f ms; want still ≥ 3× the %.1f ms step", chunk, 1000*m.worstGap, 1000*base.worstGap)
		}
		if m.worstGap > 0.75*prev.worstGap {
			t.Errorf("mixed, chunk %d: worst gap %.1f ms; want ≤ 0.75× the %.1f ms of the chunk twice as big (or of no mixing)", chunk, 1000*m.worstGap, 1000*prev.worstGap)
		}
		if prev.ttft > 0 && m.ttft <= prev.ttft {
			t.Errorf("mixed, chunk %d: append TTFT %.1f ms; want above the %.1f ms of the chunk twice as big", chunk, 1000*m.ttft, 1000*prev.ttft)
		}
		prev = m
	}
}
