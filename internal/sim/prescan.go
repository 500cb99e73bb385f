package sim

import (
	"errors"
	"io"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Session ends from a trace file. A file does not say which turn is a
// session's last, but one read through it before the run does: ScanSessionEnds
// notes, per request in file order, whether a later request belongs to the
// same session, and SessionLasts.Source hands a second read of the same
// stream to the simulator with that answer (SessionEnds), so it closes each
// session after its last turn (sessionend.go) as it does a generator's.
//
// The scan keeps one entry per session while it reads (a 64-bit hash of
// the id and the ordinal of its latest request) and one bit per request
// after. Two sessions whose ids hash alike share an entry: only the later
// of their last requests is marked, so the other session is never closed,
// which costs memory and nothing else. A chat id seen twice, or a request
// with no session id (the checker names its session after its parent's),
// marks nothing at all: the run keeps every session as before, and the
// checker, which then keeps every chat id, reports what is wrong.

// SessionLasts is the scan's answer: bit i says the stream's i-th request
// (from 0) is its session's last.
type SessionLasts struct {
	bits []uint64
	n    int
}

// ScanSessionEnds reads src to its end and returns which requests end
// their sessions; nil (and no error) when the stream reuses a chat id or
// leaves a session id out. A trace.Reader is read for its ids alone
// (trace.Reader.NextIDs): the scan needs nothing else of a line.
func ScanSessionEnds(src Source) (*SessionLasts, error) {
	var r trace.Request // its hash-id storage is reused line to line
	next := func() (uint64, int64, bool, error) {
		err := src.Next(&r)
		return hashSession(r.SessionID), r.ChatID, r.SessionID != "", err
	}
	if ids, ok := src.(idSource); ok {
		next = func() (uint64, int64, bool, error) {
			sess, chat, err := ids.NextIDs()
			return hashSessionBytes(sess), chat, len(sess) > 0, err
		}
	}
	var last lastTable
	var chats chatSet
	n := 0
	for {
		h, chat, hasSession, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !chats.add(chat) || !hasSession || n == math.MaxInt32 {
			return nil, nil
		}
		last.put(h, int32(n))
		n++
	}
	l := &SessionLasts{bits: make([]uint64, (n+63)/64), n: n}
	last.each(func(i int32) { l.bits[i/64] |= 1 << (i % 64) })
	return l, nil
}

// idSource reads a request's session and chat ids without the rest of its
// line (trace.Reader).
type idSource interface {
	NextIDs() (session []byte, chat int64, err error)
}

// chatSet is the chat ids the scan has seen: a bit each for ids from 0 up
// to 64 per request seen (traces number chats 0, 1, 2, … in file order), a
// map for the rest, so its memory stays within 8 bytes a request.
type chatSet struct {
	bits  []uint64
	n     int
	other map[int64]struct{}
}

// add records id and says whether it was new.
func (c *chatSet) add(id int64) bool {
	c.n++
	if id >= 0 && id < 64*int64(c.n)+1<<16 {
		w := int(id / 64)
		if w >= len(c.bits) {
			c.bits = append(c.bits, make([]uint64, max(w+1-len(c.bits), len(c.bits)))...)
		}
		m := uint64(1) << (id % 64)
		if c.bits[w]&m != 0 {
			return false
		}
		c.bits[w] |= m
		if _, dup := c.other[id]; dup {
			return false // seen when the bits did not reach it yet
		}
		return true
	}
	if _, dup := c.other[id]; dup {
		return false
	}
	if c.other == nil {
		c.other = map[int64]struct{}{}
	}
	c.other[id] = struct{}{}
	return true
}

// hashSession is FNV-1a of a session id.
func hashSession(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

// hashSessionBytes is hashSession of the id's bytes.
func hashSessionBytes(id []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range id {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// Source wraps a fresh read of the scanned stream (from its first request)
// so that it answers SessionEnds; l nil returns src as it is.
func (l *SessionLasts) Source(src Source) Source {
	if l == nil {
		return src
	}
	return &lastsSource{src: src, l: l, i: -1}
}

type lastsSource struct {
	src Source
	l   *SessionLasts
	i   int // the request Next gave last, from 0
}

func (s *lastsSource) Header() trace.Header { return s.src.Header() }

func (s *lastsSource) Next(r *trace.Request) error {
	err := s.src.Next(r)
	if err == nil {
		s.i++
	}
	return err
}

// LastOfSession implements SessionEnds. A stream longer than the scan
// (it changed in between) marks nothing past it.
func (s *lastsSource) LastOfSession() bool {
	i := s.i
	return i >= 0 && i < s.l.n && s.l.bits[i/64]&(1<<(i%64)) != 0
}

// Requests is how many requests the scan read: a run of the same stream
// makes room for that many latencies at once (metrics.Collector.Reserve)
// instead of growing the lists as requests end.
func (s *lastsSource) Requests() int { return s.l.n }

// countedSource is a Source that knows how many requests it holds.
type countedSource interface {
	Requests() int
}

// File and Line pass the source's location through for the checker's
// errors (a source with none is numbered from 1, as checkedSource does).
func (s *lastsSource) File() string {
	if l, ok := s.src.(locatedSource); ok {
		return l.File()
	}
	return "built-in workload"
}

func (s *lastsSource) Line() int {
	if l, ok := s.src.(locatedSource); ok {
		return l.Line()
	}
	return s.i + 1
}
