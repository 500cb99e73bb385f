package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// The errors a replica that dies before answering can surface as, each
// of which must pass the request over to the next replica; and errors that
// must not (a request the client gave up on, a deadline) stay 502s.
// "write on a closed connection" is the one a loaded machine produced:
// the transport's reader saw the close first and shut the connection
// while the body was still being written.
func TestUnreachable(t *testing.T) {
	op := func(o string, err error) error {
		return &net.OpError{Op: o, Net: "tcp", Err: err}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", op("dial", os.NewSyscallError("connect", syscall.ECONNREFUSED)), true},
		{"reset", op("read", os.NewSyscallError("read", syscall.ECONNRESET)), true},
		{"eof", fmt.Errorf("transport: %w", io.EOF), true},
		{"unexpected eof", io.ErrUnexpectedEOF, true},
		{"broken pipe", op("write", os.NewSyscallError("write", syscall.EPIPE)), true},
		{"write on closed conn", fmt.Errorf("readfrom tcp: %w", op("write", net.ErrClosed)), true},
		{"client gone", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, false},
		{"other", errors.New("tls: bad certificate"), false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("%s (%v): unreachable %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
