// Package sample takes a deterministic subset of a canonical trace's sessions
// in two streaming passes: the first learns each session's start, turns and
// longest input, the second writes the requests of the sessions kept.
//
// Sub-agent sessions (parent_session_id set) travel with their top-level
// session: every decision is made per family (a root session and all the
// sub-agents under it) on the root's start and turns and the family's longest
// input, so a sample never keeps a sub-agent without the session that spawned
// it.
package sample

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Options select sessions. Filters apply in this order: min turns, duration,
// max input length (drop), rate, first N.
type Options struct {
	FirstN   int     // keep at most this many families, in order of first appearance; 0 = no limit
	Rate     float64 // keep each family with this probability (decided by hashing its id with Seed)
	Seed     uint64
	MinTurns int     // keep families whose root session has at least this many turns
	Duration float64 // keep families starting within this many seconds of the trace's first request; 0 = no limit
	// MaxInputLen, when positive, limits input_length: Long "drop" drops every
	// family with a longer request, "truncate" cuts those requests to
	// MaxInputLen tokens (and their hash ids to ceil(MaxInputLen/block)).
	MaxInputLen int
	Long        string
}

// Report counts what the sample did.
type Report struct {
	SessionsIn, SessionsOut int
	RequestsIn, RequestsOut int
	FamiliesIn, FamiliesOut int

	DroppedMinTurns    int // families
	DroppedDuration    int
	DroppedRate        int
	DroppedFirstN      int
	DroppedLong        int // families dropped for --long drop
	DroppedLongReqs    int // requests in those families
	TruncatedSessions  int
	TruncatedRequests  int
	TruncatedBlocksCut int64
}

type family struct {
	id       string
	start    float64
	turns    int
	maxInput int
	keep     bool
}

// Plan is the first pass's result.
type Plan struct {
	opt      Options
	fam      []family
	famOf    map[string]int32 // session id → family
	rep      Report
	deriver  *trace.Checker
	minStart float64
}

func (o Options) check() error {
	if o.Rate < 0 || o.Rate > 1 || math.IsNaN(o.Rate) {
		return fmt.Errorf("rate %v: expected a probability in [0,1]", o.Rate)
	}
	if o.FirstN < 0 || o.MinTurns < 0 || o.Duration < 0 || o.MaxInputLen < 0 {
		return fmt.Errorf("first-n, min-turns, duration and max-input-len must be non-negative")
	}
	if o.MaxInputLen > 0 && o.Long != "drop" && o.Long != "truncate" {
		return fmt.Errorf("long %q: expected drop or truncate", o.Long)
	}
	return nil
}

// NewPlan reads the whole trace once and decides which families to keep.
func NewPlan(r *trace.Reader, opt Options) (*Plan, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	p := &Plan{opt: opt, famOf: map[string]int32{}, minStart: math.Inf(1)}
	var req trace.Request
	for {
		err := r.Next(&req)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		// The numbers' range checks of trace validate: a sample of a bad
		// trace is refused where the value is, not carried on.
		if errs := trace.CheckNumbers(&req, r.Line(), r.Header().BlockSize); len(errs) > 0 {
			e := *errs[0]
			e.File = r.File()
			return nil, &e
		}
		p.derive(&req, r.Line())
		p.rep.RequestsIn++
		f := p.family(&req)
		p.minStart = min(p.minStart, req.Timestamp)
		if req.ParentSessionID == "" || req.SessionID == p.fam[f].id {
			p.fam[f].turns = max(p.fam[f].turns, req.Turn)
			p.fam[f].start = min(p.fam[f].start, req.Timestamp)
		}
		p.fam[f].maxInput = max(p.fam[f].maxInput, req.InputLength)
	}
	p.decide()
	return p, nil
}

// derive fills session ids for files that lack them (see trace.Checker).
func (p *Plan) derive(req *trace.Request, line int) {
	if req.SessionID != "" && req.Turn != 0 {
		return
	}
	if p.deriver == nil {
		p.deriver = trace.NewChecker(0)
	}
	p.deriver.Check(req, line)
	p.deriver.Accept(req, line)
}

// family returns the family index of req's session, creating it (and, for a
// sub-agent, tying it to its parent's family) on first sight.
func (p *Plan) family(req *trace.Request) int32 {
	if f, ok := p.famOf[req.SessionID]; ok {
		return f
	}
	p.rep.SessionsIn++
	if req.ParentSessionID != "" {
		if f, ok := p.famOf[req.ParentSessionID]; ok {
			p.famOf[req.SessionID] = f
			return f
		}
	}
	f := int32(len(p.fam))
	p.fam = append(p.fam, family{id: req.SessionID, start: req.Timestamp})
	p.famOf[req.SessionID] = f
	return f
}

func (p *Plan) decide() {
	o := p.opt
	kept := 0
	for i := range p.fam {
		f := &p.fam[i]
		switch {
		case f.turns < o.MinTurns:
			p.rep.DroppedMinTurns++
		case o.Duration > 0 && f.start-p.minStart >= o.Duration:
			p.rep.DroppedDuration++
		case o.MaxInputLen > 0 && o.Long == "drop" && f.maxInput > o.MaxInputLen:
			p.rep.DroppedLong++
		case o.Rate < 1 && unit(o.Seed, f.id) >= o.Rate:
			p.rep.DroppedRate++
		case o.FirstN > 0 && kept >= o.FirstN:
			p.rep.DroppedFirstN++
		default:
			f.keep = true
			kept++
		}
	}
	p.rep.FamiliesIn, p.rep.FamiliesOut = len(p.fam), kept
}

// unit maps (seed, id) to [0,1) so that a session's fate depends on its id
// and the seed only, not on the order or content of other sessions.
func unit(seed uint64, id string) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(id))
	x := h.Sum64()
	// Finalise (splitmix64) so that nearby ids do not give nearby values.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// Apply reads the trace again and writes the kept requests, in file order.
func (p *Plan) Apply(r *trace.Reader, w *trace.Writer) (Report, error) {
	rep := p.rep
	bs := r.Header().BlockSize
	truncated := map[string]bool{}
	p.deriver = nil
	var req trace.Request
	for {
		err := r.Next(&req)
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, err
		}
		p.derive(&req, r.Line())
		f, ok := p.famOf[req.SessionID]
		if !ok {
			return rep, fmt.Errorf("%s changed between passes: session %q unseen in the first", r.Header().Source, req.SessionID)
		}
		if !p.fam[f].keep {
			if p.opt.Long == "drop" && p.opt.MaxInputLen > 0 && p.fam[f].maxInput > p.opt.MaxInputLen {
				rep.DroppedLongReqs++
			}
			continue
		}
		if p.opt.Long == "truncate" && p.opt.MaxInputLen > 0 && req.InputLength > p.opt.MaxInputLen {
			req.InputLength = p.opt.MaxInputLen
			if n := trace.BlocksFor(req.InputLength, bs); bs > 0 && n < len(req.HashIDs) {
				rep.TruncatedBlocksCut += int64(len(req.HashIDs) - n)
				req.HashIDs = req.HashIDs[:n]
			}
			rep.TruncatedRequests++
			truncated[req.SessionID] = true
		}
		if err := w.Write(&req); err != nil {
			return rep, err
		}
		rep.RequestsOut++
	}
	kept := map[string]bool{}
	for s, f := range p.famOf {
		if p.fam[f].keep {
			kept[s] = true
		}
	}
	rep.SessionsOut = len(kept)
	rep.TruncatedSessions = len(truncated)
	return rep, w.Flush()
}
