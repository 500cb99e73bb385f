package synth

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// SmallAppend configures the seed's small-append microbenchmark: every
// session opens with a long prompt, then each turn appends a small amount
// (the previous reply plus a short user/tool message). It isolates the case
// the session-aware decoder is built for — a large resident context and a
// small append — with no randomness at all.
type SmallAppend struct {
	// BlockSize is tokens per hash id.
	BlockSize int
	// Sessions is the number of sessions.
	Sessions int
	// Turns is the number of requests per session.
	Turns int
	// InitialTokens is turn 1's input length.
	InitialTokens int
	// AppendTokens is the new input per turn beyond the previous prompt and
	// output: turn k's input is InitialTokens + (k−1)·(OutputTokens+AppendTokens).
	AppendTokens int
	// OutputTokens is every request's output length.
	OutputTokens int
	// GapS is the inter-turn gap in seconds: timestamps advance by GapS per
	// turn, and turns 2+ carry think_time_s = GapS so a closed-loop replay
	// waits GapS after the previous reply.
	GapS float64
	// StaggerS is the spacing of session starts in seconds.
	StaggerS float64
	// SharedPrefixTokens, if > 0, makes the first tokens of every session's
	// prompt the same blocks (a common system prompt); 0 keeps sessions
	// fully disjoint, as in the seed's benchmark.
	SharedPrefixTokens int
}

// DefaultSmallAppend is 16 sessions × 10 turns, 32K-token initial prompts,
// 512-token appends, 256-token replies, 5 s between turns, sessions 1 s
// apart: 160 requests growing from 32,768 to 39,680 tokens.
func DefaultSmallAppend() SmallAppend {
	return SmallAppend{
		BlockSize:     64,
		Sessions:      16,
		Turns:         10,
		InitialTokens: 32768,
		AppendTokens:  512,
		OutputTokens:  256,
		GapS:          5,
		StaggerS:      1,
	}
}

// Validate reports the first inconsistent field.
func (c *SmallAppend) Validate() error {
	switch {
	case c.BlockSize <= 0:
		return errors.New("block size must be > 0")
	case c.Sessions <= 0 || c.Turns <= 0:
		return errors.New("sessions and turns must be > 0")
	case c.InitialTokens <= 0 || c.AppendTokens < 0 || c.OutputTokens <= 0:
		return errors.New("initial and output tokens must be > 0, append >= 0")
	case c.GapS < 0 || c.StaggerS < 0:
		return errors.New("gap and stagger must be >= 0")
	case c.SharedPrefixTokens < 0 || c.SharedPrefixTokens > c.InitialTokens:
		return errors.New("shared prefix must be in [0, initial tokens]")
	}
	return nil
}

type saSession struct {
	idx      int
	turn     int
	lastChat int64
	chain    blockChain
}

// SmallAppendStream generates the microbenchmark; see Stream.
type SmallAppendStream struct {
	cfg      SmallAppend
	ids      idAlloc
	base     uint64
	active   sessionHeap[*saSession]
	started  int
	nextChat int64
}

// NewSmallAppend validates cfg and returns its stream.
func NewSmallAppend(cfg SmallAppend) (*SmallAppendStream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("small-append: %w", err)
	}
	g := &SmallAppendStream{cfg: cfg}
	g.ids.next = 1
	g.base = g.ids.take(cfg.SharedPrefixTokens / cfg.BlockSize)
	return g, nil
}

// Header implements Stream.
func (g *SmallAppendStream) Header() trace.Header {
	c := &g.cfg
	return trace.Header{
		BlockSize: c.BlockSize,
		Source:    "synth-small-append",
		Note: fmt.Sprintf("sessions=%d turns=%d initial=%d append=%d output=%d gap_s=%g stagger_s=%g shared_prefix=%d",
			c.Sessions, c.Turns, c.InitialTokens, c.AppendTokens, c.OutputTokens, c.GapS, c.StaggerS, c.SharedPrefixTokens),
	}
}

// Next implements Stream.
func (g *SmallAppendStream) Next(req *trace.Request) error {
	c := &g.cfg
	// Start sessions lazily, each as soon as it is due before the next turn.
	for g.started < c.Sessions {
		start := float64(g.started) * c.StaggerS
		if at, _, ok := g.active.peek(); ok && start > at {
			break
		}
		s := &saSession{idx: g.started, lastChat: -1}
		s.chain.reset(c.BlockSize, g.base, c.SharedPrefixTokens)
		g.active.push(start, uint64(g.started), s)
		g.started++
	}
	if g.active.len() == 0 {
		return io.EOF
	}
	at, s := g.active.pop()
	s.turn++
	s.chain.grow(c.InitialTokens+(s.turn-1)*(c.OutputTokens+c.AppendTokens), &g.ids)
	fillRequest(req, "s"+strconv.Itoa(s.idx), "", g.nextChat, s.lastChat, s.turn, at, c.OutputTokens, &s.chain)
	if s.turn > 1 {
		req.ThinkTimeS = thinkPtr(c.GapS)
	}
	s.lastChat = g.nextChat
	g.nextChat++
	if s.turn < c.Turns {
		g.active.push(at+c.GapS, uint64(s.idx), s)
	}
	return nil
}
