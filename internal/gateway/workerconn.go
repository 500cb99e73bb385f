package gateway

// The direct relay's worker client: a plain HTTP/1.1 client with its own
// keep-alive pool, for streamed /generate calls only. net/http's Transport
// keeps a connection and its chunked decoder to itself; the direct relay
// (relaydirect.go) takes a streamed answer's socket and decoder state over
// once its headers are read, and gives the socket back to this pool when
// the answer ended cleanly.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// workerConn is one connection to a worker.
type workerConn struct {
	c    net.Conn
	br   *bufio.Reader // reads c through head
	head headCap
	host string
	idle time.Time // when it was put back in the pool
}

// maxWorkerHead bounds an answer's status line and headers, as net/http's
// Transport bounds them by default (MaxResponseHeaderBytes): a worker
// sending headers without end is an error, not the gateway's memory.
const maxWorkerHead = 10 << 20

// errWorkerHead: a worker's answer head passed maxWorkerHead.
var errWorkerHead = fmt.Errorf("worker's answer headers exceeded %d bytes", maxWorkerHead)

// headCap is a connection's reads, counted against maxWorkerHead while an
// answer's head is read (left ≥ 0), uncounted after (left < 0).
type headCap struct {
	c    net.Conn
	left int64
}

func (h *headCap) Read(p []byte) (int, error) {
	if h.left == 0 {
		return 0, errWorkerHead
	}
	if h.left > 0 && int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.c.Read(p)
	if h.left > 0 {
		h.left -= int64(n)
	}
	return n, err
}

func newWorkerConn(c net.Conn, host string) *workerConn {
	wc := &workerConn{c: c, host: host, head: headCap{c: c, left: -1}}
	wc.br = bufio.NewReaderSize(&wc.head, 16<<10)
	return wc
}

// workerPool holds idle keep-alive connections per worker host.
type workerPool struct {
	mu      sync.Mutex
	idle    map[string][]*workerConn
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	headerT time.Duration // the worker's first-byte timeout (0: none)
	targets sync.Map      // worker URL → *postTarget
}

const (
	// maxIdlePerHost matches the ordinary transport's MaxIdleConnsPerHost.
	maxIdlePerHost = 1024
	// poolIdle is how long an idle connection is kept, as net/http's
	// Transport keeps one. A worker may close it sooner (uvicorn's
	// keep-alive is 5 s): a pooled connection that fails before any of an
	// answer came is retried once on a fresh one.
	poolIdle = 90 * time.Second
)

func newWorkerPool(o Ops) *workerPool {
	d := &net.Dialer{Timeout: timeout(o.WorkerConnectTimeout), KeepAlive: 30 * time.Second}
	return &workerPool{idle: map[string][]*workerConn{}, dial: d.DialContext, headerT: timeout(o.WorkerHeaderTimeout)}
}

func (p *workerPool) get(host string) *workerConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.idle[host]
	for len(l) > 0 {
		c := l[len(l)-1]
		l = l[:len(l)-1]
		p.idle[host] = l
		if time.Since(c.idle) < poolIdle {
			return c
		}
		c.c.Close()
	}
	return nil
}

// put keeps a connection whose last answer was read to its end.
func (p *workerPool) put(c *workerConn) {
	c.idle = time.Now()
	p.mu.Lock()
	if l := p.idle[c.host]; len(l) < maxIdlePerHost {
		p.idle[c.host] = append(l, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

// closeIdle closes every idle connection (tests, shutdown).
func (p *workerPool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for h, l := range p.idle {
		for _, c := range l {
			c.c.Close()
		}
		delete(p.idle, h)
	}
}

// post sends a JSON body to u and reads the answer's status and headers.
// A pooled connection the worker closed while idle (nothing of an answer
// read) is retried once on a fresh one, as net/http's Transport does.
func (p *workerPool) post(ctx context.Context, u string, body any) (*http.Response, error) {
	t, err := p.target(u)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		b, n := jsonBody(body)
		wc := p.get(t.host)
		reused := wc != nil
		if wc == nil {
			c, err := p.dial(ctx, "tcp", t.host)
			if err != nil {
				return nil, err
			}
			wc = newWorkerConn(c, t.host)
		}
		resp, started, err := p.roundTrip(ctx, wc, t.head, b, n)
		if err == nil {
			return resp, nil
		}
		wc.c.Close()
		if !reused || started || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
}

// postTarget is a worker URL as post sends to it: its host and the
// request's head up to the body's length.
type postTarget struct {
	host string
	head string // "POST /path HTTP/1.1\r\nHost: …\r\nContent-Type: application/json\r\nContent-Length: "
}

// target is u's postTarget, parsed once a URL (the gateway posts to a
// handful): url.Parse and the head's concatenation were allocations on
// every request.
func (p *workerPool) target(u string) (*postTarget, error) {
	if t, ok := p.targets.Load(u); ok {
		return t.(*postTarget), nil
	}
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if pu.Scheme != "http" {
		return nil, fmt.Errorf("direct relay: %s: only http:// workers", u)
	}
	t := &postTarget{host: pu.Host, head: "POST " + pu.RequestURI() + " HTTP/1.1\r\nHost: " + pu.Host +
		"\r\nContent-Type: application/json\r\nContent-Length: "}
	p.targets.Store(u, t)
	return t, nil
}

// roundTrip writes one request on wc and reads its answer's head; started
// reports whether any of the answer came (then it must not be retried).
// head is the request's head up to its body's length (postTarget).
func (p *workerPool) roundTrip(ctx context.Context, wc *workerConn, head string, body io.Reader, n int64) (resp *http.Response, started bool, err error) {
	// The client leaving ends the wait (and, until the body is closed or
	// a relay takes the socket over, any read of the answer); the
	// first-byte timeout bounds the wait for the head.
	stop := context.AfterFunc(ctx, func() { wc.c.SetDeadline(time.Unix(1, 0)) })
	if p.headerT > 0 {
		wc.c.SetDeadline(time.Now().Add(p.headerT))
	}
	defer func() {
		if err != nil {
			stop()
			return
		}
		// A stream lasts as long as generation does: no deadline on the
		// body, unless the client has left meanwhile.
		wc.c.SetDeadline(time.Time{})
		if ctx.Err() != nil {
			wc.c.SetDeadline(time.Unix(1, 0))
		}
		resp.Body.(*workerBody).stop = stop
	}()
	// One write for the head and a body of up to 64 KiB (one segment on
	// loopback, one wake of the worker); a larger body follows in pieces.
	msg := make([]byte, 0, len(head)+24+int(min(n, 64<<10)))
	msg = append(msg, head...)
	msg = strconv.AppendInt(msg, n, 10)
	msg = append(msg, "\r\n\r\n"...)
	if n <= 64<<10 {
		var err error
		if msg, err = appendAll(msg, body); err != nil {
			return nil, false, err
		}
		body = nil
	}
	if _, err := wc.c.Write(msg); err != nil {
		return nil, false, err
	}
	if body != nil {
		if _, err := io.Copy(wc.c, body); err != nil {
			return nil, false, err
		}
	}
	wc.head.left = maxWorkerHead - int64(wc.br.Buffered())
	defer func() { wc.head.left = -1 }()
	tp := textproto.NewReader(wc.br)
	var line string
	for {
		if line, err = tp.ReadLine(); err != nil {
			return nil, wc.br.Buffered() > 0, err
		}
		status, ok := strings.CutPrefix(line, "HTTP/1.1 ")
		if !ok && !strings.HasPrefix(line, "HTTP/1.0 ") {
			return nil, true, fmt.Errorf("worker answered %q, not HTTP/1.x", line)
		}
		if !ok {
			status = line[len("HTTP/1.0 "):]
		}
		codeText, _, _ := strings.Cut(status, " ")
		code, err := strconv.Atoi(codeText)
		if err != nil || code < 100 || code > 999 {
			return nil, true, fmt.Errorf("worker answered a bad status line %q", line)
		}
		hdr, err := tp.ReadMIMEHeader()
		if err != nil {
			return nil, true, err
		}
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			continue // 100 Continue and the like: the answer follows
		}
		resp = &http.Response{StatusCode: code, Status: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header(hdr)}
		resp.Body = p.body(wc, resp, strings.HasPrefix(line, "HTTP/1.0") || hdr.Get("Connection") == "close")
		return resp, true, nil
	}
}

// appendAll appends what r holds to b.
func appendAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// workerBody is a direct-client answer's body: chunked, sized or read to
// the connection's end. Read to its end, its connection goes back to the
// pool on Close; a relay that took the socket over (taken) owns it.
type workerBody struct {
	p       *workerPool
	wc      *workerConn
	chunked bool
	dec     chunkDecoder
	left    int64 // bytes left of a sized body; −1: until the connection ends
	done    bool
	err     error
	reuse   bool // keep-alive allowed by the worker
	taken   bool // the direct relay owns the connection now
	closed  bool
	stop    func() bool // ends the watch of the client's context
}

func (p *workerPool) body(wc *workerConn, resp *http.Response, closing bool) *workerBody {
	b := &workerBody{p: p, wc: wc, left: -1, reuse: !closing}
	te := strings.ToLower(resp.Header.Get("Transfer-Encoding"))
	switch {
	case te == "chunked":
		b.chunked = true
	case te != "":
		b.reuse = false // an unknown coding: read to the end, not reused
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		b.left = 0
	default:
		if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
			b.left = n
		} else {
			b.reuse = false
		}
	}
	resp.Header.Del("Transfer-Encoding")
	if b.chunked {
		resp.TransferEncoding = []string{"chunked"}
		resp.ContentLength = -1
	} else {
		resp.ContentLength = b.left
	}
	b.done = b.left == 0 && !b.chunked
	return b
}

func (b *workerBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !b.chunked {
		if b.left >= 0 {
			p = p[:min(int64(len(p)), b.left)]
		}
		n, err := b.wc.br.Read(p)
		if b.left >= 0 {
			b.left -= int64(n)
			if b.left == 0 {
				b.done = true
			} else if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
		} else if err == io.EOF {
			b.done = true
		}
		if err != nil && err != io.EOF {
			b.err = err
		}
		return n, err
	}
	for {
		if b.wc.br.Buffered() == 0 {
			if _, err := b.wc.br.Peek(1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				b.err = err
				return 0, err
			}
		}
		raw, _ := b.wc.br.Peek(b.wc.br.Buffered())
		data, used, err := b.dec.next(raw, len(p))
		if err != nil {
			b.err = err
			return 0, err
		}
		n := copy(p, data)
		b.wc.br.Discard(used)
		if b.dec.done() {
			b.done = true
			if n == 0 {
				return 0, io.EOF
			}
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Close puts the connection back in the pool if its answer was read to
// the end, else closes it (an answer cut short leaves the stream unusable).
func (b *workerBody) Close() error {
	if b.closed || b.taken {
		return nil
	}
	b.closed = true
	if b.stop != nil && !b.stop() {
		b.reuse = false // the client left: its deadline cut the socket
	}
	if b.done && b.reuse && b.err == nil && b.wc.br.Buffered() == 0 {
		b.p.put(b.wc)
		return nil
	}
	return b.wc.c.Close()
}

// errNotDirect: the answer cannot be relayed directly (not the direct
// client's, or not a chunked stream).
var errNotDirect = errors.New("not a direct-relay answer")
