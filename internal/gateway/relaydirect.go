package gateway

// The direct relay (Config.RelayDirect, `serve --relay direct`): a
// streamed answer's events moved below net/http. The ordinary relay pays
// Go's scheduler and netpoller once per event (a goroutine parks on every
// read of the worker's stream and is woken for the next); a plain reverse
// proxy like nginx pays one epoll_wait for many connections. Here, once a
// streamed answer's head is read and its response head written (by
// net/http, as ever), both sockets — the client's and the worker's, from
// the direct worker client (workerconn.go) — are handed to an event loop
// of the gateway's own (relayloop_linux.go), which moves the worker's
// events to the client with one read and one write each and no goroutine
// switch, through duplicates of the two descriptors. The connections stay
// net/http's and the pool's: the handler waits, and when the stream is
// over net/http ends the chunked body and keeps the client's connection
// alive, and the worker's goes back to the pool.
//
// A client that leaves is seen twice over: net/http's own watch of the
// connection ends the request's context (the handler stops the stream),
// and the loop sees the socket hang up or a write fail. Either way the
// request's context ends, the worker's leg is aborted and closed, and the
// request is counted as the client's disconnect, never the worker's
// failure.
//
// The stream's bytes are the ordinary relay's: both pass lines through
// eventBatch, so each ends in one terminal event and nothing after it.
// Anything it cannot take (an edited stream, a translated API, TLS,
// HTTP/2, a worker answer that is not chunked) goes the ordinary way.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// directTaken counts the streams the direct relay took (tests).
var directTaken atomic.Int64

// directRelay is a gateway's direct relay state.
type directRelay struct {
	pool  *workerPool
	proxy func(*http.Request) (*url.URL, error) // the ordinary client's (HTTP_PROXY, NO_PROXY)
	known sync.Map                              // worker base URL → serves' answer
}

func newDirectRelay(o Ops) *directRelay {
	return &directRelay{pool: newWorkerPool(o), proxy: http.ProxyFromEnvironment}
}

// serves says whether the direct client may call the worker at base:
// plain http:// that the ordinary client would not reach through a proxy.
// Any other worker (https://, proxied) keeps the ordinary client, which
// speaks TLS and HTTP/2 and honours the proxy settings. Asked once a
// worker.
func (d *directRelay) serves(base string) bool {
	if v, ok := d.known.Load(base); ok {
		return v.(bool)
	}
	ok := plainWorker(base, d.proxy)
	d.known.Store(base, ok)
	return ok
}

// plainWorker: base is an http:// URL that proxy (nil: none) sends
// straight.
func plainWorker(base string, proxy func(*http.Request) (*url.URL, error)) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return false
	}
	if proxy != nil {
		if p, err := proxy(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}}); err != nil || p != nil {
			return false
		}
	}
	return true
}

// connKey is the context key of a request's client connection
// (HTTPServer's ConnContext).
type connKey struct{}

// connContext keeps each client connection in its requests' context, for
// the direct relay.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// directConn is r's client connection if the direct relay can write to
// it: plain HTTP/1.1 over TCP, accepted through directListener
// (clientconn.go).
func directConn(r *http.Request) *clientConn {
	if r.TLS != nil || r.ProtoMajor != 1 || !r.ProtoAtLeast(1, 1) {
		return nil
	}
	c, _ := r.Context().Value(connKey{}).(*clientConn)
	return c
}

// directStream is one stream on the event loop. The handler sets it up
// and reads it after done is closed; the loop alone touches it meanwhile.
type directStream struct {
	cfd      int         // a duplicate of the client's socket, registered with the loop (clientConn.attach)
	wfd      int         // the worker's socket itself: its connection is the relay's alone until the stream ends
	cc       *clientConn // the client's connection
	id       int32
	out      []byte // chunks for the client not yet written
	lb       []byte // decoded worker data: an unterminated line
	dec      chunkDecoder
	eb       eventBatch
	sawData  bool       // a byte of the worker's body came
	first    time.Time  // the first data event went to the client
	last     []byte     // the last data event relayed
	closed   bool       // the terminal event is in out: nothing more goes
	endSent  bool       // the chunked end is in out, after the terminal event (clientconn.go)
	wEnd     bool       // the worker's answer is over (ended or broke off)
	wReuse   bool       // ... and its connection may be reused
	discard  int        // bytes read after the terminal event
	left     bool       // the client hung up or its socket failed
	readable bool       // the worker's socket may have data
	rdhup    bool       // the worker hung up: read to the end
	plain    bool       // out is for net/http's writer, which frames it (take)
	onFirst  *firstByte // the first-byte hook, run before the first byte goes to the client
	done     chan struct{}
}

// take relays resp (a streamed 200 from the direct client, its head
// already set on rec) over the event loop; handled is false when it
// cannot, and then nothing was touched: the ordinary relay goes on.
func (d *directRelay) take(rec *recorder, resp *http.Response) (ok, handled bool) {
	body, fb, prefix := unwrapBody(resp.Body)
	wb, isDirect := body.(*workerBody)
	fl, canFlush := rec.ResponseWriter.(http.Flusher)
	cc := rec.q.conn
	if cc == nil || !isDirect || !wb.chunked || wb.done || wb.err != nil || !canFlush || !loopsAvailable() {
		return false, false
	}
	// The decoder's state goes along: a refusal check may have read into
	// the body, to the middle of a chunk. What came so far is decoded
	// first (st alone changes): a stream whole in hand needs no loop.
	st := getStream()
	defer putStream(st) // after the results are read from it; the loop is done with it (await)
	st.dec, st.plain, st.onFirst = wb.dec, true, fb
	if len(prefix) > 0 {
		st.data(prefix) // what a refusal check read ahead (paths.go peek)
	}
	raw, _ := wb.wc.br.Peek(wb.wc.br.Buffered())
	st.feed(raw)
	onLoop := !st.closed || !st.wEnd // else all of it goes out below
	var l *relayLoop
	if onLoop {
		var err error
		if st.wfd, err = connFd(wb.wc.c); err != nil {
			return false, false
		}
		if l, st.cfd, err = cc.attach(); err != nil {
			return false, false
		}
	}
	wb.wc.br.Discard(len(raw))
	directTaken.Add(1)
	wb.taken = true
	if wb.stop != nil {
		wb.stop() // the handler watches the client from here on
	}
	// The head goes out now, by net/http (chunked: an HTTP/1.1 answer
	// with no length), with what came of the body so far framed by it
	// as a chunk: one write — and when the answer's terminal event is
	// among it, the chunked end in that same write (clientconn.go). From
	// here on the loop writes the chunks.
	// (A worker sends its head at once and the first token after the
	// prefill: waiting here for the first event to send it with the head
	// was measured, alternated with this in one session, and changed
	// neither CPU per event nor added TTFT beyond the run-to-run spread;
	// docs/gateway.md.)
	cc.hold = st.closed
	if len(st.out) > 0 {
		if _, err := rec.ResponseWriter.Write(st.out); err != nil {
			st.left = true
		}
		st.out = st.out[:0]
	}
	st.plain = false
	fl.Flush()
	switch {
	case !cc.hold:
	case st.left:
		cc.hold, cc.held, cc.heldp = false, nil, nil
	case cc.writeHeld(lastChunk) != nil:
		st.left = true
	default:
		st.endSent = true
	}
	if onLoop {
		if !st.left {
			d.await(rec, l, st)
		}
		cc.detach()
	}
	if !st.first.IsZero() && rec.first.IsZero() {
		rec.first = st.first
	}
	rec.last, rec.parsed = append(rec.last[:0], st.last...), false
	if st.endSent && len(st.out) == 0 {
		cc.dropEnd = true // the chunked end went out with the last event
	}
	if st.wReuse && !st.left {
		d.pool.put(wb.wc)
	} else {
		wb.wc.c.Close()
	}
	if st.left {
		rec.leave() // the client's own leaving: its context ends
		return false, true
	}
	return st.eb.done, true
}

// streamPool keeps directStreams between streams with their buffers
// (out, lb, last, the batch's): about six allocations a stream fewer.
var streamPool = sync.Pool{New: func() any { return new(directStream) }}

func getStream() *directStream { return streamPool.Get().(*directStream) }

// putStream keeps st, no longer on a loop, for a next stream, emptied;
// a long answer's grown buffers are let go with it.
func putStream(st *directStream) {
	const keep = 64 << 10
	if cap(st.out) > keep || cap(st.lb) > keep || cap(st.last) > keep || cap(st.eb.out) > keep {
		return
	}
	*st = directStream{out: st.out[:0], lb: st.lb[:0], last: st.last[:0], eb: eventBatch{out: st.eb.out[:0]}}
	streamPool.Put(st)
}

// await hands st to an event loop and waits for its end.
func (d *directRelay) await(rec *recorder, l *relayLoop, st *directStream) {
	st.done = make(chan struct{})
	addStream(l, rec.q.conn, st)
	select {
	case <-st.done:
	case <-rec.ctx.Done():
		// net/http saw the client go (or the server is closing its
		// connections): the loop is told through the socket.
		shutdownFd(st.cfd)
		<-st.done
	}
}

// feed decodes raw bytes of the worker's chunked body and relays the
// lines it completes.
func (st *directStream) feed(raw []byte) {
	for len(raw) > 0 && !st.wEnd {
		data, used, err := st.dec.next(raw, len(raw))
		raw = raw[used:]
		if err != nil {
			st.cutOff("the worker's stream was cut")
			return
		}
		if len(data) > 0 {
			st.data(data)
		}
		if st.dec.done() {
			st.workerEnded(len(raw) == 0)
			return
		}
	}
}

// data relays decoded body bytes: the complete lines among what came so
// far, up to the terminal event; after it, what comes is dropped (at most
// 1 MiB, as the ordinary relay reads).
func (st *directStream) data(b []byte) {
	if !st.sawData && st.onFirst != nil {
		// As the ordinary relay's first read: the request's prefill is
		// over before its first token can reach the client.
		st.onFirst.once.Do(st.onFirst.f)
	}
	st.sawData = true
	if st.eb.ended {
		st.discard += len(b)
		if st.discard > 1<<20 {
			st.wEnd = true // a worker talking on past its end: not reused
		}
		return
	}
	st.lb = append(st.lb, b...)
	sent, end := st.eb.lines(st.lb, nil)
	if len(sent) > 0 {
		st.chunk(sent)
		if ev := lastDataEvent(sent); ev != nil {
			if st.first.IsZero() {
				st.first = time.Now()
			}
			st.last = append(st.last[:0], ev...)
		}
	}
	st.lb = append(st.lb[:0], st.lb[end:]...)
	if st.eb.ended {
		st.close()
		st.lb = st.lb[:0]
	}
}

// close: the terminal event is in out, nothing more goes to the client;
// on the loop the chunked end goes in the same write (net/http's own is
// then dropped: clientconn.go). In take's first pass (plain) the end is
// take's to add.
func (st *directStream) close() {
	st.closed = true
	if !st.plain {
		st.out = append(st.out, lastChunk...)
		st.endSent = true
	}
}

// workerEnded: the worker's chunked body ended; clean says nothing came
// after it (the connection may be reused).
func (st *directStream) workerEnded(clean bool) {
	if !st.eb.ended {
		// The worker ended its stream without a terminal event: the
		// client hears it was cut.
		if len(st.lb) > 0 {
			st.chunk(append(st.lb, '\n'))
			st.lb = st.lb[:0]
		}
		st.endWith("the worker's stream ended before its answer finished")
	}
	st.wEnd, st.wReuse = true, clean
}

// cutOff: the worker's stream broke off (its socket failed or closed, or
// its framing is broken): the client's ends with an error frame in
// SGLang's shape, not a silent truncation.
func (st *directStream) cutOff(msg string) {
	if !st.eb.ended {
		st.endWith(msg)
	}
	st.wEnd, st.wReuse = true, false
}

// chunk queues b for the client: framed as a chunk for the loop's own
// writes, as it is for net/http's.
func (st *directStream) chunk(b []byte) {
	if st.plain {
		st.out = append(st.out, b...)
		return
	}
	st.out = appendChunk(st.out, b)
}

func (st *directStream) endWith(msg string) {
	e := sseError(msg)
	st.chunk(e)
	if st.first.IsZero() {
		st.first = time.Now() // the recorder counts an error frame's write as its first event
	}
	st.last = append(st.last[:0], lastDataEvent(e)...)
	st.eb.ended = true
	st.close()
}

// finished: nothing left to write, and the worker's side settled.
func (st *directStream) finished() bool {
	return st.left || st.closed && len(st.out) == 0 && st.wEnd
}

// unwrapBody finds the direct client's body under the wrappers single and
// refused put on it: the first-byte hook and a refusal check's read-ahead.
func unwrapBody(b io.ReadCloser) (inner io.ReadCloser, fb *firstByte, prefix []byte) {
	if f, ok := b.(*firstByte); ok {
		fb, b = f, f.ReadCloser
	}
	if p, ok := b.(*peekedBody); ok {
		prefix = p.head.Bytes()
		b = p.rest
	}
	return b, fb, prefix
}

// dupConn is a duplicate of c's socket descriptor, which the caller
// closes: the connection itself stays as it is, idle while the loop
// writes or reads through the duplicate. A client's connection is
// net/http's, which may close it at any time (a server's Close): the
// duplicate keeps the socket the loop writes to from being reused.
func dupConn(c net.Conn) (int, error) {
	fd, err := connFd(c)
	if err != nil {
		return -1, err
	}
	return dupCloexec(fd)
}

// connFd is c's socket descriptor itself, valid while c is open: for a
// worker's connection, which nothing but the stream that holds it closes
// (two system calls a stream fewer than a duplicate).
func connFd(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errNotDirect
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd = int(s) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// leave ends the request's context: its client is gone.
func (r *recorder) leave() {
	if r.cancel != nil {
		r.cancel()
	}
}
