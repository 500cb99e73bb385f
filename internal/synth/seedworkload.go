package synth

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// SeedWorkload configures a workload shaped like one of the two traces the
// seed ran its experiments on, of which the shared material keeps only
// summary statistics. DefaultSeedSWE and DefaultSeedInferact are the two
// presets; docs/workloads.md takes every number from the seed with its
// source and derives the distributions that reproduce them.
//
// The session and request counts are exact for every seed: the turn counts
// are a fixed set, the quantiles of a truncated lognormal shaped to sum to
// Requests, dealt to the sessions in a seeded order. Each session then
// grows its context turn by turn (previous prompt + previous output + an
// append), so each turn reuses every whole block of the previous prompt.
type SeedWorkload struct {
	// Name is the preset's name, recorded in the trace header.
	Name string
	// Seed selects all random draws: equal Seed and config give an identical
	// stream. Session k draws from its own PCG stream derived from Seed and k.
	Seed uint64
	// BlockSize is tokens per hash id.
	BlockSize int
	// Sessions and Requests are the exact session and request counts.
	Sessions int
	Requests int
	// MinTurns and MaxTurns bound a session's requests; both bounds are
	// attained (the shortest session has MinTurns, the longest MaxTurns).
	MinTurns, MaxTurns int
	// TurnsSigma is the shape σ of the lognormal the turn counts are
	// quantiles of (its location is solved to make them sum to Requests).
	TurnsSigma float64
	// StaggerS > 0 starts session i at i·StaggerS. Otherwise session 0
	// starts at 0 and the others at sorted uniform times in
	// (0, ArrivalWindowS]: a Poisson process conditioned on Sessions arrivals.
	StaggerS       float64
	ArrivalWindowS float64
	// GapS > 0 is a fixed time between a session's consecutive requests
	// (synthetic timing); otherwise each gap is drawn from Gap.
	GapS float64
	Gap  QuantileDist
	// think_time_s of turns 2+ is the gap less the nominal service time of
	// the previous request, NominalTTFTS + output/NominalTokensPerS, floored
	// at 0, so a closed-loop replay on hardware that fast reproduces the
	// timestamps. NominalTokensPerS 0 makes the think time the whole gap.
	NominalTTFTS      float64
	NominalTokensPerS float64
	// SharedPrefixTokens open every session; their whole blocks carry the
	// same ids in every session (shared boilerplate). 0: sessions share
	// nothing.
	SharedPrefixTokens int
	// FirstInput is turn 1's input beyond the shared prefix (tokens).
	FirstInput QuantileDist
	// Output is each request's output length (tokens).
	Output QuantileDist
	// Append is the new input of turns 2+ beyond the previous prompt and its
	// output (tokens), before the session's scale.
	Append QuantileDist
	// AppendScaleSigma > 0 gives each session an append multiplier, a
	// lognormal of median 1 and this shape, stratified over the sessions
	// like the turn counts (some sessions read big files, others run short
	// commands). 0: every session has scale 1.
	AppendScaleSigma float64
	// MaxInputTokens caps an input: a context that would grow past it is
	// compacted to the shared prefix plus half of the rest (repeated until it
	// fits), with fresh ids after the prefix. The presets never reach it.
	MaxInputTokens int
}

// DefaultSeedSWE is the seed's SWE-Bench workload
// (third_party/traces/qwen35-swebench-50sess.jsonl): 52 sessions, 4,449
// requests, 8–150 turns per session, the real inter-turn gaps (p10 1.6 s,
// p50 2.5 s, p90 7.8 s, p99 25.1 s) over a 5.44 h span, input p50 27K and
// p99 92K, and session-unique hash ids.
func DefaultSeedSWE() SeedWorkload {
	return SeedWorkload{
		Name:      "seed-swe",
		Seed:      10,
		BlockSize: 64,
		Sessions:  52, Requests: 4449,
		MinTurns: 8, MaxTurns: 150,
		TurnsSigma:     0.6,
		ArrivalWindowS: 19500,
		Gap: QuantileDist{
			Knots: []Knot{{0.10, 1.6}, {0.50, 2.5}, {0.90, 7.8}, {0.99, 25.1}},
			Min:   0.5, Max: 261,
		},
		NominalTTFTS:      0.040,
		NominalTokensPerS: 174.76,
		FirstInput:        LogNormal(5000, 0.3, 1000, 0),
		Output: QuantileDist{
			Knots: []Knot{{0.50, 82}, {0.90, 542}, {0.99, 1271}},
			Min:   8, Max: 8192,
		},
		Append:           LogNormal(190, 1.0, 0, 32768),
		AppendScaleSigma: 0.4,
		MaxInputTokens:   262144,
	}
}

// DefaultSeedInferact is the seed's Inferact workload
// (outputs/inferact_50sess.jsonl, the first 50 trials of Inferact's
// codex_swebenchpro traces): 50 sessions, 1,285 requests, mean input 67.6K,
// the converter's synthetic timing (sessions 1 s apart, turns 2.5 s apart),
// and a shared boilerplate of 50 blocks at the start of every session.
func DefaultSeedInferact() SeedWorkload {
	return SeedWorkload{
		Name:      "seed-inferact",
		Seed:      3,
		BlockSize: 64,
		Sessions:  50, Requests: 1285,
		MinTurns: 3, MaxTurns: 50,
		TurnsSigma:         0.8,
		StaggerS:           1,
		GapS:               2.5,
		SharedPrefixTokens: 50 * 64,
		FirstInput:         LogNormal(12000-50*64, 0.25, 1000, 0),
		Output:             LogNormal(430, 1.0, 1, 16384),
		Append:             LogNormal(2460, 0.6, 0, 16384),
		MaxInputTokens:     262144,
	}
}

// Validate reports the first inconsistent field.
func (c *SeedWorkload) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	switch {
	case c.BlockSize <= 0:
		return errors.New("block size must be > 0")
	case c.Sessions < 3:
		return errors.New("need at least 3 sessions")
	case c.MinTurns < 1 || c.MaxTurns < c.MinTurns:
		return errors.New("turn bounds must satisfy 1 <= min <= max")
	case c.Requests < c.MaxTurns+(c.Sessions-1)*c.MinTurns || c.Requests > c.MinTurns+(c.Sessions-1)*c.MaxTurns:
		return fmt.Errorf("%d requests cannot be split into %d sessions of %d–%d turns with both bounds attained",
			c.Requests, c.Sessions, c.MinTurns, c.MaxTurns)
	case !(c.TurnsSigma > 0) || math.IsInf(c.TurnsSigma, 0):
		return errors.New("turns sigma must be a finite number > 0")
	case bad(c.StaggerS) || bad(c.ArrivalWindowS) || bad(c.GapS) || bad(c.AppendScaleSigma):
		return errors.New("stagger, arrival window, gap and append scale sigma must be finite and >= 0")
	case bad(c.NominalTTFTS) || bad(c.NominalTokensPerS):
		return errors.New("nominal TTFT and token rate must be finite and >= 0")
	case c.SharedPrefixTokens < 0:
		return errors.New("shared prefix must be >= 0 tokens")
	case c.MaxInputTokens < c.SharedPrefixTokens+4*c.BlockSize:
		return fmt.Errorf("max input %d leaves no room beyond the shared prefix", c.MaxInputTokens)
	}
	dists := []struct {
		name string
		d    *QuantileDist
	}{{"first input", &c.FirstInput}, {"output", &c.Output}, {"append", &c.Append}}
	if c.GapS == 0 {
		dists = append(dists, struct {
			name string
			d    *QuantileDist
		}{"gap", &c.Gap})
	}
	for _, d := range dists {
		if err := d.d.Validate(); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
	}
	return nil
}

// shapedTurns returns n turn counts in [lo, hi] that sum to total: the
// quantiles at p = j/(n−1) of a lognormal of shape sigma truncated to
// [lo, hi] (so the shortest is lo and the longest hi), its location solved
// by bisection so that they sum to total, rounded by largest remainder.
// The result is in increasing order.
func shapedTurns(n, total, lo, hi int, sigma float64) []int {
	llo, lhi := math.Log(float64(lo)), math.Log(float64(hi))
	values := func(mu float64) ([]float64, float64) {
		a, b := (llo-mu)/sigma, (lhi-mu)/sigma
		// The truncated normal's quantile at q, computed on the side of 0
		// the window lies on, so that a window far in a tail keeps its
		// precision (Φ(4) and Φ(9) are both 1 to five digits).
		zAt := func(q float64) float64 {
			if a > 0 {
				sa, sb := normalCDF(-a), normalCDF(-b)
				return -probit(sa - (sa-sb)*q)
			}
			fa, fb := normalCDF(a), normalCDF(b)
			return probit(fa + (fb-fa)*q)
		}
		v := make([]float64, n)
		sum := 0.0
		for j := range n {
			switch j {
			case 0:
				v[j] = float64(lo)
			case n - 1:
				v[j] = float64(hi)
			default:
				x := math.Exp(mu + sigma*zAt(float64(j)/float64(n-1)))
				v[j] = min(max(x, float64(lo)), float64(hi))
			}
			sum += v[j]
		}
		return v, sum
	}
	// Beyond ±6σ of the window the values no longer move (and Φ runs out
	// of precision); the rounding below absorbs what is left.
	a, b := llo-6*sigma, lhi+6*sigma
	for range 200 {
		m := (a + b) / 2
		if _, s := values(m); s < float64(total) {
			a = m
		} else {
			b = m
		}
	}
	v, _ := values((a + b) / 2)
	// Round by largest remainder: floor everything, then add one to the
	// interior values with the largest fractions until the sum is exact (or
	// take one from those with the smallest, should flooring overshoot).
	out := make([]int, n)
	type frac struct {
		f float64
		j int
	}
	var fr []frac
	sum := 0
	for j, x := range v {
		out[j] = int(math.Floor(x))
		sum += out[j]
		if j > 0 && j < n-1 {
			fr = append(fr, frac{x - math.Floor(x), j})
		}
	}
	slices.SortStableFunc(fr, func(x, y frac) int {
		switch {
		case x.f > y.f:
			return -1
		case x.f < y.f:
			return 1
		}
		return 0
	})
	// Each pass moves every adjustable value by one; Validate guarantees
	// the bounds leave room, and a pass that moves nothing stops the loop.
	for moved := true; sum != total && moved; {
		moved = false
		for i := range fr {
			if sum < total && out[fr[i].j] < hi {
				out[fr[i].j]++
				sum, moved = sum+1, true
			}
			if j := fr[len(fr)-1-i].j; sum > total && out[j] > lo {
				out[j]--
				sum, moved = sum-1, true
			}
		}
	}
	slices.Sort(out)
	return out
}

// seedPlan is what is fixed per session before the stream starts: a few
// numbers per configured session, so that the totals come out exact.
type seedPlan struct {
	start float64
	turns int
	scale float64
}

type swSession struct {
	idx       int
	rng       *rand.Rand
	plan      seedPlan
	turn      int
	lastChat  int64
	chain     blockChain
	nextIn    int
	nextReset bool
	think     float64
}

// SeedWorkloadStream generates a SeedWorkload; see Stream.
type SeedWorkloadStream struct {
	cfg                  SeedWorkload
	plans                []seedPlan
	gap, first, out, app *qdist
	ids                  idAlloc
	base                 uint64
	active               sessionHeap[*swSession]
	started              int
	nextChat             int64
	resets               int  // contexts compacted at the cap
	last                 bool // the request Next gave last ended its session's plan
}

// LastOfSession reports whether the request Next gave last was its
// session's last turn (no later request belongs to that session; chat ids
// are never reused).
func (g *SeedWorkloadStream) LastOfSession() bool { return g.last }

// NewSeedWorkload validates cfg and returns its stream.
func NewSeedWorkload(cfg SeedWorkload) (*SeedWorkloadStream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", orDefault(cfg.Name, "seed workload"), err)
	}
	g := &SeedWorkloadStream{cfg: cfg, first: cfg.FirstInput.compile(), out: cfg.Output.compile(), app: cfg.Append.compile()}
	if cfg.GapS == 0 {
		g.gap = cfg.Gap.compile()
	}
	g.ids.next = 1
	g.base = g.ids.take(cfg.SharedPrefixTokens / cfg.BlockSize)

	// The plan: turn counts and append scales dealt in a seeded order, start
	// times in increasing order (session index = start order).
	r := rand.New(rand.NewPCG(cfg.Seed, splitmix64(0x5eed)))
	n := cfg.Sessions
	turns := shapedTurns(n, cfg.Requests, cfg.MinTurns, cfg.MaxTurns, cfg.TurnsSigma)
	r.Shuffle(n, func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	scales := make([]float64, n)
	for j := range scales {
		scales[j] = math.Exp(cfg.AppendScaleSigma * probit((float64(j)+0.5)/float64(n)))
	}
	r.Shuffle(n, func(i, j int) { scales[i], scales[j] = scales[j], scales[i] })
	starts := make([]float64, n)
	for i := 1; i < n; i++ {
		if cfg.StaggerS > 0 {
			starts[i] = float64(i) * cfg.StaggerS
		} else {
			starts[i] = roundMS(r.Float64() * cfg.ArrivalWindowS)
		}
	}
	slices.Sort(starts)
	g.plans = make([]seedPlan, n)
	for i := range g.plans {
		g.plans[i] = seedPlan{start: starts[i], turns: turns[i], scale: scales[i]}
	}
	return g, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Header implements Stream.
func (g *SeedWorkloadStream) Header() trace.Header {
	c := &g.cfg
	timing := fmt.Sprintf("arrival_window_s=%g", c.ArrivalWindowS)
	if c.StaggerS > 0 {
		timing = fmt.Sprintf("stagger_s=%g", c.StaggerS)
	}
	if c.GapS > 0 {
		timing += fmt.Sprintf(" gap_s=%g", c.GapS)
	} else {
		timing += " gap=drawn"
	}
	return trace.Header{
		BlockSize: c.BlockSize,
		Source:    "synth-" + orDefault(c.Name, "seed-workload"),
		Note: fmt.Sprintf("seed=%d sessions=%d requests=%d turns=%d-%d %s shared_prefix=%d max_input=%d (shaped like the seed's trace; docs/workloads.md)",
			c.Seed, c.Sessions, c.Requests, c.MinTurns, c.MaxTurns, timing, c.SharedPrefixTokens, c.MaxInputTokens),
	}
}

// Next implements Stream.
func (g *SeedWorkloadStream) Next(req *trace.Request) error {
	c := &g.cfg
	// Start sessions lazily, each as soon as it is due before the next turn.
	for g.started < len(g.plans) {
		p := g.plans[g.started]
		if at, _, ok := g.active.peek(); ok && p.start > at {
			break
		}
		s := &swSession{idx: g.started, plan: p, lastChat: -1,
			rng: rand.New(rand.NewPCG(c.Seed, splitmix64(uint64(g.started)+1)))}
		x := float64(c.SharedPrefixTokens) + max(1, math.Round(g.first.draw(s.rng)))
		s.nextIn, s.nextReset = int(min(x, float64(c.MaxInputTokens))), true
		g.active.push(p.start, uint64(s.idx), s)
		g.started++
	}
	if g.active.len() == 0 {
		return io.EOF
	}
	at, s := g.active.pop()
	if s.nextReset {
		s.chain.reset(c.BlockSize, g.base, c.SharedPrefixTokens)
		s.nextReset = false
	}
	s.chain.grow(s.nextIn, &g.ids)
	s.turn++
	out := max(1, int(math.Round(g.out.draw(s.rng))))
	fillRequest(req, "s"+strconv.Itoa(s.idx), "", g.nextChat, s.lastChat, s.turn, at, out, &s.chain)
	if s.turn > 1 {
		req.ThinkTimeS = thinkPtr(s.think)
	}
	s.lastChat = g.nextChat
	g.nextChat++
	if g.last = s.turn >= s.plan.turns; g.last {
		return nil // session over: drop it
	}
	// Schedule the next turn.
	var gap float64
	if c.GapS > 0 {
		gap = c.GapS
	} else {
		gap = roundMS(g.gap.draw(s.rng))
	}
	s.think = gap
	if c.NominalTokensPerS > 0 {
		s.think = roundMS(max(0, gap-c.NominalTTFTS-float64(out)/c.NominalTokensPerS))
	}
	x := s.chain.tokens + out + int(math.Round(s.plan.scale*g.app.draw(s.rng)))
	for x > c.MaxInputTokens {
		x = c.SharedPrefixTokens + (x-c.SharedPrefixTokens)/2
		s.nextReset = true
	}
	if s.nextReset {
		g.resets++
	}
	s.nextIn = x
	next := at + gap
	if c.GapS > 0 {
		next = s.plan.start + float64(s.turn)*c.GapS // exact, no accumulated rounding
	}
	g.active.push(next, uint64(s.idx), s)
	return nil
}
