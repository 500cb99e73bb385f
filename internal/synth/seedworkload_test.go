package synth

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// swStats are the statistics the seed reports about its two traces,
// measured on a generated stream.
type swStats struct {
	requests, sessions             int
	minTurns, maxTurns             int
	turns                          []float64
	in, out, gap, think, app, peak []float64
	span, sessionTime              float64
	blocks, newBlocks              int // hash ids, and ids never seen before
	idSessions                     map[uint64]string
	sharedIDs                      int // ids that appear in more than one session
	firstTS                        map[string]float64
}

// hitRatio is the ideal prefix-cache hit ratio: the share of hash ids that
// an unbounded cache would already hold.
func (st *swStats) hitRatio() float64 { return 1 - float64(st.newBlocks)/float64(st.blocks) }

// concurrency is the mean number of sessions between their first and last
// request.
func (st *swStats) concurrency() float64 { return st.sessionTime / st.span }

func seedStats(t testing.TB, s Stream) *swStats {
	t.Helper()
	st := &swStats{idSessions: map[uint64]string{}, firstTS: map[string]float64{}}
	type last struct {
		in, out   int
		ts, start float64
		turn      int
		peak      int
	}
	prev := map[string]*last{}
	var maxID uint64
	drain(t, s, func(r *trace.Request) {
		st.requests++
		st.blocks += len(r.HashIDs)
		for _, id := range r.HashIDs {
			if id > maxID {
				st.newBlocks++
			}
			if o, ok := st.idSessions[id]; !ok {
				st.idSessions[id] = r.SessionID
			} else if o != r.SessionID && o != "" {
				st.idSessions[id] = "" // marks an id seen in two sessions
				st.sharedIDs++
			}
		}
		for _, id := range r.HashIDs {
			maxID = max(maxID, id)
		}
		st.in = append(st.in, float64(r.InputLength))
		st.out = append(st.out, float64(r.OutputLength))
		st.span = max(st.span, r.Timestamp)
		p := prev[r.SessionID]
		if p == nil {
			p = &last{start: r.Timestamp}
			prev[r.SessionID] = p
			st.firstTS[r.SessionID] = r.Timestamp
		} else {
			st.gap = append(st.gap, r.Timestamp-p.ts)
			st.think = append(st.think, *r.ThinkTimeS)
			st.app = append(st.app, float64(r.InputLength-p.in-p.out))
		}
		p.in, p.out, p.ts, p.turn = r.InputLength, r.OutputLength, r.Timestamp, r.Turn
		p.peak = max(p.peak, r.InputLength)
	})
	st.minTurns = math.MaxInt
	for _, p := range prev {
		st.turns = append(st.turns, float64(p.turn))
		st.minTurns, st.maxTurns = min(st.minTurns, p.turn), max(st.maxTurns, p.turn)
		st.peak = append(st.peak, float64(p.peak))
		st.sessionTime += p.ts - p.start
	}
	st.sessions = len(prev)
	return st
}

func above(xs []float64, v float64) float64 {
	n := 0
	for _, x := range xs {
		if x > v {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

func (st *swStats) String() string {
	q := func(xs []float64, ps ...float64) string {
		s := ""
		for _, p := range ps {
			s += fmt.Sprintf(" p%g=%.4g", 100*p, quantile(xs, p))
		}
		return s + fmt.Sprintf(" mean=%.4g max=%.4g", mean(xs), slices.Max(xs))
	}
	return fmt.Sprintf("%d sessions, %d requests, span %.0f s (%.2f h), concurrency %.2f, ideal hit ratio %.4f, ids in >1 session %d\n"+
		" turns%s\n input%s\n session peak%s\n output%s\n gap%s\n think%s\n append%s >2048 %.3f >8192 %.4f",
		st.sessions, st.requests, st.span, st.span/3600, st.concurrency(), st.hitRatio(), st.sharedIDs,
		q(st.turns, .1, .5, .9), q(st.in, .1, .5, .9, .99), q(st.peak, .5), q(st.out, .5, .9, .99),
		q(st.gap, .1, .5, .9, .99), q(st.think, .5, .9), q(st.app, .1, .25, .5, .75, .9, .99), above(st.app, 2048), above(st.app, 8192))
}

// nearSeed compares a generated statistic with the seed's figure.
func nearSeed(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	dev := got/want - 1
	t.Logf("%-12s generated %10.5g  seed %10.5g  (%+.1f%%, tolerance ±%.0f%%)", name, got, want, 100*dev, 100*tol)
	if math.Abs(dev) > tol {
		t.Errorf("%s: generated %.4g is more than %.0f%% from the seed's %.4g", name, got, 100*tol, want)
	}
}

func mustSeedWorkload(t testing.TB, c SeedWorkload) *SeedWorkloadStream {
	t.Helper()
	g, err := NewSeedWorkload(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkSeedWorkload runs a preset's stream through trace.Checker and the
// package's own stricter checker (time order, prefix blocks, fresh ids, the
// shared prefix) and returns its statistics.
func checkSeedWorkload(t *testing.T, c SeedWorkload) (*swStats, *SeedWorkloadStream) {
	t.Helper()
	g := mustSeedWorkload(t, c)
	chk := trace.NewChecker(c.BlockSize)
	own := newChecker(t, c.BlockSize, c.MaxInputTokens)
	line := 0
	var collected []trace.Request
	drain(t, g, func(r *trace.Request) {
		line++
		if errs := chk.Check(r, line); len(errs) > 0 {
			t.Fatalf("request %d: %v", line, errs[0])
		}
		chk.Accept(r, line)
		own.check(r, c.SharedPrefixTokens/c.BlockSize)
		cp := *r
		cp.HashIDs = slices.Clone(r.HashIDs)
		collected = append(collected, cp)
	})
	if ok, n, first := chk.Order(); !ok {
		t.Fatalf("%d requests out of time order, first on line %d", n, first)
	}
	if own.resets != 0 || g.resets != 0 {
		t.Fatalf("%d contexts reset (%d compacted at the cap); the preset should only grow", own.resets, g.resets)
	}
	return seedStats(t, &sliceStream{reqs: collected}), g
}

// sliceStream replays collected requests.
type sliceStream struct {
	reqs []trace.Request
	i    int
}

func (s *sliceStream) Header() trace.Header { return trace.Header{} }
func (s *sliceStream) Next(r *trace.Request) error {
	if s.i == len(s.reqs) {
		return io.EOF
	}
	*r = s.reqs[s.i]
	s.i++
	return nil
}

// Targets from the seed (docs/workloads.md gives the source of each).
const (
	sweSessions, sweRequests = 52, 4449
	sweMinTurns, sweMaxTurns = 8, 150
	sweSpanS                 = 5.44 * 3600
	sweGapP10, sweGapP50     = 1.6, 2.5
	sweGapP90, sweGapP99     = 7.8, 25.1
	sweInputP50, sweInputP99 = 27000, 92000
	sweInputMax              = 104000
	swePeakP50               = 49000
	sweOutputMean            = 215 // derived from E4-v8 latency − TTFT at 174.76 tok/s
	infSessions, infRequests = 50, 1285
	infInputMean             = 67631
	infOutputMean            = 700
	infBoilerplateBlocks     = 50
	infHitRatio              = 0.942 // Inferact's reported cache hit
)

// TestSeedSWE pins the default seed-swe draw: exact counts and turn bounds,
// valid and time-ordered, session-unique ids, and the seed's statistics.
// Tolerances: the gaps are drawn straight from the seed's quantiles, so only
// sampling noise separates them (5%, 10% for p90 and p99 where 4,397 gaps
// put 440 and 44 draws beyond). Input, peak and span come out of the fitted
// growth and arrival model (5% for p50 and span, 10% for the tails). The
// output mean is itself an estimate (15%).
func TestSeedSWE(t *testing.T) {
	c := DefaultSeedSWE()
	st, _ := checkSeedWorkload(t, c)
	t.Logf("seed-swe (seed %d): %v", c.Seed, st)
	if st.sessions != sweSessions || st.requests != sweRequests || st.minTurns != sweMinTurns || st.maxTurns != sweMaxTurns {
		t.Fatalf("%d sessions, %d requests, turns %d-%d; want %d, %d, %d-%d",
			st.sessions, st.requests, st.minTurns, st.maxTurns, sweSessions, sweRequests, sweMinTurns, sweMaxTurns)
	}
	if st.sharedIDs != 0 {
		t.Fatalf("%d hash ids appear in more than one session; seed-swe's are session-unique", st.sharedIDs)
	}
	nearSeed(t, "gap p10", quantile(st.gap, .1), sweGapP10, 0.05)
	nearSeed(t, "gap p50", quantile(st.gap, .5), sweGapP50, 0.05)
	nearSeed(t, "gap p90", quantile(st.gap, .9), sweGapP90, 0.10)
	nearSeed(t, "gap p99", quantile(st.gap, .99), sweGapP99, 0.10)
	nearSeed(t, "span", st.span, sweSpanS, 0.05)
	nearSeed(t, "input p50", quantile(st.in, .5), sweInputP50, 0.05)
	nearSeed(t, "input p99", quantile(st.in, .99), sweInputP99, 0.10)
	nearSeed(t, "input max", slices.Max(st.in), sweInputMax, 0.10)
	nearSeed(t, "peak p50", quantile(st.peak, .5), swePeakP50, 0.10)
	nearSeed(t, "output mean", mean(st.out), sweOutputMean, 0.15)
}

// TestSeedInferact pins the default seed-inferact draw: exact counts, the
// converter's synthetic timing exactly, 50 shared boilerplate blocks, and
// the mean input (3%) and output (10%, the seed says "~700").
func TestSeedInferact(t *testing.T) {
	c := DefaultSeedInferact()
	st, _ := checkSeedWorkload(t, c)
	t.Logf("seed-inferact (seed %d): %v", c.Seed, st)
	if st.sessions != infSessions || st.requests != infRequests {
		t.Fatalf("%d sessions, %d requests; want %d, %d", st.sessions, st.requests, infSessions, infRequests)
	}
	for id, ts := range st.firstTS {
		var i int
		fmt.Sscanf(id, "s%d", &i)
		if ts != float64(i) {
			t.Fatalf("session %s starts at %v, want %d s (1 s stagger)", id, ts, i)
		}
	}
	for i, g := range st.gap {
		if math.Abs(g-2.5) > 1e-9 || st.think[i] != 2.5 {
			t.Fatalf("gap %v think %v, want 2.5 s", g, st.think[i])
		}
	}
	if want := infBoilerplateBlocks * st.sessions; st.sharedIDs != infBoilerplateBlocks {
		t.Fatalf("%d ids shared across sessions, want the %d boilerplate blocks (in all %d sessions)", st.sharedIDs, infBoilerplateBlocks, want/infBoilerplateBlocks)
	}
	nearSeed(t, "input mean", mean(st.in), infInputMean, 0.03)
	nearSeed(t, "output mean", mean(st.out), infOutputMean, 0.10)
	nearSeed(t, "ideal hit", st.hitRatio(), infHitRatio, 0.01)
	if m := slices.Max(st.in); m > 262144 {
		t.Fatalf("max input %v beyond the 262,144-token context", m)
	}
}

// TestSeedWorkloadSeeds: every seed, not only the defaults, gives the exact
// counts, no compaction and statistics near the targets (looser: one
// 52-session draw is noisy in its tails). Its log is the per-seed table in
// docs/workloads.md.
func TestSeedWorkloadSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		c := DefaultSeedSWE()
		c.Seed = seed
		st, _ := checkSeedWorkload(t, c)
		t.Logf("seed-swe seed %2d: input p50 %6.0f p99 %6.0f mean %6.0f max %6.0f | peak p50 %6.0f | gap p50 %.2f p90 %.2f | output mean %3.0f | span %5.0f s | concurrency %.2f | hit %.4f",
			seed, quantile(st.in, .5), quantile(st.in, .99), mean(st.in), slices.Max(st.in), quantile(st.peak, .5),
			quantile(st.gap, .5), quantile(st.gap, .9), mean(st.out), st.span, st.concurrency(), st.hitRatio())
		if st.sessions != sweSessions || st.requests != sweRequests || st.minTurns != sweMinTurns || st.maxTurns != sweMaxTurns {
			t.Fatalf("seed %d: %d sessions, %d requests, turns %d-%d", seed, st.sessions, st.requests, st.minTurns, st.maxTurns)
		}
		nearSeed(t, "input p50", quantile(st.in, .5), sweInputP50, 0.05)
		nearSeed(t, "input p99", quantile(st.in, .99), sweInputP99, 0.25)
		nearSeed(t, "span", st.span, sweSpanS, 0.06)
	}
	for seed := uint64(1); seed <= 12; seed++ {
		c := DefaultSeedInferact()
		c.Seed = seed
		st, _ := checkSeedWorkload(t, c)
		t.Logf("seed-inferact seed %2d: input p50 %6.0f p99 %6.0f mean %6.0f max %6.0f | peak p50 %6.0f | output mean %3.0f | span %3.0f s | hit %.4f",
			seed, quantile(st.in, .5), quantile(st.in, .99), mean(st.in), slices.Max(st.in), quantile(st.peak, .5),
			mean(st.out), st.span, st.hitRatio())
		if st.sessions != infSessions || st.requests != infRequests {
			t.Fatalf("seed %d: %d sessions, %d requests", seed, st.sessions, st.requests)
		}
		nearSeed(t, "input mean", mean(st.in), infInputMean, 0.05)
		nearSeed(t, "ideal hit", st.hitRatio(), infHitRatio, 0.01)
	}
}

func TestSeedWorkloadDeterministic(t *testing.T) {
	for _, c := range []SeedWorkload{DefaultSeedSWE(), DefaultSeedInferact()} {
		a := encode(t, mustSeedWorkload(t, c))
		if b := encode(t, mustSeedWorkload(t, c)); !bytes.Equal(a, b) {
			t.Fatalf("%s: same seed gave different output", c.Name)
		}
		if !strings.Contains(string(a[:bytes.IndexByte(a, '\n')]), `"source":"synth-`+c.Name+`"`) {
			t.Fatalf("%s: header %q", c.Name, a[:bytes.IndexByte(a, '\n')])
		}
		c.Seed++
		if bytes.Equal(a, encode(t, mustSeedWorkload(t, c))) {
			t.Fatalf("%s: different seeds gave identical output", c.Name)
		}
	}
}

// TestSeedWorkloadStreaming: the stream holds a session only from just
// before its first request (it is started as soon as it is due before the
// next pending turn) to its last.
func TestSeedWorkloadStreaming(t *testing.T) {
	for _, c := range []SeedWorkload{DefaultSeedSWE(), DefaultSeedInferact()} {
		first, last := map[string]float64{}, map[string]float64{}
		var ts []float64
		drain(t, mustSeedWorkload(t, c), func(r *trace.Request) {
			if _, ok := first[r.SessionID]; !ok {
				first[r.SessionID] = r.Timestamp
			}
			last[r.SessionID] = r.Timestamp
			ts = append(ts, r.Timestamp)
		})
		g := mustSeedWorkload(t, c)
		i, peak := 0, 0
		drain(t, g, func(r *trace.Request) {
			next := ts[min(i+1, len(ts)-1)]
			i++
			alive := 0
			for id, f := range first {
				if f <= next && r.Timestamp <= last[id] {
					alive++
				}
			}
			if g.active.len() > alive {
				t.Fatalf("%s at %v: %d sessions held, %d alive", c.Name, r.Timestamp, g.active.len(), alive)
			}
			peak = max(peak, g.active.len())
		})
		t.Logf("%s: at most %d sessions held at once", c.Name, peak)
	}
}

func TestSeedWorkloadValidate(t *testing.T) {
	for name, mod := range map[string]func(*SeedWorkload){
		"block":    func(c *SeedWorkload) { c.BlockSize = 0 },
		"sessions": func(c *SeedWorkload) { c.Sessions = 2 },
		"too few":  func(c *SeedWorkload) { c.Requests = c.MaxTurns + (c.Sessions-1)*c.MinTurns - 1 },
		"too many": func(c *SeedWorkload) { c.Requests = c.MinTurns + (c.Sessions-1)*c.MaxTurns + 1 },
		"bounds":   func(c *SeedWorkload) { c.MinTurns, c.MaxTurns = 10, 9 },
		"sigma":    func(c *SeedWorkload) { c.TurnsSigma = 0 },
		"gap":      func(c *SeedWorkload) { c.Gap.Knots = c.Gap.Knots[:1] },
		"knots":    func(c *SeedWorkload) { c.Output.Knots[1].P = 0.4 },
		"clamp":    func(c *SeedWorkload) { c.Append.Max = 1 },
		"cap":      func(c *SeedWorkload) { c.MaxInputTokens = 100 },
		"prefix":   func(c *SeedWorkload) { c.SharedPrefixTokens = -1 },
	} {
		c := DefaultSeedSWE()
		mod(&c)
		if _, err := NewSeedWorkload(c); err == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
	// A fixed gap needs no gap distribution.
	c := DefaultSeedInferact()
	c.Gap = QuantileDist{}
	if _, err := NewSeedWorkload(c); err != nil {
		t.Fatal(err)
	}
}

func TestShapedTurns(t *testing.T) {
	for _, tc := range []struct {
		n, total, lo, hi int
		sigma            float64
	}{{52, 4449, 8, 150, 0.6}, {50, 1285, 3, 50, 0.8}, {3, 10, 1, 8, 1}, {3, 17, 1, 8, 1}, {4, 12, 3, 3, 1}, {10, 109, 1, 100, 2}, {10, 109, 1, 100, 0.05}, {10, 1500, 100, 500, 0.05}, {10, 900, 1, 100, 0.05}, {10, 850, 1, 100, 0.1}, {1000, 50000, 2, 500, 1.5}} {
		v := shapedTurns(tc.n, tc.total, tc.lo, tc.hi, tc.sigma)
		sum := 0
		for _, x := range v {
			sum += x
		}
		if len(v) != tc.n || sum != tc.total || v[0] != tc.lo || v[len(v)-1] != tc.hi || !slices.IsSorted(v) {
			t.Fatalf("%+v: got %v (sum %d)", tc, v, sum)
		}
	}
}

func TestQuantileDist(t *testing.T) {
	d := DefaultSeedSWE().Gap
	for _, k := range d.Knots {
		if got := d.Quantile(k.P); math.Abs(got-k.V) > 1e-9*k.V {
			t.Fatalf("quantile %v = %v, want the knot's %v", k.P, got, k.V)
		}
	}
	if d.Quantile(1e-12) != d.Min || d.Quantile(1-1e-12) > d.Max {
		t.Fatal("clamps not applied")
	}
	ln := LogNormal(100, 0.5, 0, 0)
	if m, want := ln.Mean(), 100*math.Exp(0.125); math.Abs(m/want-1) > 1e-3 {
		t.Fatalf("lognormal mean %v, want %v", m, want)
	}
	if q := ln.Quantile(normalCDF(-2)); math.Abs(q-100*math.Exp(-1)) > 1e-6 {
		t.Fatalf("lognormal 2.3rd percentile %v, want %v", q, 100*math.Exp(-1))
	}
}
