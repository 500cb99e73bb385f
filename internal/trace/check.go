package trace

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/pdhybrid/pdhybrid/internal/idtable"
)

// Checker verifies a trace's invariants one request at a time, in file order:
//
//   - chat_id is unique;
//   - parent_chat_id is -1 or the chat id of an earlier request of the same
//     session (the previous turn);
//   - turns increase within a session, starting at 1 at the root;
//   - timestamps are finite, in [0, MaxSeconds] and do not go backwards
//     within a session;
//   - lengths are non-negative and len(hash_ids) == ceil(input_length/block_size);
//   - think_time_s, when present, is finite and in [0, MaxSeconds].
//
// It also fills a missing session_id and turn from the parent chain, which is
// how Bailian-style files (chat_id/parent_chat_id only) get their sessions:
// a root opens session "s<chat_id>" and every child inherits its parent's
// session with the parent's turn + 1.
//
// Memory grows with the number of requests (one small record per chat id, to
// answer "does the parent exist"), never with their hash ids.
// MaxSeconds bounds a trace's times (timestamps, think times): 10^9 s,
// about 31 years from the trace start. A larger number is an error in the
// file, not a workload, and past it float64 seconds lose the microsecond
// resolution the simulator steps by (at 10^308, adding a prefill's
// seconds changes nothing, and every latency reads 0).
const MaxSeconds = 1e9

type Checker struct {
	blockSize int
	chats     idtable.Table[chatRef] // chat ids come 0, 1, 2, … in file order: a slice over a sliding window, not a map
	sessIdx   map[string]int32
	sessions  []sessState
	nSessions int      // distinct sessions accepted
	free      []int32  // sessions slots a Forget emptied
	forgets   bool     // TrackForgets: sessions keep their chat ids
	memo      sessMemo // Check's session lookup, for the Accept after it
	lastSlot  int32    // the session slot of the request accepted last (SessionSlot)

	requests  int
	lastTS    float64
	unordered int // requests whose timestamp is below the previous line's
	firstBack int // line of the first such request
}

type chatRef struct {
	sess     int32 // index into sessions; -1 when the request was rejected
	turn     int32
	line     int32
	rejected bool
	ts       float64
}

// sessMemo is the session index Check found for a session id (ok: the
// session is known), so that the Accept following it need not look again.
// Any Accept or Forget clears it.
type sessMemo struct {
	id    string
	idx   int32
	ok    bool
	valid bool
}

type sessState struct {
	id       string
	lastTurn int
	lastTS   float64
	chats    []int64 // with TrackForgets: its accepted chat ids, for Forget
}

// TrackForgets makes the checker keep each session's chat ids, so that
// Forget can drop them: memory then follows the sessions not forgotten.
// Call it before the first Accept.
func (c *Checker) TrackForgets() { c.forgets = true }

// Forget drops a session and its requests (TrackForgets), as if they had
// never been read: a caller that bounds its memory by forgetting idle
// sessions (the simulator's --session-idle-forget). A later turn of the
// session is reported as naming a parent not on an earlier line, and a
// reused chat id of it is not reported as a duplicate.
func (c *Checker) Forget(session string) {
	if i, ok := c.sessIdx[session]; ok && c.forgets {
		c.forgetAt(i, session)
	}
}

// SessionSlot is the slot of the session of the request Accept took last:
// a dense number in [0, sessions held + slots freed), the same for every
// request of the session, and given to a later session once Forget has
// dropped this one. The simulator's replay indexes its sessions by it, so
// a session id is hashed once a request, here.
func (c *Checker) SessionSlot() int32 { return c.lastSlot }

// ForgetSlot is Forget of the session in the given slot (SessionSlot),
// which it frees; a slot that holds no session is left as it is.
func (c *Checker) ForgetSlot(i int32) {
	if c.forgets && i >= 0 && int(i) < len(c.sessions) && c.sessions[i].id != "" {
		c.forgetAt(i, c.sessions[i].id)
	}
}

func (c *Checker) forgetAt(i int32, session string) {
	for _, id := range c.sessions[i].chats {
		c.chats.Delete(id)
	}
	delete(c.sessIdx, session)
	c.memo = sessMemo{}
	c.sessions[i] = sessState{}
	c.free = append(c.free, i)
}

// Tracked is how many sessions and chat ids the checker holds now.
func (c *Checker) Tracked() (sessions, chats int) { return len(c.sessIdx), c.chats.Len() }

// NewChecker checks against the given block size (tokens per hash id); a
// block size of 0 skips the hash-length check.
func NewChecker(blockSize int) *Checker {
	return &Checker{blockSize: blockSize, sessIdx: map[string]int32{}}
}

// forgotNote is what a missing parent may also mean when sessions are
// forgotten.
func (c *Checker) forgotNote() string {
	if !c.forgets {
		return ""
	}
	return " (or its session was forgotten after going idle: raise --session-idle-forget)"
}

// Check validates r, which was read from the given line, against the schema
// and against everything accepted or rejected before. It fills r.SessionID and
// r.Turn when they are missing (empty / 0). The returned errors carry Line and
// Field; the caller adds File. Check records nothing: follow it with Accept
// (r goes into the trace) or Reject (r is dropped, and its children will be
// reported as orphans of a dropped request).
func (c *Checker) Check(r *Request, line int) []*Error {
	var errs []*Error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if prev, dup := c.chats.Get(r.ChatID); dup {
		bad("chat_id", "%d already used on line %d; expected a chat id unique in the file", r.ChatID, prev.line)
	}
	errs = append(errs, CheckNumbers(r, line, c.blockSize)...)
	switch {
	case r.ParentChatID < -1:
		bad("parent_chat_id", "got %d, expected -1 (session root) or an earlier chat id", r.ParentChatID)
	case r.ParentChatID == -1:
		if r.SessionID == "" {
			r.SessionID = "s" + strconv.FormatInt(r.ChatID, 10)
		}
		if r.Turn == 0 {
			r.Turn = 1
		}
		if r.Turn != 1 {
			bad("turn", "got %d, expected 1 for a session root (parent_chat_id -1)", r.Turn)
		}
	default:
		p, ok := c.chats.Get(r.ParentChatID)
		switch {
		case !ok:
			bad("parent_chat_id", "%d does not appear on an earlier line; expected the chat id of the session's previous turn%s", r.ParentChatID, c.forgotNote())
		case p.rejected:
			bad("parent_chat_id", "%d (line %d) was dropped, so this turn has no parent", r.ParentChatID, p.line)
		default:
			ps := c.sessions[p.sess].id
			if r.SessionID == "" {
				r.SessionID = ps
			}
			if r.SessionID == ps { // the parent's session: its index is known
				c.memo = sessMemo{id: ps, idx: p.sess, ok: true, valid: true}
			} else {
				bad("session_id", "got %q, expected %q, the session of parent chat %d (line %d)", r.SessionID, ps, r.ParentChatID, p.line)
			}
			if r.Turn == 0 {
				r.Turn = int(p.turn) + 1
			}
			if r.Turn <= int(p.turn) {
				bad("turn", "got %d, expected more than the parent's turn %d (line %d)", r.Turn, p.turn, p.line)
			}
			if r.Timestamp < p.ts {
				bad("timestamp", "got %v, earlier than the parent's %v (line %d); expected time not to go backwards within a session", r.Timestamp, p.ts, p.line)
			}
		}
	}
	i, ok := c.sessionOf(r.SessionID)
	if ok && r.SessionID != "" {
		s := c.sessions[i]
		if r.Turn <= s.lastTurn && r.ParentChatID != -1 {
			bad("turn", "got %d, expected more than %d, the session's latest turn so far (is this a second branch from one parent?)", r.Turn, s.lastTurn)
		}
		if r.ParentChatID == -1 {
			bad("parent_chat_id", "session %q already has a root; expected the chat id of its previous turn", r.SessionID)
		}
	}
	return errs
}

// sessionOf is the session's index, from the memo when Check found it.
func (c *Checker) sessionOf(id string) (int32, bool) {
	if c.memo.valid && c.memo.id == id {
		return c.memo.idx, c.memo.ok
	}
	i, ok := c.sessIdx[id]
	c.memo = sessMemo{id: id, idx: i, ok: ok, valid: true}
	return i, ok
}

// CheckNumbers range-checks r's numbers on their own (lengths, times, the
// hash-id count against blockSize, 0 skipping that check): the part of
// Check that needs no memory of earlier lines, for readers that keep none
// (trace stats). The errors carry Line and Field; the caller adds File.
func CheckNumbers(r *Request, line, blockSize int) []*Error {
	var errs []*Error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if r.InputLength < 0 {
		bad("input_length", "got %d, expected a non-negative token count", r.InputLength)
	}
	if r.OutputLength < 0 {
		bad("output_length", "got %d, expected a non-negative token count", r.OutputLength)
	}
	if math.IsNaN(r.Timestamp) || math.IsInf(r.Timestamp, 0) || r.Timestamp < 0 || r.Timestamp > MaxSeconds {
		bad("timestamp", "got %v, expected seconds from the trace start in [0, %g]", r.Timestamp, float64(MaxSeconds))
	}
	if t := r.ThinkTimeS; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0 || *t > MaxSeconds) {
		bad("think_time_s", "got %v, expected seconds in [0, %g]", *t, float64(MaxSeconds))
	}
	if blockSize > 0 && r.InputLength >= 0 {
		if want := BlocksFor(r.InputLength, blockSize); len(r.HashIDs) != want {
			bad("hash_ids", "has %d ids, expected ceil(input_length %d / block_size %d) = %d", len(r.HashIDs), r.InputLength, blockSize, want)
		}
	}
	return errs
}

// Accept records r (already passed through Check) as part of the trace.
func (c *Checker) Accept(r *Request, line int) {
	c.requests++
	if c.requests > 1 && r.Timestamp < c.lastTS {
		if c.unordered == 0 {
			c.firstBack = line
		}
		c.unordered++
	} else {
		c.lastTS = r.Timestamp
	}
	i, ok := c.sessionOf(r.SessionID)
	c.memo = sessMemo{}
	if !ok {
		c.nSessions++
		if n := len(c.free); n > 0 {
			i, c.free = c.free[n-1], c.free[:n-1]
			c.sessions[i] = sessState{id: r.SessionID}
		} else {
			i = int32(len(c.sessions))
			c.sessions = append(c.sessions, sessState{id: r.SessionID})
		}
		c.sessIdx[r.SessionID] = i
	}
	c.lastSlot = i
	s := &c.sessions[i]
	if r.Turn > s.lastTurn {
		s.lastTurn = r.Turn
	}
	if r.Timestamp > s.lastTS {
		s.lastTS = r.Timestamp
	}
	if _, dup := c.chats.Get(r.ChatID); !dup {
		c.chats.Put(r.ChatID, chatRef{sess: i, turn: int32(r.Turn), line: int32(line), ts: r.Timestamp})
		if c.forgets {
			s.chats = append(s.chats, r.ChatID)
		}
	}
}

// Reject records that r was dropped, so later requests naming it as parent
// are reported as orphans rather than as pointing at nothing.
func (c *Checker) Reject(r *Request, line int) {
	if _, dup := c.chats.Get(r.ChatID); !dup {
		c.chats.Put(r.ChatID, chatRef{sess: -1, line: int32(line), rejected: true})
	}
}

// Sessions is the number of distinct sessions accepted.
func (c *Checker) Sessions() int { return c.nSessions }

// Order reports whether accepted requests were in global non-decreasing
// timestamp order; if not, how many stepped back and the first such line.
func (c *Checker) Order() (ordered bool, backwards, firstLine int) {
	return c.unordered == 0, c.unordered, c.firstBack
}

// ReadAllChecked is ReadAll with every request put through a Checker (the
// checks of trace validate) and a file that is no JSON named as such: the
// first problem is returned, located by file and line. For commands that
// hold a whole trace in memory anyway (replay).
func ReadAllChecked(r io.Reader, file string, defaultBlockSize int) (Header, []Request, error) {
	rd, err := NewReader(r, file, defaultBlockSize)
	if err != nil {
		return Header{}, nil, err
	}
	if err := rd.NotJSON(); err != nil {
		return rd.Header(), nil, err
	}
	chk := NewChecker(rd.Header().BlockSize)
	var out []Request
	for {
		var req Request
		err := rd.Next(&req)
		if err == io.EOF {
			return rd.Header(), out, nil
		}
		if err != nil {
			return rd.Header(), out, err
		}
		if errs := chk.Check(&req, rd.Line()); len(errs) > 0 {
			e := *errs[0]
			e.File = file
			if len(errs) > 1 {
				e.Msg += fmt.Sprintf(" (and %d more problems on this line; `pdhybrid trace validate` lists them)", len(errs)-1)
			}
			return rd.Header(), out, &e
		}
		chk.Accept(&req, rd.Line())
		out = append(out, req)
	}
}
