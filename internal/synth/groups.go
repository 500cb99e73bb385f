package synth

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Groups configures a multi-tenant agentic workload: sessions belong to
// prefix groups (tenants or agent types) whose members all open with the
// same long system prompt, and every session runs a fixed number of rounds,
// each appending a tool result or user message to the growing context.
// DefaultGroups is the agentic spec of BLIS, the Go simulator the simulator's
// speed is compared with (DESIGN §7), so both can be run on one workload.
type Groups struct {
	Seed      uint64
	BlockSize int
	// Groups prefix groups, each with a PrefixTokens-token shared prefix
	// (its whole blocks carry the same ids in every session of the group).
	Groups       int
	PrefixTokens int
	// Sessions arrive as a Poisson process at ArrivalRate sessions/s, each
	// in a group drawn uniformly.
	Sessions    int
	ArrivalRate float64
	// Rounds requests per session. Round k's input is the prefix plus every
	// earlier round's append and output plus its own append.
	Rounds int
	// Appends and outputs are normal draws (tokens), cut at 1.
	AppendMean, AppendStd float64
	OutputMean, OutputStd float64
	// ThinkS is the client's pause after each reply (think_time_s of rounds
	// 2+); NominalResponseS spaces the open-loop timestamps (round k at
	// start + (k−1)·(NominalResponseS + ThinkS)).
	ThinkS           float64
	NominalResponseS float64
}

// DefaultGroups is BLIS's agentic spec: 8 groups × 40K-token shared prefix,
// Poisson 0.5 sessions/s, 8 rounds, appends ~N(7000, 1500), outputs
// ~N(400, 150), 5 s think time; 634 sessions give 5,072 requests.
func DefaultGroups() Groups {
	return Groups{
		Seed: 1, BlockSize: 64,
		Groups: 8, PrefixTokens: 40000,
		Sessions: 634, ArrivalRate: 0.5,
		Rounds:     8,
		AppendMean: 7000, AppendStd: 1500,
		OutputMean: 400, OutputStd: 150,
		ThinkS: 5, NominalResponseS: 5,
	}
}

// Validate reports the first inconsistent field.
func (c *Groups) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	switch {
	case c.BlockSize <= 0:
		return errors.New("block size must be > 0")
	case c.Groups <= 0 || c.Sessions <= 0 || c.Rounds <= 0:
		return errors.New("groups, sessions and rounds must be > 0")
	case c.PrefixTokens < 0:
		return errors.New("prefix tokens must be >= 0")
	case !(c.ArrivalRate > 0) || math.IsInf(c.ArrivalRate, 0):
		return errors.New("arrival rate must be a finite number > 0")
	case bad(c.AppendMean) || bad(c.AppendStd) || bad(c.OutputMean) || bad(c.OutputStd):
		return errors.New("append and output means and deviations must be finite and >= 0")
	case bad(c.ThinkS) || bad(c.NominalResponseS):
		return errors.New("think and nominal response times must be finite and >= 0")
	}
	return nil
}

type grSession struct {
	idx, group int
	turn       int
	lastChat   int64
	lastOut    int
	start      float64
	rng        *rand.Rand
	chain      blockChain
}

// GroupsStream generates the workload; see Stream.
type GroupsStream struct {
	cfg      Groups
	ids      idAlloc
	bases    []uint64 // first id of each group's prefix
	arrivals *rand.Rand
	nextAt   float64
	active   sessionHeap[*grSession]
	started  int
	nextChat int64
	last     bool // the request Next gave last is its session's last round
}

// NewGroups validates cfg and returns its stream.
func NewGroups(cfg Groups) (*GroupsStream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	g := &GroupsStream{cfg: cfg, arrivals: rand.New(rand.NewPCG(cfg.Seed, splitmix64(0x9a0c)))}
	g.ids.next = 1
	for range cfg.Groups {
		g.bases = append(g.bases, g.ids.take(cfg.PrefixTokens/cfg.BlockSize))
	}
	return g, nil
}

// Header implements Stream.
func (g *GroupsStream) Header() trace.Header {
	c := &g.cfg
	return trace.Header{
		BlockSize: c.BlockSize,
		Source:    "synth-groups",
		Note: fmt.Sprintf("seed=%d groups=%d prefix=%d sessions=%d rate=%g rounds=%d append=N(%g,%g) output=N(%g,%g) think_s=%g",
			c.Seed, c.Groups, c.PrefixTokens, c.Sessions, c.ArrivalRate, c.Rounds, c.AppendMean, c.AppendStd, c.OutputMean, c.OutputStd, c.ThinkS),
	}
}

func normalAtLeast1(r *rand.Rand, mean, std float64) int {
	return max(1, int(math.Round(mean+std*r.NormFloat64())))
}

// Next implements Stream.
func (g *GroupsStream) Next(req *trace.Request) error {
	c := &g.cfg
	for g.started < c.Sessions {
		if at, _, ok := g.active.peek(); ok && g.nextAt > at {
			break
		}
		s := &grSession{idx: g.started, lastChat: -1, start: g.nextAt,
			rng: rand.New(rand.NewPCG(c.Seed, splitmix64(uint64(g.started)+1)))}
		s.group = s.rng.IntN(c.Groups)
		s.chain.reset(c.BlockSize, g.bases[s.group], c.PrefixTokens)
		s.chain.tokens = c.PrefixTokens // the prefix's partial block is the session's own
		g.active.push(s.start, uint64(s.idx), s)
		g.started++
		g.nextAt += g.arrivals.ExpFloat64() / c.ArrivalRate
	}
	if g.active.len() == 0 {
		return io.EOF
	}
	at, s := g.active.pop()
	s.turn++
	grown := s.chain.tokens + s.lastOut + normalAtLeast1(s.rng, c.AppendMean, c.AppendStd)
	s.chain.grow(grown, &g.ids)
	out := normalAtLeast1(s.rng, c.OutputMean, c.OutputStd)
	fillRequest(req, "g"+strconv.Itoa(s.group)+"-s"+strconv.Itoa(s.idx), "", g.nextChat, s.lastChat, s.turn, at, out, &s.chain)
	if s.turn > 1 {
		req.ThinkTimeS = thinkPtr(c.ThinkS)
	}
	s.lastChat, s.lastOut = g.nextChat, out
	g.nextChat++
	g.last = s.turn >= c.Rounds
	if !g.last {
		g.active.push(s.start+float64(s.turn)*(c.NominalResponseS+c.ThinkS), uint64(s.idx), s)
	}
	return nil
}

// LastOfSession reports whether the request Next gave last was its
// session's last round (no later request belongs to that session; chat ids
// are never reused), so a simulator may drop the session's records once it
// has ended.
func (g *GroupsStream) LastOfSession() bool { return g.last }
