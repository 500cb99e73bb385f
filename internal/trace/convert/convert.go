// Package convert opens a trace in any supported source format as a stream of
// canonical requests in global timestamp order, counting (never silently
// dropping) the records it has to skip. `trace convert` writes the stream;
// `trace stats` can summarise it without an intermediate file.
package convert

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/mooncake"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
	"github.com/pdhybrid/pdhybrid/internal/trace/weka"
)

// Formats and their default block sizes (tokens per hash id). Canonical files
// carry their own in the header; 0 means "take it from the file".
var DefaultBlockSize = map[string]int{
	"weka":      0, // from each session file (64)
	"mooncake":  mooncake.DefaultBlockSize,
	"bailian":   16,
	"seed":      24,
	"canonical": 0,
	"realrun":   16, // vLLM's block size; the run's meta.json states its own
}

// Options select the source format and its conversion choices.
type Options struct {
	From      string // weka, mooncake, bailian, seed or canonical
	BlockSize int    // overrides the format's block size when positive
	Weka      weka.Options
	// Strict turns the first skipped record into an error.
	Strict bool
	// Sort buffers a pass-through file in memory and sorts it by timestamp
	// when it is not already in order; without it such a file is an error.
	Sort bool
}

// Skip is a record left out and why.
type Skip struct {
	Where  string // file:line or file: JSON path
	Reason string
}

// Stream is an opened source. Read Header, then call Run once.
type Stream struct {
	Header trace.Header
	// Skips lists every record left out, in the order met.
	Skips []Skip
	// Notes are human-readable facts about the conversion (sessions inferred,
	// timestamps clamped, ...), for stderr.
	Notes []string

	opt  Options
	path string
	run  func(s *Stream, emit func(*trace.Request) error) error
}

// ErrStrict is wrapped by the error Run returns when Strict met a skip.
var ErrStrict = errors.New("record skipped under --strict")

// Open prepares path for conversion.
func Open(path string, opt Options) (*Stream, error) {
	if _, ok := DefaultBlockSize[opt.From]; !ok {
		return nil, fmt.Errorf("unknown source format %q: expected weka, mooncake, bailian, seed, canonical or realrun", opt.From)
	}
	s := &Stream{opt: opt, path: path}
	bs := opt.BlockSize
	if bs <= 0 {
		bs = DefaultBlockSize[opt.From]
	}
	switch opt.From {
	case "weka":
		wo := opt.Weka
		wo.BlockSize = opt.BlockSize
		srcs, err := weka.Load(path)
		if err != nil {
			return nil, err
		}
		res, err := weka.Convert(srcs, wo)
		if err != nil {
			return nil, err
		}
		for _, sk := range res.Skips {
			s.Skips = append(s.Skips, Skip{Where: sk.Where, Reason: sk.Reason})
		}
		s.Header = res.Header
		s.Header.Note = wekaNote(wo)
		s.Notes = append(s.Notes, fmt.Sprintf("weka: %d sessions, %d sub-agent sessions, %d requests; %d timestamps clamped to their previous turn's", res.Sessions, res.Subagents, len(res.Requests), res.Clamped))
		s.run = func(s *Stream, emit func(*trace.Request) error) error {
			if err := s.strictErr(); err != nil {
				return err
			}
			for i := range res.Requests {
				if err := emit(&res.Requests[i]); err != nil {
					return err
				}
			}
			return nil
		}
	case "mooncake":
		s.Header = trace.Header{Version: trace.FormatVersion, BlockSize: bs, Source: "mooncake"}
		s.run = runMooncake
	case "realrun":
		return s, s.openRealRun()
	default:
		return s, s.openPassThrough(bs)
	}
	return s, nil
}

func wekaNote(o weka.Options) string {
	arr := fmt.Sprintf("stagger %gs", o.Stagger)
	if o.Arrival == "poisson" {
		arr = fmt.Sprintf("poisson %g sessions/s seed %d", o.Rate, o.Seed)
	}
	if o.SharedPrefix {
		arr += ", shared prefix"
	}
	return "arrival " + arr
}

// Run streams every converted request to emit, in global timestamp order.
// The *Request passed to emit is only valid during the call.
func (s *Stream) Run(emit func(*trace.Request) error) error {
	return s.run(s, emit)
}

func (s *Stream) skip(where, reason string) error {
	s.Skips = append(s.Skips, Skip{Where: where, Reason: reason})
	return s.strictErr()
}

func (s *Stream) strictErr() error {
	if s.opt.Strict && len(s.Skips) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrStrict, s.Skips[0].Where, s.Skips[0].Reason)
	}
	return nil
}

// runMooncake reads every line (the Mooncake file is small: 12k lines),
// sorts by timestamp if the file is not in order, then infers sessions.
func runMooncake(s *Stream, emit func(*trace.Request) error) error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	bs := s.Header.BlockSize
	var recs []mooncake.Record
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			rec, perr := mooncake.ParseLine(b)
			if perr == nil && len(rec.HashIDs) != trace.BlocksFor(rec.InputLength, bs) {
				perr = &trace.Error{Field: "hash_ids", Msg: fmt.Sprintf("has %d ids, expected ceil(input_length %d / block_size %d) = %d", len(rec.HashIDs), rec.InputLength, bs, trace.BlocksFor(rec.InputLength, bs))}
			}
			if perr != nil {
				if err := s.skip(fmt.Sprintf("%s:%d", s.path, line), reasonOf(perr)); err != nil {
					return err
				}
			} else {
				recs = append(recs, rec)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: read after line %d: %w", s.path, line, err)
		}
	}
	if !slices.IsSortedFunc(recs, byTime) {
		slices.SortStableFunc(recs, byTime)
		s.Notes = append(s.Notes, "mooncake: input was not in timestamp order; sorted (stable)")
	}
	inf := mooncake.NewInferrer()
	for _, rec := range recs {
		r := inf.Add(rec)
		if err := emit(&r); err != nil {
			return err
		}
	}
	s.Notes = append(s.Notes, fmt.Sprintf("mooncake: %d requests; inferred %d sessions and %d continuations (%d forks from an already-continued parent and %d partial matches opened new sessions)",
		len(recs), inf.Sessions, inf.Continuations, inf.Forks, inf.Partial))
	return nil
}

func byTime(a, b mooncake.Record) int { return cmp.Compare(a.TimestampMs, b.TimestampMs) }

// openPassThrough reads a canonical-schema file (Bailian, the seed's, or our
// own) and validates every request with trace.Checker, deriving missing
// session ids and turns; bad requests are skipped with their reasons.
func (s *Stream) openPassThrough(bs int) error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	rd, err := trace.NewReader(f, s.path, bs)
	if err != nil {
		f.Close()
		return err
	}
	s.Header = rd.Header()
	if s.opt.BlockSize > 0 {
		s.Header.BlockSize = s.opt.BlockSize
	}
	if s.Header.BlockSize <= 0 {
		f.Close()
		return fmt.Errorf("%s: no header and no block size: give --block-size", s.path)
	}
	if !rd.HasHeader() {
		s.Header.Source = s.opt.From
	}
	s.run = func(s *Stream, emit func(*trace.Request) error) error {
		defer f.Close()
		return s.passThrough(rd, emit)
	}
	return nil
}

func (s *Stream) passThrough(rd *trace.Reader, emit func(*trace.Request) error) error {
	chk := trace.NewChecker(s.Header.BlockSize)
	var buf []trace.Request
	var req trace.Request
	last, n := 0.0, 0
	for {
		err := rd.Next(&req)
		if err == io.EOF {
			break
		}
		var te *trace.Error
		if errors.As(err, &te) {
			if err := s.skip(fmt.Sprintf("%s:%d", s.path, te.Line), reasonOf(te)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		line := rd.Line()
		if probs := chk.Check(&req, line); len(probs) > 0 {
			chk.Reject(&req, line)
			if err := s.skip(fmt.Sprintf("%s:%d", s.path, line), joinProblems(probs)); err != nil {
				return err
			}
			continue
		}
		chk.Accept(&req, line)
		if n > 0 && req.Timestamp < last && !s.opt.Sort && buf == nil {
			return fmt.Errorf("%s:%d: timestamp %v is earlier than the previous request's %v; the output must be in global timestamp order: rerun with --sort (buffers the file in memory)", s.path, line, req.Timestamp, last)
		}
		last, n = max(last, req.Timestamp), n+1
		if s.opt.Sort {
			cp := req
			cp.HashIDs = slices.Clone(req.HashIDs)
			buf = append(buf, cp)
			continue
		}
		if err := emit(&req); err != nil {
			return err
		}
	}
	if s.opt.Sort {
		if !slices.IsSortedFunc(buf, reqByTime) {
			slices.SortStableFunc(buf, reqByTime)
			s.Notes = append(s.Notes, fmt.Sprintf("%s: input was not in timestamp order; sorted (stable)", s.Header.Source))
		}
		for i := range buf {
			if err := emit(&buf[i]); err != nil {
				return err
			}
		}
	}
	s.Notes = append(s.Notes, fmt.Sprintf("%s: %d requests in %d sessions passed validation", s.Header.Source, n, chk.Sessions()))
	return nil
}

func reqByTime(a, b trace.Request) int { return cmp.Compare(a.Timestamp, b.Timestamp) }

func joinProblems(ps []*trace.Error) string {
	var b bytes.Buffer
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(reasonOf(p))
	}
	return b.String()
}

// reasonOf words a located error without its location (the skip's Where
// carries file and line).
func reasonOf(err error) string {
	var te *trace.Error
	if !errors.As(err, &te) {
		return err.Error()
	}
	if te.Field != "" {
		return fmt.Sprintf("field %q: %s", te.Field, te.Msg)
	}
	return te.Msg
}

// openRealRun reads a real serving run (a realruns CSV with its meta.json)
// and rebuilds its prompts' identity from the client's workload
// (internal/trace/realrun states the assumptions; the header's note
// repeats them). The run's own block size is used unless BlockSize is set.
func (s *Stream) openRealRun() error {
	r, err := realrun.Load(s.path)
	if err != nil {
		return err
	}
	if s.opt.BlockSize > 0 {
		r.Meta.Server.BlockSize = s.opt.BlockSize
	}
	h, reqs := r.Trace(realrun.Options{})
	s.Header = h
	s.Notes = append(s.Notes, fmt.Sprintf("realrun: %d requests (%d completed in the real run), %d distinct prompts in %d groups", len(reqs), r.Meta.NOK,
		r.Meta.Client.Data.SharedPrefix.Groups*r.Meta.Client.Data.SharedPrefix.PromptsPerGroup, r.Meta.Client.Data.SharedPrefix.Groups))
	s.run = func(s *Stream, emit func(*trace.Request) error) error {
		for i := range reqs {
			if err := emit(&reqs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}
