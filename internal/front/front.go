// Package front is the load balancer `pdhybrid up --gateways N` puts in
// front of several gateway replicas: any replica may serve any turn of any
// session (the decoders answer where a session lives), so plain
// round-robin is correct; hashing the session header onto a replica keeps
// each session on one replica's warm belief and saves its residency probes.
// Answers are relayed unbuffered, so SSE streams pass through as they come.
package front

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
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
}

// New makes a front over the replicas' base URLs.
func New(policy Policy, replicas []string) (*Front, error) {
	if policy != RoundRobin && policy != SessionHash {
		return nil, fmt.Errorf("front: unknown policy %q (want round-robin or session-hash)", policy)
	}
	if len(replicas) == 0 {
		return nil, errors.New("front: no replicas")
	}
	f := &Front{policy: policy, names: replicas, served: make([]atomic.Int64, len(replicas))}
	// Connections to the replicas are kept for reuse (Go's default keeps 2
	// idle per host: every other request would dial).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 4096, 1024
	for _, r := range replicas {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("front: replica URL %q: want http://HOST:PORT", r)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1 // SSE: every write reaches the client at once
		p.Transport = transport
		p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, `{"error":{"message":%q,"code":502}}`+"\n", "front: replica "+r+": "+err.Error())
		}
		f.replicas = append(f.replicas, p)
	}
	return f, nil
}

// ServeHTTP relays the request to the replica the policy picks.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := f.pick(r)
	f.served[i].Add(1)
	w.Header().Set("X-PDHybrid-Replica", f.names[i])
	f.replicas[i].ServeHTTP(w, r)
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
