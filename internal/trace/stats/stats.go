// Package stats computes a canonical trace's summary in one streaming pass:
// request and session counts, token, turn, gap and think-time distributions,
// and the ideal prefix-cache hit ratio an infinite radix cache would see.
//
// Memory grows with unique blocks (the prefix trie), sessions and distinct
// sample values, never with the number of lines: a request's hash ids are
// folded into the trie and forgotten.
package stats

import (
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Report is what `pdhybrid trace stats --json` prints.
type Report struct {
	Source            string `json:"source,omitempty"`
	Requests          int    `json:"requests"`
	Sessions          int    `json:"sessions"`
	SubagentSessions  int    `json:"subagent_sessions"` // sessions with a parent_session_id
	BlockSize         int    `json:"block_size"`
	GlobalTimeOrdered bool   `json:"global_time_ordered"`

	DurationS float64 `json:"duration_s"` // last minus first timestamp

	TurnsPerSession Summary `json:"turns_per_session"`
	InputTokens     Summary `json:"input_tokens"`
	OutputTokens    Summary `json:"output_tokens"`
	// InterTurnGapS is arrival-to-arrival time between consecutive turns of a
	// session (timestamp of turn k minus timestamp of turn k−1).
	InterTurnGapS Summary `json:"inter_turn_gap_s"`
	// ThinkTimeS is the think_time_s field where the trace records it.
	ThinkTimeS Summary `json:"think_time_s"`

	TotalInputTokens  int64 `json:"total_input_tokens"`
	TotalOutputTokens int64 `json:"total_output_tokens"`

	// BlocksRequested counts hash ids over all requests; BlocksHit those whose
	// whole chain up to and including them was requested before (prefix
	// matching, as a radix cache matches); UniqueBlocks the trie's size.
	BlocksRequested int64 `json:"blocks_requested"`
	BlocksHit       int64 `json:"blocks_hit"`
	UniqueBlocks    int64 `json:"unique_blocks"`
	// IdealCacheHitRatio = BlocksHit / BlocksRequested: an infinite cache that
	// never evicts.
	IdealCacheHitRatio float64 `json:"ideal_cache_hit_ratio"`
	// CrossSessionHitBlocks are hits on trie nodes first created by another
	// session; CrossSessionShare = CrossSessionHitBlocks / BlocksHit.
	CrossSessionHitBlocks int64   `json:"cross_session_hit_blocks"`
	CrossSessionShare     float64 `json:"cross_session_shared_prefix_share"`
}

// Collector accumulates a Report. Add requests in file order.
type Collector struct {
	rep trace.Header

	sessIdx   map[string]int32
	sessTurns []int32
	sessLast  []float64
	subagents int

	in, out, gap, think *Dist

	trie      map[edge]uint32
	firstSess []int32 // node id − 1 → session that created it

	requests        int
	totalIn, totOut int64
	blocks, hits    int64
	cross           int64
	first, last     float64
	lastSeen        float64
	ordered         bool

	deriver *trace.Checker // only for files without session ids
	line    int
}

// edge is a trie edge: from node parent (0 is the root) along hash id.
type edge struct {
	parent uint32
	id     uint64
}

// NewCollector starts an empty report for a file with the given header.
func NewCollector(h trace.Header) *Collector {
	return &Collector{
		rep:     h,
		sessIdx: map[string]int32{},
		in:      NewIntDist(), out: NewIntDist(),
		gap: NewTimeDist(), think: NewTimeDist(),
		trie:    map[edge]uint32{},
		ordered: true,
	}
}

// Add folds one request in. Requests without a session id get one derived
// from the parent chain (see trace.Checker).
func (c *Collector) Add(r *trace.Request) {
	c.line++
	if r.SessionID == "" || r.Turn == 0 {
		if c.deriver == nil {
			c.deriver = trace.NewChecker(0)
		}
		c.deriver.Check(r, c.line)
		c.deriver.Accept(r, c.line)
	}
	if c.requests == 0 {
		c.first, c.last = r.Timestamp, r.Timestamp
	} else if r.Timestamp < c.lastSeen {
		c.ordered = false
	}
	c.lastSeen = r.Timestamp
	c.first = min(c.first, r.Timestamp)
	c.last = max(c.last, r.Timestamp)
	c.requests++

	s, ok := c.sessIdx[r.SessionID]
	if !ok {
		s = int32(len(c.sessTurns))
		c.sessIdx[r.SessionID] = s
		c.sessTurns = append(c.sessTurns, 0)
		c.sessLast = append(c.sessLast, r.Timestamp)
		if r.ParentSessionID != "" {
			c.subagents++
		}
	} else {
		c.gap.Add(r.Timestamp - c.sessLast[s])
		c.sessLast[s] = r.Timestamp
	}
	c.sessTurns[s]++

	c.in.Add(float64(r.InputLength))
	c.out.Add(float64(r.OutputLength))
	c.totalIn += int64(r.InputLength)
	c.totOut += int64(r.OutputLength)
	if r.ThinkTimeS != nil {
		c.think.Add(*r.ThinkTimeS)
	}
	c.walk(r.HashIDs, s)
}

// walk matches ids against the trie from the root: every block up to the
// first miss is a hit; from the first miss on, the rest of the chain is new
// and is inserted.
func (c *Collector) walk(ids []uint64, sess int32) {
	c.blocks += int64(len(ids))
	var node uint32
	i := 0
	for ; i < len(ids); i++ {
		next, ok := c.trie[edge{node, ids[i]}]
		if !ok {
			break
		}
		c.hits++
		if c.firstSess[next-1] != sess {
			c.cross++
		}
		node = next
	}
	for ; i < len(ids); i++ {
		c.firstSess = append(c.firstSess, sess)
		next := uint32(len(c.firstSess))
		c.trie[edge{node, ids[i]}] = next
		node = next
	}
}

// Report computes the summary of everything added so far.
func (c *Collector) Report() Report {
	turns := NewIntDist()
	for _, t := range c.sessTurns {
		turns.Add(float64(t))
	}
	r := Report{
		Source:                c.rep.Source,
		Requests:              c.requests,
		Sessions:              len(c.sessTurns),
		SubagentSessions:      c.subagents,
		BlockSize:             c.rep.BlockSize,
		GlobalTimeOrdered:     c.ordered,
		DurationS:             c.last - c.first,
		TurnsPerSession:       turns.Summary(),
		InputTokens:           c.in.Summary(),
		OutputTokens:          c.out.Summary(),
		InterTurnGapS:         c.gap.Summary(),
		ThinkTimeS:            c.think.Summary(),
		TotalInputTokens:      c.totalIn,
		TotalOutputTokens:     c.totOut,
		BlocksRequested:       c.blocks,
		BlocksHit:             c.hits,
		UniqueBlocks:          int64(len(c.firstSess)),
		CrossSessionHitBlocks: c.cross,
	}
	if c.blocks > 0 {
		r.IdealCacheHitRatio = float64(c.hits) / float64(c.blocks)
	}
	if c.hits > 0 {
		r.CrossSessionShare = float64(c.cross) / float64(c.hits)
	}
	return r
}
