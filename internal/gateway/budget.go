package gateway

// Request bytes in flight, bounded twice: for the whole gateway and for
// each client. A body's bytes are taken from both budgets as they are read
// (its declared length up front, a chunked body 64 KiB at a time) and
// given back when its request ends; a body that does not fit is refused
// 429 with Retry-After, before more of it is read. So memory follows the
// budget, whatever clients send: without it eight 50 MB prompts held 2.2 GB.
// The body is read once, here; the handlers parse these bytes (readJSON)
// and the worker legs are sent from them (jsonBody), not from copies.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

const (
	rejectBytes       = "bytes_in_flight"
	rejectClientBytes = "client_bytes_in_flight"
	rejectSlowBody    = "body_timeout"
	rejectHeader      = "header_too_large"
	// budgetStep is how much of a chunked body is taken from the budget
	// before it is read.
	budgetStep = 64 << 10
	// bigBody is the body size after which the request's end hands the
	// heap's free pages back to the OS (returnMemory).
	bigBody = 16 << 20
)

// freeing is set while a returnMemory runs: one at a time is enough.
var freeing atomic.Bool

// returnMemory hands freed heap pages back to the OS after a big body's
// request: Go's own scavenger would keep them for minutes, and an operator
// reading the gateway's RSS would see the peak long after it passed.
func (s *Server) returnMemory() {
	if freeing.CompareAndSwap(false, true) {
		go func() {
			defer freeing.Store(false)
			debug.FreeOSMemory()
		}()
	}
}

// byteBudget counts request bytes in flight, in all and per client.
type byteBudget struct {
	mu        sync.Mutex
	total     int64
	perClient map[string]int64
}

// take reserves n bytes for client, or reports which budget is full
// ("" when it fitted).
func (b *byteBudget) take(client string, n, all, clientMax int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perClient == nil {
		b.perClient = map[string]int64{}
	}
	if all > 0 && b.total+n > all {
		return rejectBytes
	}
	if clientMax > 0 && b.perClient[client]+n > clientMax {
		return rejectClientBytes
	}
	b.total += n
	b.perClient[client] += n
	return ""
}

func (b *byteBudget) give(client string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.perClient[client] -= n; b.perClient[client] <= 0 {
		delete(b.perClient, client)
	}
}

// inFlight is the bytes held now (tests, metrics).
func (b *byteBudget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// readBody is a request body read whole by the limits, handed to the
// handler without a copy (one allocation: its reader is held by value).
type readBody struct {
	bytes.Reader
	b []byte
}

func newReadBody(b []byte) *readBody {
	rb := &readBody{b: b}
	rb.Reset(b)
	return rb
}

func (*readBody) Close() error { return nil }

// bodyRefusal is why a body was not read: the status, the rejection
// reason (metrics) and the message.
type bodyRefusal struct {
	status int
	reason string
	msg    string
}

// readLimited reads r's body within the size cap, the byte budgets and
// the body timeout. It returns the bytes taken from the budgets (to give
// back when the request ends) or why it refused.
func (s *Server) readLimited(w http.ResponseWriter, r *http.Request, client string) (body []byte, taken int64, refused *bodyRefusal) {
	limit, all, cmax := s.cfg.MaxBodyBytes, s.cfg.MaxInflightBytes, s.cfg.MaxClientBytes
	tooLarge := func() *bodyRefusal { // built only when it is the answer: two allocations a request fewer
		return &bodyRefusal{http.StatusRequestEntityTooLarge, rejectBody, "request body larger than the gateway's limit: at most " + itoa(int(limit)) + " bytes"}
	}
	if r.ContentLength > limit {
		return nil, 0, tooLarge()
	}
	full := func(which string) *bodyRefusal {
		msg := "the gateway holds its most request bytes in flight; retry after " + retryAfterS + " s"
		if which == rejectClientBytes {
			msg = "this client holds its most request bytes in flight (at most " + itoa(int(cmax)) + "); retry after " + retryAfterS + " s"
		}
		return &bodyRefusal{http.StatusTooManyRequests, which, msg}
	}
	if t := s.cfg.BodyTimeout; t > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(t)) == nil {
			// Cleared once the body is read: a stream's connection must
			// not be cut by it (the server watches it for the client
			// leaving). A body that timed out keeps it, so the server does
			// not wait on the rest before closing.
			defer func() {
				if refused == nil {
					rc.SetReadDeadline(time.Time{})
				}
			}()
		}
	}
	step := int64(budgetStep)
	if r.ContentLength >= 0 {
		step = r.ContentLength + 1 // +1: to see that nothing follows
	}
	buf := make([]byte, 0, min(step, limit+1))
	for {
		if int64(cap(buf)) > taken {
			n := int64(cap(buf)) - taken
			if which := s.budget.take(client, n, all, cmax); which != "" {
				s.budget.give(client, taken)
				return nil, 0, full(which)
			}
			taken += n
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			s.budget.give(client, taken)
			return nil, 0, tooLarge()
		}
		if err == io.EOF {
			return buf, taken, nil
		}
		if err != nil {
			s.budget.give(client, taken)
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, 0, &bodyRefusal{http.StatusRequestTimeout, rejectSlowBody, "the request body did not arrive within " + s.cfg.BodyTimeout.String()}
			}
			return nil, 0, &bodyRefusal{http.StatusBadRequest, "", "reading the body: " + err.Error()}
		}
		if len(buf) == cap(buf) {
			grow := min(max(int64(cap(buf)), budgetStep), limit+1-int64(cap(buf)))
			if grow <= 0 {
				grow = 1
			}
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
	}
}
