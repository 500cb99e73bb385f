package gateway

// The direct relay's event loops (relaydirect.go): one per CPU the Go
// runtime uses, each an epoll set of the streams handed to it, edge
// triggered. The set's own descriptor is waited on through Go's netpoller
// (an epoll set is itself pollable), so a loop with nothing to do is a
// parked goroutine, not a thread blocked in a system call, and one wake
// serves every event that came meanwhile. A worker's socket is read when
// epoll says it has data (one read while it returns less than the buffer:
// a fresh arrival re-arms the edge), the lines it completes go to the
// client in one write; a client that cannot take more holds the worker's
// reads back until it drains. A client's hang-up (EPOLLRDHUP, HUP, ERR) or
// a failed write ends the stream as the client's leaving.

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

type relayLoop struct {
	epfd int
	// mu guards streams, clients and each client's current stream. It is
	// held for a lookup, a registration or an end, never across a
	// stream's reads and writes: a handler handing its stream over
	// (addStream) waits for no other stream's I/O. The loop's goroutine
	// alone touches a stream between its registration and its end, so
	// pump needs no lock.
	mu      sync.Mutex
	streams map[int32]*directStream // by stream id: the worker sockets' events
	clients map[int32]*clientConn   // by registration id: the client sockets' events
	buf     []byte
	writes  atomic.Int64 // writes to client sockets (tests: relayWrites)
}

// relayWrites is the loops' writes to client sockets so far.
func relayWrites() (n int64) {
	for _, l := range loops {
		n += l.writes.Load()
	}
	return n
}

var (
	loopsOnce sync.Once
	loops     []*relayLoop
	nextLoop  atomic.Uint32
	nextID    atomic.Int32
)

// loopsAvailable starts the loops on first use; false if epoll is not
// available (the ordinary relay serves then).
func loopsAvailable() bool {
	loopsOnce.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			l, err := newRelayLoop()
			if err != nil {
				return
			}
			loops = append(loops, l)
		}
	})
	return len(loops) > 0
}

func newRelayLoop() (*relayLoop, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "relay-epoll") // non-blocking: Go's netpoller watches it
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &relayLoop{epfd: fd, streams: map[int32]*directStream{}, clients: map[int32]*clientConn{}, buf: make([]byte, 64<<10)}
	go l.run(f, rc)
	return l, nil
}

// attach registers cc's socket with a loop the first time a stream of it
// goes to one — a duplicate, edge triggered, kept until the connection
// closes (clientConn.Close), so that a keep-alive connection's later
// streams cost no system call on the client's side — and marks cc busy
// until detach. It answers the loop and the duplicate.
func (cc *clientConn) attach() (*relayLoop, int, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil, -1, net.ErrClosed
	}
	if cc.loop == nil {
		fd, err := dupConn(cc.TCPConn)
		if err != nil {
			return nil, -1, err
		}
		l := loops[int(nextLoop.Add(1))%len(loops)]
		key := nextID.Add(1)
		l.mu.Lock()
		l.clients[key] = cc
		l.mu.Unlock()
		ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Pad: key, Fd: 1}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			l.mu.Lock()
			delete(l.clients, key)
			l.mu.Unlock()
			closeFd(fd)
			return nil, -1, err
		}
		cc.loop, cc.cfd, cc.key = l, fd, key
	}
	cc.busy = true
	return cc.loop, cc.cfd, nil
}

// release takes cc's socket off its loop and closes the duplicate
// (cc.mu held; no stream of it on the loop).
func (cc *clientConn) release() {
	l := cc.loop
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.clients, cc.key)
	l.mu.Unlock()
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, cc.cfd, nil)
	closeFd(cc.cfd)
	cc.loop = nil
}

// addStream hands st, a stream of cc's, to l, cc's loop (attach). The
// worker's socket is registered edge triggered, and reports at once if it
// is already readable or hung up; the client's is registered already (a
// hang-up or a write failing ends the stream).
func addStream(l *relayLoop, cc *clientConn, st *directStream) {
	st.id = nextID.Add(1)
	st.readable = true // what came before the loop saw the socket
	st.cc = cc
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams[st.id] = st
	cc.st = st
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Pad: st.id}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, st.wfd, &ev); err != nil {
		// No way to watch it: lost, as a cut connection.
		st.left, st.wEnd = true, true
		l.end(st)
	}
}

func (l *relayLoop) run(f *os.File, rc syscall.RawConn) {
	defer runtime.KeepAlive(f)
	evs := make([]unix.EpollEvent, 256)
	for {
		err := rc.Read(func(uintptr) bool {
			for {
				n, err := unix.EpollWait(l.epfd, evs, 0)
				if err != nil && !errors.Is(err, unix.EINTR) {
					return true
				}
				if n <= 0 {
					return false // nothing ready: park until the set is readable
				}
				l.handle(evs[:n])
				if n < len(evs) {
					return false
				}
			}
		})
		if err != nil {
			return
		}
	}
}

func (l *relayLoop) handle(evs []unix.EpollEvent) {
	for _, ev := range evs {
		l.mu.Lock()
		var st *directStream
		if ev.Fd == 1 {
			if cc := l.clients[ev.Pad]; cc != nil {
				st = cc.st // nil between its streams: nothing to do
			}
		} else {
			st = l.streams[ev.Pad]
		}
		l.mu.Unlock()
		if st == nil {
			continue // ended earlier in this batch
		}
		if ev.Fd == 1 { // the client's socket
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				st.left = true
			}
		} else {
			st.readable = true
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				st.rdhup = true
			}
		}
		l.pump(st)
	}
}

// pump moves what it can of st (on the loop's goroutine).
func (l *relayLoop) pump(st *directStream) {
	for !st.left {
		if len(st.out) > 0 {
			l.writes.Add(1) // its loop's alone: no other core touches the line
			n, err := unix.Write(st.cfd, st.out)
			if n > 0 {
				st.out = append(st.out[:0], st.out[n:]...)
			}
			switch {
			case err == unix.EAGAIN:
				return // EPOLLOUT comes when it drains
			case err == unix.EINTR:
				continue
			case err != nil:
				st.left = true // EPIPE, ECONNRESET: the client is gone
				continue
			}
			if len(st.out) > 0 {
				continue
			}
		}
		if st.finished() {
			break
		}
		if !st.readable || st.wEnd {
			return
		}
		n, err := unix.Read(st.wfd, l.buf)
		switch {
		case err == unix.EAGAIN:
			st.readable = false
		case err == unix.EINTR:
		case err != nil, n == 0:
			// The worker's socket failed or closed; a chunked body not
			// at its end was cut.
			st.cutOff("the worker's stream was cut")
		default:
			st.feed(l.buf[:n])
			if n < len(l.buf) && !st.rdhup {
				st.readable = false // drained: a new arrival re-arms the edge
			}
		}
	}
	l.finish(st)
}

// finish takes st off the loop and tells its handler.
func (l *relayLoop) finish(st *directStream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end(st)
}

// end is finish with l.mu held.
func (l *relayLoop) end(st *directStream) {
	if _, ok := l.streams[st.id]; !ok {
		return
	}
	delete(l.streams, st.id)
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, st.wfd, nil)
	if st.cc.st == st {
		st.cc.st = nil // the client's socket stays registered for its next stream
	}
	if st.left {
		st.wReuse = false // the worker's answer was not read to its end
	}
	close(st.done)
}

func dupCloexec(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

func closeFd(fd int) { unix.Close(fd) }

// shutdownFd ends both directions of a socket: the loop sees it hang up.
func shutdownFd(fd int) { unix.Shutdown(fd, unix.SHUT_RDWR) }
