package weka

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Hash-id layout of the canonical output. Source ids are local to one
// conversation (a session file and its sub-agents), so each conversation gets
// its own 32-bit namespace:
//
//	shared prefix block j (--shared-prefix)   j + 1            (namespace 0)
//	local id L of conversation n (n from 1)   n<<32 | L
//	partial last block of chat c              1<<63 | c
//
// The source gives full blocks only; the canonical format wants
// ceil(input/block) ids, so a partial tail gets an id of its own that no
// other request shares: a radix cache does not reuse a partial page either.
const (
	nsShift    = 32
	partialBit = uint64(1) << 63
)

// Options control the conversion.
type Options struct {
	// Arrival is "stagger" (session k starts at k·Stagger s) or "poisson"
	// (exponential gaps with mean 1/Rate s; the first session at 0).
	Arrival string
	Stagger float64 // seconds between session starts
	Rate    float64 // sessions per second
	Seed    uint64
	// SharedPrefix replaces the first floor((tool_tokens+system_tokens)/block)
	// blocks of every session with ids common to all sessions (position j gets
	// the same id everywhere), modelling one Claude Code system/tool prompt.
	SharedPrefix bool
	// BlockSize overrides the files' block_size when positive.
	BlockSize int
}

// Source is one session file's bytes.
type Source struct {
	Name string
	Data []byte
}

// Skip is a record the conversion left out, and why.
type Skip struct {
	Where  string // file and JSON path
	Reason string
}

// Result is a converted set in global timestamp order (ties by chat id).
type Result struct {
	Header    trace.Header
	Requests  []trace.Request
	Sessions  int // top-level sessions converted
	Subagents int // sub-agent sessions converted
	Clamped   int // requests whose time was raised to their previous turn's
	Skips     []Skip
}

// pending is a converted request before global ordering.
type pending struct {
	req  trace.Request
	prev int // index of the session's previous request, or -1
	sess int // session order, for stable ties
}

// Convert turns session files into one canonical trace. Files are taken in
// the given order; session k in that order gets the k-th arrival time.
func Convert(srcs []Source, opt Options) (*Result, error) {
	if opt.Arrival == "" {
		opt.Arrival = "stagger"
	}
	if opt.Arrival != "stagger" && opt.Arrival != "poisson" {
		return nil, fmt.Errorf("arrival %q: expected stagger or poisson", opt.Arrival)
	}
	if opt.Arrival == "poisson" && !(opt.Rate > 0) {
		return nil, fmt.Errorf("poisson arrival needs a positive rate (sessions/s), got %v", opt.Rate)
	}
	if opt.Stagger < 0 {
		return nil, fmt.Errorf("stagger %v: expected non-negative seconds", opt.Stagger)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	c := &converter{opt: opt, res: &Result{}}
	start := 0.0
	ns := 0
	for _, src := range srcs {
		f, err := Parse(src.Data, src.Name)
		if err != nil {
			c.res.Skips = append(c.res.Skips, Skip{Where: src.Name, Reason: "whole file: " + err.Error()})
			continue
		}
		bs := f.BlockSize
		if opt.BlockSize > 0 {
			bs = opt.BlockSize
		}
		if bs <= 0 {
			c.res.Skips = append(c.res.Skips, Skip{Where: src.Name, Reason: "whole file: no block_size; give --block-size"})
			continue
		}
		if c.res.Header.BlockSize == 0 {
			c.res.Header.BlockSize = bs
		} else if bs != c.res.Header.BlockSize {
			c.res.Skips = append(c.res.Skips, Skip{Where: src.Name, Reason: fmt.Sprintf("whole file: block_size %d differs from the set's %d", bs, c.res.Header.BlockSize)})
			continue
		}
		ns++
		if c.res.Sessions > 0 {
			if opt.Arrival == "stagger" {
				start += opt.Stagger
			} else {
				start += rng.ExpFloat64() / opt.Rate
			}
		}
		id := f.ID
		if id == "" {
			id = src.Name
		}
		c.res.Sessions++
		c.session(f.Requests, sessCtx{
			id: id, where: src.Name, start: start, ns: uint64(ns), bs: bs,
			prefixBlocks: (f.ToolTokens + f.SystemTokens) / bs,
		})
	}
	c.res.Header.Version = trace.FormatVersion
	c.res.Header.Source = "weka"
	c.finish()
	return c.res, nil
}

type sessCtx struct {
	id, parent   string
	where        string
	start        float64 // absolute start of this (sub-)session
	ns           uint64
	bs           int
	prefixBlocks int
}

type converter struct {
	opt  Options
	res  *Result
	all  []pending
	sess int
}

// session converts one session's entries; sub-agents recurse into sessions
// of their own that share the hash namespace.
func (c *converter) session(entries []Entry, s sessCtx) {
	c.sess++
	order := c.sess
	prev := -1
	turn := 0
	lastTS := math.Inf(-1)
	subN := 0
	for i := range entries {
		e := &entries[i]
		where := fmt.Sprintf("%s: requests[%d]", s.where, i)
		if e.IsSubagent() {
			subN++
			c.subagent(e, s, where, subN)
			continue
		}
		if why := e.Check(s.bs); why != "" {
			c.res.Skips = append(c.res.Skips, Skip{Where: where, Reason: why})
			continue
		}
		turn++
		ts := round6(s.start + *e.T)
		if ts < lastTS {
			ts = lastTS
			c.res.Clamped++
		}
		lastTS = ts
		r := trace.Request{
			SessionID:       s.id,
			ParentSessionID: s.parent,
			Turn:            turn,
			Timestamp:       ts,
			InputLength:     *e.In,
			OutputLength:    *e.Out,
			Type:            e.Type,
			HashIDs:         c.hashes(e, s),
		}
		if turn > 1 && e.ThinkTime != nil {
			v := *e.ThinkTime
			r.ThinkTimeS = &v
		}
		c.all = append(c.all, pending{req: r, prev: prev, sess: order})
		prev = len(c.all) - 1
	}
}

func (c *converter) subagent(e *Entry, s sessCtx, where string, n int) {
	if e.T == nil || *e.T < 0 {
		c.res.Skips = append(c.res.Skips, Skip{Where: where, Reason: fmt.Sprintf("sub-agent without a valid t; its %d requests are dropped", countRequests(e.Requests))})
		return
	}
	// t is the sub-agent's end; it began duration_ms earlier. Without a
	// duration, t is the best start estimate there is.
	begin := *e.T
	if e.DurationMs != nil && *e.DurationMs >= 0 {
		begin = max(0, *e.T-*e.DurationMs/1000)
	}
	id := e.AgentID
	if id == "" {
		id = fmt.Sprintf("agent_%03d", n)
	}
	c.res.Subagents++
	c.session(e.Requests, sessCtx{
		id: s.id + "/" + id, parent: s.id, where: where,
		start: s.start + begin, ns: s.ns, bs: s.bs,
		prefixBlocks: (e.ToolTokens + e.SystemTokens) / s.bs,
	})
}

func countRequests(es []Entry) int {
	n := 0
	for i := range es {
		if es[i].IsSubagent() {
			n += countRequests(es[i].Requests)
		} else {
			n++
		}
	}
	return n
}

// hashes maps local ids into the conversation's namespace (and the shared
// prefix), leaving a placeholder for a partial tail that finish fills once
// chat ids are known.
func (c *converter) hashes(e *Entry, s sessCtx) []uint64 {
	n := trace.BlocksFor(*e.In, s.bs)
	out := make([]uint64, n)
	for j, h := range e.HashIDs {
		if c.opt.SharedPrefix && j < s.prefixBlocks {
			out[j] = uint64(j) + 1
		} else {
			out[j] = s.ns<<nsShift | uint64(h)
		}
	}
	for j := len(e.HashIDs); j < n; j++ {
		out[j] = partialBit // completed in finish
	}
	return out
}

// finish orders every request globally by (timestamp, session order, turn),
// assigns chat ids in that order, links parents and fills partial-tail ids.
func (c *converter) finish() {
	idx := make([]int, len(c.all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		pa, pb := &c.all[a], &c.all[b]
		if x := cmp.Compare(pa.req.Timestamp, pb.req.Timestamp); x != 0 {
			return x
		}
		if x := cmp.Compare(pa.sess, pb.sess); x != 0 {
			return x
		}
		return cmp.Compare(pa.req.Turn, pb.req.Turn)
	})
	chat := make([]int64, len(c.all))
	for pos, i := range idx {
		chat[i] = int64(pos)
	}
	c.res.Requests = make([]trace.Request, len(c.all))
	for pos, i := range idx {
		p := &c.all[i]
		r := p.req
		r.ChatID = int64(pos)
		r.ParentChatID = -1
		if p.prev >= 0 {
			r.ParentChatID = chat[p.prev]
		}
		for j := range r.HashIDs {
			if r.HashIDs[j] == partialBit {
				r.HashIDs[j] = partialBit | uint64(pos)
			}
		}
		c.res.Requests[pos] = r
	}
	c.all = nil
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
