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

// CapPolicy says what a session does when its context would exceed
// Agentic.MaxInputTokens.
type CapPolicy string

const (
	// CapCompact compacts the context the way Claude Code does near its
	// window: the shared prefix stays, the conversation is replaced by a
	// summary sized by the measured compaction ratio (repeated until it fits).
	CapCompact CapPolicy = "compact"
	// CapEnd ends the session instead: the turn that would overflow is not
	// issued.
	CapEnd CapPolicy = "end"
)

// CompactBand is a per-turn probability of context compaction for contexts
// below a size (the previous turn's input).
type CompactBand struct {
	// Below is the band's exclusive upper bound in tokens; 0 means unbounded
	// (only valid for the last band).
	Below int
	// P is the probability that the next turn compacts instead of growing.
	P float64
}

// Agentic configures the agentic coding workload. DefaultAgentic's values
// are measured on the weka Claude Code sessions; docs/workloads.md gives
// the derivation of each.
type Agentic struct {
	// Seed selects all random draws: equal Seed and config give an identical
	// stream. Each session draws from its own PCG stream derived from Seed
	// and its index, so adding sessions does not perturb existing ones.
	Seed uint64
	// BlockSize is tokens per hash id (64, as in the weka set).
	BlockSize int
	// Sessions is the number of top-level sessions started; 0 means
	// unbounded, in which case Requests or DurationS must end the stream.
	Sessions int
	// Requests, if > 0, ends the stream after this many requests (sessions
	// still active are cut off, like a measurement window).
	Requests int64
	// DurationS, if > 0, ends the stream before the first request at or
	// after this time (seconds); no session starts after it either.
	DurationS float64
	// ArrivalRate is the Poisson session arrival rate in sessions/s (the
	// data has no absolute session start times, so this is a choice).
	ArrivalRate float64
	// StaggerS, if > 0, starts sessions at fixed StaggerS-second spacing
	// instead of a Poisson process.
	StaggerS float64
	// MaxInputTokens caps a request's input (the served context window;
	// 262,144 for the Qwen3 profile). See CapPolicy.
	MaxInputTokens int
	// CapPolicy is what happens at the cap: CapCompact (default) or CapEnd.
	// A first turn above the cap is always compacted, under either policy.
	CapPolicy CapPolicy
	// SharedPrefixTokens is the system prompt + tool definitions every
	// main-agent session starts with; its whole blocks carry the same ids
	// in every session (the cross-session overlap a kv-aware router sees).
	SharedPrefixTokens int
	// SubagentProb is the probability that a main-agent turn spawns a
	// sub-agent session (its own session id, ParentSessionID set, running
	// concurrently with its parent); 0 disables sub-agents.
	SubagentProb float64
	// SubagentPrefixTokens is the sub-agents' own shared system+tool prefix.
	SubagentPrefixTokens int
	// MaxThinkS truncates think times (seconds); 0 keeps the measured tail,
	// whose maximum is 21 hours.
	MaxThinkS float64
	// CompactHazard is the per-turn compaction probability by context size,
	// bands in increasing Below order, the last one unbounded.
	CompactHazard []CompactBand
	// NominalAPIBaseS and NominalAPITokensPerS give the service time
	// assumed when spacing a session's timestamps, base + output/rate
	// seconds, so that open-loop timestamps look like the original ones. A
	// closed-loop replay uses real completion times plus think_time_s.
	NominalAPIBaseS      float64
	NominalAPITokensPerS float64
}

// DefaultAgentic is the built-in workload `pdhybrid bench` replays: 40
// Claude-Code-like sessions arriving as a Poisson process at one per 10 s —
// 1,282 requests (this draw spawns no sub-agent) over about five simulated hours.
// Seed 2 is used because its 40-session sample is the one among seeds 1–12
// whose statistics sit closest to the generator's long-run ones (seed 1's
// draw is light: mean input 71K instead of ~90K); docs/workloads.md lists
// them all.
func DefaultAgentic() Agentic {
	return Agentic{
		Seed:                 2,
		BlockSize:            64,
		Sessions:             40,
		ArrivalRate:          0.1,
		MaxInputTokens:       262144,
		CapPolicy:            CapCompact,
		SharedPrefixTokens:   15138,
		SubagentProb:         0.00142,
		SubagentPrefixTokens: 8504,
		MaxThinkS:            3600,
		CompactHazard: []CompactBand{
			{Below: 140000, P: 0.0054},
			{Below: 160000, P: 0.0347},
			{Below: 0, P: 0.1},
		},
		NominalAPIBaseS:      3.622,
		NominalAPITokensPerS: 73.0,
	}
}

// Validate reports the first inconsistent field.
func (c *Agentic) Validate() error {
	switch {
	case c.BlockSize <= 0:
		return errors.New("block size must be > 0")
	case c.Sessions < 0 || c.Requests < 0 || c.DurationS < 0:
		return errors.New("sessions, requests and duration must be >= 0")
	case c.Sessions == 0 && c.Requests == 0 && c.DurationS == 0:
		return errors.New("unbounded stream: set sessions, requests or duration")
	case c.StaggerS < 0 || (c.StaggerS == 0 && !(c.ArrivalRate > 0)):
		return errors.New("need a session arrival rate > 0 or a stagger > 0")
	case c.SharedPrefixTokens < 0 || c.SubagentPrefixTokens < 0:
		return errors.New("prefix sizes must be >= 0")
	case c.MaxInputTokens < max(c.SharedPrefixTokens, c.SubagentPrefixTokens)+4*c.BlockSize:
		return fmt.Errorf("max input %d leaves no room beyond the shared prefix", c.MaxInputTokens)
	case c.CapPolicy != CapCompact && c.CapPolicy != CapEnd:
		return fmt.Errorf("cap policy %q: want %q or %q", c.CapPolicy, CapCompact, CapEnd)
	case c.SubagentProb < 0 || c.SubagentProb > 1:
		return errors.New("sub-agent probability must be in [0,1]")
	case c.MaxThinkS < 0 || c.NominalAPIBaseS < 0 || !(c.NominalAPITokensPerS > 0):
		return errors.New("think cap and nominal API base must be >= 0, API rate > 0")
	}
	for i, b := range c.CompactHazard {
		if b.P < 0 || b.P > 1 {
			return fmt.Errorf("compaction band %d: probability %v outside [0,1]", i, b.P)
		}
		last := i == len(c.CompactHazard)-1
		if (b.Below == 0) != last || (i > 0 && !last && b.Below <= c.CompactHazard[i-1].Below) {
			return fmt.Errorf("compaction band %d: bounds must increase and only the last may be unbounded (0)", i)
		}
	}
	return nil
}

// agSession is one active (main or sub-agent) session.
type agSession struct {
	seq       uint64
	id        string
	parentID  string
	pcg       rand.PCG
	rng       *rand.Rand
	sub       bool
	turn      int // turns issued so far
	turns     int // turns in total
	lastChat  int64
	chain     blockChain
	prefix    int    // its shared-prefix tokens
	pbase     uint64 // its shared-prefix first id
	nextIn    int    // input of the next turn
	nextReset bool   // next turn starts a compacted context
	think     float64
	nSubs     int
}

// AgenticStream generates the agentic workload; see Stream.
type AgenticStream struct {
	cfg        Agentic
	cal        *wekaCalib
	rho        float64
	ids        idAlloc
	mainBase   uint64 // first id of the main-agent shared prefix
	subBase    uint64 // first id of the sub-agent shared prefix
	active     sessionHeap[*agSession]
	arrivals   *rand.Rand
	nextArrive float64
	started    int // top-level sessions started
	seq        uint64
	nextChat   int64
	emitted    int64
	done       bool
	last       bool // the request Next gave last ended its session
}

// LastOfSession reports whether the request Next gave last was its
// session's last turn (no later request belongs to that session; chat ids
// are never reused). A session cut short by the stream's request or time
// cap is not reported: that is known only after its last turn was given.
func (g *AgenticStream) LastOfSession() bool { return g.last }

// NewAgentic validates cfg and returns its stream.
func NewAgentic(cfg Agentic) (*AgenticStream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agentic: %w", err)
	}
	cfg.CompactHazard = append([]CompactBand(nil), cfg.CompactHazard...)
	g := &AgenticStream{cfg: cfg, cal: wekaTables()}
	g.rho = gaussianCopulaRho(g.cal.spearmanFirstTurns)
	// Ids start at 1; the two shared prefixes take the lowest ones.
	g.ids.next = 1
	g.mainBase = g.ids.take(cfg.SharedPrefixTokens / cfg.BlockSize)
	g.subBase = g.ids.take(cfg.SubagentPrefixTokens / cfg.BlockSize)
	g.arrivals = rand.New(rand.NewPCG(cfg.Seed, splitmix64(0xa771)))
	return g, nil
}

// Header implements Stream.
func (g *AgenticStream) Header() trace.Header {
	c := &g.cfg
	arr := fmt.Sprintf("poisson %g sessions/s", c.ArrivalRate)
	if c.StaggerS > 0 {
		arr = fmt.Sprintf("stagger %g s", c.StaggerS)
	}
	return trace.Header{
		BlockSize: c.BlockSize,
		Source:    "synth-agentic",
		Note: fmt.Sprintf("seed=%d sessions=%d requests=%d duration_s=%g arrival=%s max_input=%d cap=%s "+
			"shared_prefix=%d subagent_prob=%g max_think_s=%g (weka-calibrated)",
			c.Seed, c.Sessions, c.Requests, c.DurationS, arr, c.MaxInputTokens, c.CapPolicy,
			c.SharedPrefixTokens, c.SubagentProb, c.MaxThinkS),
	}
}

// Next implements Stream.
func (g *AgenticStream) Next(req *trace.Request) error {
	c := &g.cfg
	for {
		if g.done || (c.Requests > 0 && g.emitted >= c.Requests) {
			g.done = true
			return io.EOF
		}
		g.admitArrivals()
		if g.active.len() == 0 {
			g.done = true
			return io.EOF
		}
		at, s := g.active.pop()
		if c.DurationS > 0 && at >= c.DurationS {
			g.done = true
			return io.EOF
		}
		g.emit(req, s, at)
		return nil
	}
}

// admitArrivals starts every top-level session due no later than the
// earliest pending request, so sessions are created lazily and the stream
// never holds more than the sessions alive at the current time.
func (g *AgenticStream) admitArrivals() {
	c := &g.cfg
	for c.Sessions == 0 || g.started < c.Sessions {
		if c.DurationS > 0 && g.nextArrive >= c.DurationS {
			return
		}
		if at, _, ok := g.active.peek(); ok && g.nextArrive > at {
			return
		}
		g.startSession(g.nextArrive)
		if c.StaggerS > 0 {
			g.nextArrive = float64(g.started) * c.StaggerS
		} else {
			g.nextArrive += g.arrivals.ExpFloat64() / c.ArrivalRate
		}
	}
}

func (g *AgenticStream) newSession(id, parentID string, sub bool, s1, s2 uint64) *agSession {
	s := &agSession{seq: g.seq, id: id, parentID: parentID, sub: sub, lastChat: -1}
	g.seq++
	s.pcg = *rand.NewPCG(s1, s2)
	s.rng = rand.New(&s.pcg)
	return s
}

// startSession draws a top-level session's length and first context jointly
// (Gaussian copula with the measured rank correlation) and queues turn 1.
func (g *AgenticStream) startSession(at float64) {
	c := &g.cfg
	idx := g.started
	g.started++
	s := g.newSession("s"+strconv.Itoa(idx), "", false, c.Seed, splitmix64(uint64(idx)))
	u1, u2 := correlatedUniforms(s.rng, g.rho)
	s.turns = max(1, int(math.Round(g.cal.turns.at(u2))))
	s.prefix, s.pbase = c.SharedPrefixTokens, g.mainBase
	g.firstTurn(s, g.cal.firstContext.at(u1))
	g.active.push(at, s.seq, s)
}

// spawnSub starts a sub-agent of parent at time at.
func (g *AgenticStream) spawnSub(parent *agSession, at float64) {
	c := &g.cfg
	parent.nSubs++
	s := g.newSession(parent.id+".sub"+strconv.Itoa(parent.nSubs), parent.id, true,
		parent.rng.Uint64(), parent.rng.Uint64())
	s.turns = max(1, int(math.Round(g.cal.subTurns.draw(s.rng))))
	s.prefix, s.pbase = c.SubagentPrefixTokens, g.subBase
	g.firstTurn(s, g.cal.subFirstContext.draw(s.rng))
	g.active.push(at, s.seq, s)
}

func (g *AgenticStream) firstTurn(s *agSession, ctx float64) {
	x := float64(s.prefix) + max(1, math.Round(ctx))
	s.nextIn = int(min(x, float64(g.cfg.MaxInputTokens)))
	s.nextReset = true
}

// compact returns the context size after a compaction of x tokens.
func (g *AgenticStream) compact(s *agSession, x float64) float64 {
	r := g.cal.compactRatio.draw(s.rng)
	return float64(s.prefix) + max(1, math.Floor(r*(x-float64(s.prefix))))
}

func (g *AgenticStream) hazard(tokens int) float64 {
	for _, b := range g.cfg.CompactHazard {
		if b.Below == 0 || tokens < b.Below {
			return b.P
		}
	}
	return 0
}

// emit writes s's next request into req and schedules s's following turn.
func (g *AgenticStream) emit(req *trace.Request, s *agSession, at float64) {
	c := &g.cfg
	if s.nextReset {
		s.chain.reset(c.BlockSize, s.pbase, s.prefix)
		s.nextReset = false
	}
	s.chain.grow(s.nextIn, &g.ids)
	s.turn++
	out := max(1, int(math.Round(g.cal.output.draw(s.rng))))
	fillRequest(req, s.id, s.parentID, g.nextChat, s.lastChat, s.turn, at, out, &s.chain)
	if s.turn > 1 {
		req.ThinkTimeS = thinkPtr(roundMS(s.think))
	}
	s.lastChat = g.nextChat
	g.nextChat++
	g.emitted++

	done := at + c.NominalAPIBaseS + float64(out)/c.NominalAPITokensPerS
	if !s.sub && c.SubagentProb > 0 && s.rng.Float64() < c.SubagentProb {
		g.spawnSub(s, done)
	}
	if g.last = s.turn >= s.turns || !g.scheduleNext(s, out); g.last {
		return // session over: drop it, its memory goes with it
	}
	g.active.push(done+s.think, s.seq, s)
}

// scheduleNext draws the next turn's think time and context; false when the
// session ends at the cap.
func (g *AgenticStream) scheduleNext(s *agSession, out int) bool {
	c := &g.cfg
	th := &g.cal.think
	if s.sub {
		th = &g.cal.subThink
	}
	s.think = th.draw(s.rng)
	if c.MaxThinkS > 0 {
		s.think = min(s.think, c.MaxThinkS)
	}
	x := float64(s.chain.tokens)
	if s.rng.Float64() < g.hazard(s.chain.tokens) {
		x = g.compact(s, x)
		s.nextReset = true
	} else {
		app := &g.cal.appendTokens
		if s.turn == 1 {
			app = &g.cal.appendTurn2 // the next turn is turn 2
		}
		x += float64(out) + math.Round(app.draw(s.rng))
	}
	for x > float64(c.MaxInputTokens) {
		if c.CapPolicy == CapEnd {
			return false
		}
		x = g.compact(s, x)
		s.nextReset = true
	}
	s.nextIn = int(x)
	return true
}
