package gateway

// A client's connection as the gateway's HTTP server holds it when the
// direct relay is on (directListener wraps each one it accepts). net/http
// ends a chunked answer itself, with a write of its own (`0\r\n\r\n`)
// after the handler returns: one more system call, one more segment on
// the wire, and one more wake of the client per stream, the largest of a
// short stream's three writes. With this wrapper the direct relay writes
// that end in the same write as the stream's terminal event and has the
// connection drop net/http's own (dropEnd); and when the whole answer is
// in hand as its head goes out, net/http's head and body and the end
// leave in one write (hold). Nothing is held back for it: what is held is
// written the moment net/http's flush of it returns.
//
// Only the connection's own goroutine (net/http's, which runs the
// handler) writes through the wrapper; the relay loop writes through a
// duplicate of the socket, never through this.

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// clientWrites counts net/http's writes to direct-relay client sockets,
// through clientConn (tests: with relayWrites, the loops', a stream's
// count of system calls).
var clientWrites atomic.Int64

// clientConn is one accepted client connection.
type clientConn struct {
	*net.TCPConn
	hold    bool    // writes are kept in held, not sent (writeHeld sends them)
	held    []byte  // what net/http wrote while hold
	heldp   *[]byte // held's buffer, from relayBufs
	dropEnd bool    // the answer's chunked end is sent: drop net/http's

	// The socket's registration with a relay loop (attach): made with the
	// connection's first stream on a loop, kept for its next ones, let go
	// when net/http closes the connection — at once, or when the stream
	// on the loop then ends (detach). mu guards these; Close may come from
	// another goroutine (a server's Close) while a stream is on the loop.
	mu     sync.Mutex
	loop   *relayLoop
	cfd    int           // the socket's duplicate, registered with loop
	key    int32         // its registration id there
	busy   bool          // a stream of it is on the loop
	closed bool          // net/http closed the connection
	st     *directStream // the stream on the loop now (loop.mu guards it)
}

// detach: cc's stream on the loop is over. A connection net/http closed
// meanwhile lets its registration go now.
func (c *clientConn) detach() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	if c.closed {
		c.release()
	}
}

// Close closes the connection. Its registration goes at once, or, while
// a stream of it is on a loop, the socket is shut down (the loop ends the
// stream as the client's leaving) and detach lets the registration go.
func (c *clientConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.busy {
			shutdownFd(c.cfd)
		} else {
			c.release()
		}
	}
	c.mu.Unlock()
	return c.TCPConn.Close()
}

// errAfterEnd: net/http wrote something other than its chunked end after
// an answer the relay had ended; the connection's framing is lost, so it
// is closed.
var errAfterEnd = errors.New("direct relay: bytes after an ended answer")

func (c *clientConn) Write(p []byte) (int, error) {
	if c.hold {
		if c.heldp == nil {
			c.heldp = relayBufs.Get().(*[]byte)
			c.held = (*c.heldp)[:0]
		}
		c.held = append(c.held, p...)
		return len(p), nil
	}
	if c.dropEnd {
		c.dropEnd = false
		if !bytes.HasPrefix(p, lastChunk) {
			c.TCPConn.Close()
			return 0, errAfterEnd
		}
		if len(p) == len(lastChunk) {
			return len(p), nil
		}
		clientWrites.Add(1)
		n, err := c.TCPConn.Write(p[len(lastChunk):])
		return n + len(lastChunk), err
	}
	clientWrites.Add(1)
	return c.TCPConn.Write(p)
}

// writeHeld ends hold: what net/http wrote meanwhile goes out now, with
// end after it, in one write.
func (c *clientConn) writeHeld(end []byte) error {
	c.hold = false
	b := append(c.held, end...)
	c.held = nil // not kept: an idle connection holds no buffer
	clientWrites.Add(1)
	_, err := c.TCPConn.Write(b)
	if c.heldp != nil && cap(b) <= 64<<10 { // a long answer's buffer is not kept
		*c.heldp = b[:0]
		relayBufs.Put(c.heldp)
	}
	c.heldp = nil
	return err
}

// directListener wraps each TCP connection ln accepts in a clientConn.
type directListener struct{ net.Listener }

func (l directListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &clientConn{TCPConn: tc}, nil
	}
	return c, err
}
