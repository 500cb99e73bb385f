package gateway

// Worker discovery: pools that follow DNS. A Kubernetes headless Service
// (clusterIP: None) answers its name with one A record per ready pod and
// its _port._proto name with one SRV record per pod and port, so
// re-resolving such a name on an interval follows a Deployment as it
// scales, rolls or loses pods, with nothing but DNS — the label selector is
// the Service's. A worker that appears joins its pool, and one that
// vanishes is drained and, once its last request has ended, removed: the
// same steps, through the same code, as POST /admin/workers/add, drain and
// remove (admin.go).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Discovery names: dns+srv://_service._proto.name (SRV: each address of
// each target, on the record's port, a worker) or dns://host:port (A/AAAA: each address a worker on that
// port). A prefill target may end in @PORT, its workers' bootstrap port
// (default 8998).
const (
	schemeSRV = "dns+srv"
	schemeDNS = "dns"
)

// DiscoverTarget is one name whose records are a pool's workers.
type DiscoverTarget struct {
	Role          string // prefill, decode or colo
	Scheme        string // dns+srv or dns
	Host          string // the name to resolve
	Port          int    // dns: the workers' port
	BootstrapPort int    // prefill: the workers' bootstrap port
}

// String is the target as ParseDiscoverTarget reads it.
func (t DiscoverTarget) String() string {
	s := t.Role + "=" + t.Scheme + "://" + t.Host
	if t.Scheme == schemeDNS {
		s = t.Role + "=" + t.Scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
	}
	if t.Role == rolePrefill {
		s += "@" + strconv.Itoa(t.BootstrapPort)
	}
	return s
}

// ParseDiscoverTarget reads ROLE=dns+srv://NAME or ROLE=dns://HOST:PORT,
// with @BOOTSTRAP_PORT after a prefill name.
func ParseDiscoverTarget(s string) (DiscoverTarget, error) {
	role, name, ok := strings.Cut(s, "=")
	if !ok || (role != rolePrefill && role != roleDecode && role != roleColo) {
		return DiscoverTarget{}, fmt.Errorf("%q: want ROLE=NAME with ROLE prefill, decode or colo", s)
	}
	t := DiscoverTarget{Role: role}
	if role == rolePrefill {
		t.BootstrapPort = 8998
		if i := strings.LastIndex(name, "@"); i >= 0 {
			n, err := strconv.Atoi(name[i+1:])
			if err != nil || n < 1 || n > 65535 {
				return DiscoverTarget{}, fmt.Errorf("%q: bootstrap port %q, want a TCP port in [1, 65535]", s, name[i+1:])
			}
			t.BootstrapPort, name = n, name[:i]
		}
	}
	scheme, rest, ok := strings.Cut(name, "://")
	if !ok || (scheme != schemeSRV && scheme != schemeDNS) {
		return DiscoverTarget{}, fmt.Errorf("%q: want dns+srv://_service._proto.name or dns://host:port", s)
	}
	t.Scheme = scheme
	if scheme == schemeSRV {
		if rest == "" || strings.ContainsAny(rest, ":/") {
			return DiscoverTarget{}, fmt.Errorf("%q: want dns+srv://_service._proto.name (a name, no port: SRV records carry it)", s)
		}
		t.Host = rest
		return t, nil
	}
	host, port, err := net.SplitHostPort(rest)
	n, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return DiscoverTarget{}, fmt.Errorf("%q: want dns://host:port with a TCP port in [1, 65535]", s)
	}
	t.Host, t.Port = host, n
	return t, nil
}

// Resolver is the part of *net.Resolver discovery uses.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Discovered is one worker a target resolved to.
type Discovered struct {
	Role          string
	URL           string
	BootstrapPort int
	source        string // the target it came from
}

// Resolve looks t up once. A name that does not exist, or has no records,
// is an empty pool (a Deployment scaled to zero); any other failure is an
// error, and the caller keeps what it had.
func Resolve(ctx context.Context, r Resolver, t DiscoverTarget) ([]Discovered, error) {
	var hostPorts []string
	switch t.Scheme {
	case schemeSRV:
		_, srvs, err := r.LookupSRV(ctx, "", "", t.Host)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		// Each target is resolved too: a worker is named by its address,
		// so a pod that comes back under the same name with an empty cache
		// is a new worker to the router, not the old one's belief.
		for _, s := range srvs {
			addrs, err := r.LookupHost(ctx, s.Target)
			if notFound(err) {
				continue // gone between the two answers
			}
			if err != nil {
				return nil, err
			}
			for _, a := range addrs {
				hostPorts = append(hostPorts, net.JoinHostPort(a, strconv.Itoa(int(s.Port))))
			}
		}
	default:
		addrs, err := r.LookupHost(ctx, t.Host)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			hostPorts = append(hostPorts, net.JoinHostPort(a, strconv.Itoa(t.Port)))
		}
	}
	slices.Sort(hostPorts)
	out := make([]Discovered, 0, len(hostPorts))
	for _, hp := range slices.Compact(hostPorts) {
		u := (&url.URL{Scheme: "http", Host: hp}).String()
		out = append(out, Discovered{Role: t.Role, URL: u, BootstrapPort: t.BootstrapPort, source: t.String()})
	}
	return out, nil
}

func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// DiscoverWorkers re-resolves targets every interval until ctx ends, bringing the
// pools in line with what they name (Reconcile). A target whose lookup
// fails keeps its workers until a lookup succeeds: a DNS outage does not
// empty the pools.
func (s *Server) DiscoverWorkers(ctx context.Context, r Resolver, targets []DiscoverTarget, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		found, failed := s.resolveAll(ctx, r, targets, every)
		s.Reconcile(found, failed)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// resolveAll looks every target up, each bounded by timeout, and says
// which failed.
func (s *Server) resolveAll(ctx context.Context, r Resolver, targets []DiscoverTarget, timeout time.Duration) ([]Discovered, map[string]bool) {
	var found []Discovered
	failed := map[string]bool{}
	for _, t := range targets {
		c, cancel := context.WithTimeout(ctx, timeout)
		ws, err := Resolve(c, r, t)
		cancel()
		if err != nil {
			failed[t.String()] = true
			if ctx.Err() == nil {
				s.log.Warn("discovery", "target", t.String(), "error", err.Error())
			}
			continue
		}
		found = append(found, ws...)
	}
	return found, failed
}

// Adopt marks workers already in the pools (put there by Config from a
// first resolution) as discovery's, to drain and remove when they vanish.
func (s *Server) Adopt(found []Discovered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.discovered == nil {
		s.discovered = map[string]string{}
	}
	for _, d := range found {
		if s.findWorker(d.URL) != nil {
			s.discovered[d.URL] = sourceOf(d)
		}
	}
}

func sourceOf(d Discovered) string {
	if d.source == "" {
		return d.Role // a caller's own list
	}
	return d.source
}

// Reconcile brings the pools in line with found, the workers the targets
// resolved to now (failed: targets whose lookup failed, whose workers
// stay). Only workers discovery added are drained or removed; a worker
// named on the command line or added through /admin is left alone.
// Removal waits for a drained worker's requests to end: it is retried on
// every round until then.
func (s *Server) Reconcile(found []Discovered, failed map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.discovered == nil {
		s.discovered = map[string]string{}
	}
	want := map[string]bool{}
	for _, d := range found {
		want[d.URL] = true
		wk := s.findWorker(d.URL)
		switch {
		case wk == nil || wk.removed:
			status, msg, added := s.addWorker(wk, workerChange{URL: d.URL, Role: d.Role, BootstrapPort: d.BootstrapPort})
			if status >= 300 {
				s.log.Warn("discovery", "op", "add", "role", d.Role, "url", d.URL, "error", msg)
				continue
			}
			s.met.workerSeries(added.URL)
			s.discovered[d.URL] = sourceOf(d)
			s.log.Info("discovery", "op", "add", "role", d.Role, "url", d.URL)
		case s.discovered[d.URL] != "" && wk.draining:
			s.changeWorker(wk, "undrain") // back before it was removed
			s.log.Info("discovery", "op", "undrain", "role", d.Role, "url", d.URL)
		}
	}
	for u, src := range s.discovered {
		wk := s.findWorker(u)
		if want[u] || failed[src] || wk == nil || wk.removed {
			continue
		}
		if !wk.draining {
			s.changeWorker(wk, "drain")
			s.log.Info("discovery", "op", "drain", "role", wk.Role, "url", u)
		}
		if status, _ := s.changeWorker(wk, "remove"); status < 300 {
			delete(s.discovered, u)
			s.log.Info("discovery", "op", "remove", "role", wk.Role, "url", u)
		}
	}
}
