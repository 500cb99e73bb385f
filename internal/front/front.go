// Package front is the load balancer `pdhybrid up --gateways N` puts in
// front of several gateway replicas: any replica may serve any turn of any
// session (the decoders answer where a session lives), so plain
// round-robin is correct; hashing the session header onto a replica keeps
// each session on one replica's warm belief and saves its residency probes.
// Answers are relayed unbuffered, so SSE streams pass through as they come.
package front

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"
)

// Policy picks a replica for a request.
type Policy string

const (
	RoundRobin  Policy = "round-robin"  // each request to the next replica
	SessionHash Policy = "session-hash" // a session's requests to one replica (rendezvous hashing)
)

// SessionHeaders are the headers a session-hash front reads, in order: the
// ones coding agents send (Claude Code, Codex, OpenCode, Dynamo) and the
// gateway's own. A request with none goes round-robin.
var SessionHeaders = []string{"X-Claude-Code-Session-Id", "Session-Id", "X-Session-Id", "X-Dynamo-Session-Id"}

// Front is an http.Handler over the replicas.
type Front struct {
	policy   Policy
	replicas []*httputil.ReverseProxy
	names    []string
	next     atomic.Uint64
	served   []atomic.Int64
	// downUntil is, per replica, the time (Unix ns) until which new
	// requests pass it over: one that refused a connection is not asked
	// again by every request while it restarts.
	downUntil []atomic.Int64
}

// downFor is how long a replica that could not be reached is passed over
// before it is tried again.
const downFor = time.Second

// New makes a front over the replicas' base URLs.
func New(policy Policy, replicas []string) (*Front, error) {
	if policy != RoundRobin && policy != SessionHash {
		return nil, fmt.Errorf("front: unknown policy %q (want round-robin or session-hash)", policy)
	}
	if len(replicas) == 0 {
		return nil, errors.New("front: no replicas")
	}
	f := &Front{policy: policy, names: replicas, served: make([]atomic.Int64, len(replicas)), downUntil: make([]atomic.Int64, len(replicas))}
	// Connections to the replicas are kept for reuse (Go's default keeps 2
	// idle per host: every other request would dial).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 4096, 1024
	for i, r := range replicas {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("front: replica URL %q: want http://HOST:PORT", r)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1 // SSE: every write reaches the client at once
		p.Transport = transport
		p.ErrorHandler = func(_ http.ResponseWriter, req *http.Request, err error) {
			// Called only before any of the answer was written: ServeHTTP
			// decides whether to try the next replica or answer 502.
			req.Context().Value(attemptKey{}).(*attempt).err = err
		}
		p.ModifyResponse = func(*http.Response) error {
			// Counted when the replica answers, before its body reaches
			// the client: a caller that has read the answer sees the count.
			f.served[i].Add(1)
			return nil
		}
		f.replicas = append(f.replicas, p)
	}
	return f, nil
}

// maxBody caps a request body the front buffers (so it can try another
// replica); the gateways' own cap is the same by default.
const maxBody = 64 << 20

type attemptKey struct{}

// attempt carries a proxy error out of the ErrorHandler.
type attempt struct{ err error }

// ServeHTTP relays the request to the replica the policy picks. A replica
// that cannot be reached — its connection refused (a replica down), or
// reset or closed before it answered (one killed with the request on it)
// — is passed over for the next one, and for a second by later requests,
// so one replica's crash costs no request that had not started its
// answer; any other failure is a 502.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "front: reading the body: "+err.Error())
			return
		}
		body = b
	}
	start, n := f.pick(r), len(f.replicas)
	now := time.Now().UnixNano()
	order := make([]int, 0, n)
	var down []int
	for k := range n {
		i := (start + k) % n
		if f.downUntil[i].Load() > now {
			down = append(down, i) // last resort: all may be down
			continue
		}
		order = append(order, i)
	}
	order = append(order, down...)
	var last error
	for _, i := range order {
		a := &attempt{}
		req := r.Clone(context.WithValue(r.Context(), attemptKey{}, a))
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		w.Header().Set("X-PDHybrid-Replica", f.names[i])
		f.replicas[i].ServeHTTP(w, req)
		if a.err == nil {
			return
		}
		last = fmt.Errorf("replica %d: %w", i, a.err)
		if !unreachable(a.err) || r.Context().Err() != nil {
			break
		}
		f.downUntil[i].Store(time.Now().Add(downFor).UnixNano())
	}
	writeError(w, http.StatusBadGateway, "front: "+last.Error())
}

// unreachable says whether a proxy error means the replica never answered
// (so the request can go to another): refused, reset, or the connection
// closed before a response. A replica that closes the connection while
// the body is still being sent shows as any of EOF (the read side saw it
// first), EPIPE or a write on the closed connection (net.ErrClosed: the
// transport closed it on the read side's EOF), whichever goroutine loses
// the race; all mean no status line came.
func unreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"code":%d}}`+"\n", msg, status)
}

// Served is the requests relayed to each replica so far.
func (f *Front) Served() []int64 {
	out := make([]int64, len(f.served))
	for i := range f.served {
		out[i] = f.served[i].Load()
	}
	return out
}

func (f *Front) pick(r *http.Request) int {
	n := len(f.replicas)
	if f.policy == SessionHash {
		for _, h := range SessionHeaders {
			if s := r.Header.Get(h); s != "" {
				return rendezvous(s, n)
			}
		}
	}
	return int((f.next.Add(1) - 1) % uint64(n))
}

// rendezvous is highest-random-weight hashing: the replica whose hash with
// the session is largest. Removing a replica moves only its own sessions.
func rendezvous(session string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(session))
	key := h.Sum64()
	best, bestW := 0, uint64(0)
	for i := range n {
		if w := mix(key ^ uint64(i+1)*0x9E3779B97F4A7C15); w > bestW || i == 0 {
			best, bestW = i, w
		}
	}
	return best
}

// mix is splitmix64's finaliser: FNV alone barely spreads keys that differ
// in one byte.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
