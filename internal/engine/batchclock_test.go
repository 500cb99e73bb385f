package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// TestBatchClockMatchesWalk drives two workers of one configuration with the
// same random arrivals, decode joins, aborts, samples and mid-run reads, one
// crediting its batch by the clock and one by the walk it replaced, and
// holds them to the same events (kind, request, time, tokens), the same
// pool accounting and stats after every step, the same mid-run reads and
// the same inter-token gap histogram bit for bit.
func TestBatchClockMatchesWalk(t *testing.T) {
	type setup struct {
		name string
		cfg  func(h *metrics.GapHistogram) Config
		pd   bool // DecodeOnly requests (reserve, then join) instead of Full ones
	}
	setups := []setup{
		{"colocated", func(h *metrics.GapHistogram) Config {
			return Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20, Gaps: h}
		}, false},
		{"colocated mixed, prefix cache, small pool", func(h *metrics.GapHistogram) Config {
			return Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 3000,
				PrefixCache: true, MixedChunk: true, ChunkTokens: 128, Gaps: h}
		}, false},
		{"decode, sessions", func(h *metrics.GapHistogram) Config {
			return Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000,
				Session: SessionConfig{Enabled: true}, Gaps: h}
		}, true},
		{"colocated, no gaps", func(*metrics.GapHistogram) Config {
			return Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20, MixedChunk: true}
		}, false},
	}
	for _, su := range setups {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("%s/%d", su.name, seed), func(t *testing.T) {
				var ws [2]*Worker
				var hs [2]*metrics.GapHistogram
				for i := range ws {
					hs[i] = metrics.NewGapHistogram()
					cfg := su.cfg(hs[i])
					if cfg.Gaps == nil {
						hs[i] = nil
					}
					w, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ws[i] = w
				}
				if !ws[0].bat.on {
					t.Fatal("the clock is off for this setup")
				}
				ws[1].bat.on = false // the walk
				rng := rand.New(rand.NewPCG(seed, 11))
				var reqs [2][]*Request
				now := 0.0
				same := func(what string) {
					t.Helper()
					a, b := ws[0], ws[1]
					if a.Used() != b.Used() || a.reserved != b.reserved || a.admitted != b.admitted || a.Stats() != b.Stats() ||
						len(a.decoding) != len(b.decoding) {
						t.Fatalf("%s at %v: used %d/%d reserved %d/%d running %d/%d batch %d/%d stats %+v / %+v", what, now,
							a.Used(), b.Used(), a.reserved, b.reserved, a.admitted, b.admitted, len(a.decoding), len(b.decoding), a.Stats(), b.Stats())
					}
					for i, r := range a.decoding {
						if b.decoding[i].ID != r.ID {
							t.Fatalf("%s at %v: batch order differs at %d: %d / %d", what, now, i, r.ID, b.decoding[i].ID)
						}
					}
				}
				step := func() bool {
					ta, oka := ws[0].NextTime()
					tb, okb := ws[1].NextTime()
					if oka != okb || ta != tb {
						t.Fatalf("next time %v %v / %v %v", ta, oka, tb, okb)
					}
					if !oka {
						return false
					}
					now = ta
					var evs [2][]Event
					for i, w := range ws {
						w.Advance(now)
						evs[i] = w.TakeEvents()
					}
					if len(evs[0]) != len(evs[1]) {
						t.Fatalf("at %v: %d events / %d", now, len(evs[0]), len(evs[1]))
					}
					for j := range evs[0] {
						x, y := evs[0][j], evs[1][j]
						if x.Kind != y.Kind || reqID(x.Req) != reqID(y.Req) || x.Time != y.Time || x.Tokens != y.Tokens || x.Session != y.Session {
							t.Fatalf("at %v: event %d: %+v / %+v", now, j, x, y)
						}
						if x.Kind == EvFinished && (x.Req.Generated() != y.Req.Generated() || x.Req.lastTokenAt != y.Req.lastTokenAt) {
							t.Fatalf("at %v: request %d finished with %d tokens at %v / %d at %v", now, x.Req.ID,
								x.Req.Generated(), x.Req.lastTokenAt, y.Req.Generated(), y.Req.lastTokenAt)
						}
					}
					same("after a step")
					return true
				}
				for i := range 300 {
					in, out := 16+rng.IntN(300), 1+rng.IntN(90)
					sess := fmt.Sprintf("s%d", rng.IntN(40))
					if su.pd {
						sess = fmt.Sprintf("s%d", i) // one turn in flight a session, as the control plane sends them
					}
					first := uint64(rng.IntN(6)) * 1000
					keep := rng.IntN(2) == 0
					for k, w := range ws {
						r := &Request{ID: int64(i + 1), Input: in, Output: out, Session: sess, Blocks: chain(first, (in+15)/16)}
						reqs[k] = append(reqs[k], r)
						if su.pd {
							r.Kind, r.KeepSession = DecodeOnly, keep
							if err := w.Reserve(now, r); err != nil {
								t.Fatal(err)
							}
						} else {
							r.Kind = Full
							if err := w.Submit(now, r); err != nil {
								t.Fatal(err)
							}
						}
					}
					for range rng.IntN(6) {
						if !step() {
							break
						}
						// Mid-run: a reservation's KV arrives, a sample, a
						// read of a running request's tokens, an abort.
						if su.pd {
							for j, r := range reqs[0] {
								if r.Stage == StageReserved && rng.IntN(2) == 0 {
									for k, w := range ws {
										if err := w.StartDecode(now, reqs[k][j]); err != nil {
											t.Fatal(err)
										}
									}
								}
							}
						}
						mid := now
						if ta, ok := ws[0].NextTime(); ok && rng.IntN(2) == 0 {
							mid = now + (ta-now)*rng.Float64()
						}
						if rng.IntN(3) == 0 {
							if a, b := ws[0].Sample(mid), ws[1].Sample(mid); a != b {
								t.Fatalf("sample at %v: %+v / %+v", mid, a, b)
							}
						}
						if n := len(ws[0].decoding); n > 0 {
							j := rng.IntN(n)
							a, b := ws[0].decoding[j], ws[1].decoding[j]
							if x, y := ws[0].GeneratedBy(mid, a), ws[1].GeneratedBy(mid, b); x != y {
								t.Fatalf("generated by %v of request %d: %d / %d", mid, a.ID, x, y)
							}
							if rng.IntN(8) == 0 {
								ws[0].Abort(mid, a)
								ws[1].Abort(mid, b)
								if a.Generated() != b.Generated() {
									t.Fatalf("aborted request %d generated %d / %d", a.ID, a.Generated(), b.Generated())
								}
								ws[0].TakeEvents()
								ws[1].TakeEvents()
								same("after an abort")
							}
						}
					}
				}
				for {
					if su.pd {
						for j, r := range reqs[0] {
							if r.Stage == StageReserved {
								for k, w := range ws {
									if err := w.StartDecode(now, reqs[k][j]); err != nil {
										t.Fatal(err)
									}
								}
							}
						}
					}
					if !step() {
						break
					}
				}
				if hs[0] != nil {
					a, b := hs[0], hs[1]
					if a.Count() != b.Count() || math.Float64bits(a.Mean()) != math.Float64bits(b.Mean()) ||
						math.Float64bits(a.Std()) != math.Float64bits(b.Std()) || a.Min() != b.Min() || a.Max() != b.Max() {
						t.Fatalf("gaps: %d, mean %v, std %v, [%v, %v] / %d, mean %v, std %v, [%v, %v]",
							a.Count(), a.Mean(), a.Std(), a.Min(), a.Max(), b.Count(), b.Mean(), b.Std(), b.Min(), b.Max())
					}
					if a.Count() == 0 {
						t.Fatal("no gaps: the test reads nothing")
					}
				}
				done := 0
				for _, r := range reqs[0] {
					if r.Stage == StageDone {
						done++
					}
				}
				if done < 100 {
					t.Fatalf("only %d of %d requests finished", done, len(reqs[0]))
				}
			})
		}
	}
}

func reqID(r *Request) int64 {
	if r == nil {
		return 0
	}
	return r.ID
}

// A sequence whose promised tokens would run out before it ends (none does
// today) turns the clock off for its worker, with the batch settled first:
// the walk credits it from then on.
func TestBatchClockOffForShortPromise(t *testing.T) {
	w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !w.bat.on {
		t.Fatal("the clock is off for a colocated SGLang worker")
	}
	a := &Request{ID: 1, Kind: Full, Input: 32, Output: 10, generated: 1, reservedOut: 9, Stage: StageDecoding}
	w.reserved = 9
	w.joinBatch(a)
	w.bat.clk += 3 // three steps credited by the clock
	w.bat.end = 1.5
	w.own += 3
	w.reserved -= 3
	b := &Request{ID: 2, Kind: Full, Input: 32, Output: 10, generated: 1, reservedOut: 3, Stage: StageDecoding}
	w.joinBatch(b)
	if w.bat.on {
		t.Fatal("a promise shorter than the tokens left kept the clock on")
	}
	if a.generated != 4 || a.own != 3 || a.reservedOut != 6 || a.lastTokenAt != 1.5 {
		t.Fatalf("the batch was not settled: generated %d, own %d, promised %d, last token at %v; want 4, 3, 6, 1.5",
			a.generated, a.own, a.reservedOut, a.lastTokenAt)
	}
	if len(w.decoding) != 2 || b.bmark != 0 {
		t.Fatalf("batch %d, the late joiner's mark %d: want 2 in the batch, no mark", len(w.decoding), b.bmark)
	}
}
