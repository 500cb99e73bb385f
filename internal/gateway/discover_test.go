package gateway

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/dnstest"
	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

func TestParseDiscoverTarget(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "decode=dns+srv://_http._tcp.sglang-decode.ns.svc.cluster.local", want: "decode=dns+srv://_http._tcp.sglang-decode.ns.svc.cluster.local"},
		{in: "decode=dns://sglang-decode:30000", want: "decode=dns://sglang-decode:30000"},
		{in: "prefill=dns://sglang-prefill:30000", want: "prefill=dns://sglang-prefill:30000@8998"},
		{in: "prefill=dns+srv://_http._tcp.p.ns@9000", want: "prefill=dns+srv://_http._tcp.p.ns@9000"},
		{in: "colo=dns://[::1]:30000", want: "colo=dns://[::1]:30000"},
		{in: "dns://x:1", err: "want ROLE=NAME"},
		{in: "router=dns://x:1", err: "want ROLE=NAME"},
		{in: "decode=http://x:1", err: "want dns+srv://"},
		{in: "decode=dns://x", err: "want dns://host:port"},
		{in: "decode=dns://x:0", err: "want dns://host:port"},
		{in: "decode=dns://:30000", err: "want dns://host:port"},
		{in: "decode=dns+srv://x:30000", err: "no port"},
		{in: "decode=dns+srv://", err: "no port"},
		{in: "prefill=dns://x:1@99999", err: "bootstrap port"},
		{in: "decode=dns://x:1@8998", err: "want dns://host:port"},
	} {
		got, err := ParseDiscoverTarget(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error with %q", c.in, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.err == "" && got.String() != c.want:
			t.Errorf("%s read as %s, want %s", c.in, got, c.want)
		}
	}
}

// pool is each worker's state as the admin API would show it: active,
// draining; absent when removed.
func pool(g *Server) map[string]string {
	out := map[string]string{}
	g.locked(func() {
		for _, w := range g.workers {
			switch {
			case w.removed:
			case w.draining:
				out[w.URL] = "draining"
			default:
				out[w.URL] = "active"
			}
		}
	})
	return out
}

func portOf(t *testing.T, u string) uint16 {
	t.Helper()
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// A worker behind an SRV name joins the pool; when it vanishes it is
// drained, kept while a stream runs on it, removed once the stream ends,
// and takes its slot back when it returns. A DNS outage changes nothing,
// and a worker named on the command line is never touched.
func TestDiscoveryFollowsSRV(t *testing.T) {
	c0 := worker(t, engine.RoleColocated, false)
	c1 := worker(t, engine.RoleColocated, false)
	ts, g := gatewayServer(t, kvc.MechColo, nil, []*emulator.Server{c0}, nil)
	dns := dnstest.Start(t)
	const name = "_http._tcp.colo.pdh.test."
	dns.SetSRV(name, dnstest.SRV{Target: "c1.pdh.test.", Port: portOf(t, c1.URL())})
	dns.SetHost("c1.pdh.test.", "127.0.0.1")
	target, err := ParseDiscoverTarget("colo=dns+srv://" + name)
	if err != nil {
		t.Fatal(err)
	}
	round := func() map[string]string {
		g.Reconcile(g.resolveAll(context.Background(), dns.Resolver(), []DiscoverTarget{target}, time.Second))
		return pool(g)
	}
	if p := round(); p[c1.URL()] != "active" || p[c0.URL()] != "active" {
		t.Fatalf("after the first round: %v, want %s discovered beside %s", p, c1.URL(), c0.URL())
	}
	g.locked(func() { g.changeWorker(g.findWorker(c0.URL()), "drain") }) // requests to c1 only
	r, body := openStream(t, ts.URL)
	defer body.Close()

	dns.SetSRV(name)
	if p := round(); p[c1.URL()] != "draining" {
		t.Fatalf("c1 gone from DNS with a stream on it: %v, want it draining, not removed", p)
	}
	dns.Fail(true)
	if p := round(); p[c1.URL()] != "draining" || p[c0.URL()] != "draining" {
		t.Fatalf("after a DNS outage: %v, want nothing changed", p)
	}
	dns.Fail(false)
	if rest, _ := io.ReadAll(r); !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream on the vanished worker was cut: ...%s", rest[max(0, len(rest)-200):])
	}
	if p := round(); p[c1.URL()] != "" || p[c0.URL()] != "draining" {
		t.Fatalf("after its stream ended: %v, want c1 removed and c0 (not discovered) left as it was", p)
	}
	dns.SetSRV(name, dnstest.SRV{Target: "c1.pdh.test.", Port: portOf(t, c1.URL())})
	if p := round(); p[c1.URL()] != "active" {
		t.Fatalf("c1 back in DNS: %v, want it active again", p)
	}
	if a := generate(t, ts.URL, map[string]any{"input_ids": ids(5, 64), "sampling_params": map[string]any{"max_new_tokens": 2}}); a.status != 200 || a.worker != c1.URL() {
		t.Fatalf("a request after c1 came back: %+v, want it on c1", a)
	}
}

// dns://host:port: each address of the name is a worker on that port; the
// Discover loop re-resolves it on its interval.
func TestDiscoveryFollowsAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine's loopback: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := emulatortest.StartAt(t, "127.0.0.2:"+strconv.Itoa(port), engine.RolePrefill, false, emulator.Faults{})
	d0 := emulatortest.StartAt(t, "127.0.0.3:"+strconv.Itoa(port), engine.RoleDecode, true, emulator.Faults{})
	d1 := emulatortest.StartAt(t, "127.0.0.4:"+strconv.Itoa(port), engine.RoleDecode, true, emulator.Faults{})
	_, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0}, nil)
	dns := dnstest.Start(t)
	dns.SetHost("decode.pdh.test.", "127.0.0.3", "127.0.0.4")
	target, err := ParseDiscoverTarget("decode=dns://decode.pdh.test.:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.DiscoverWorkers(ctx, dns.Resolver(), []DiscoverTarget{target}, 10*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()
	wait := func(want map[string]string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, ok := pool(g), true
			for u, s := range want {
				ok = ok && got[u] == s
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool %v, want %v", got, want)
			}
		}
	}
	wait(map[string]string{d0.URL(): "active", d1.URL(): "active", p.URL(): "active"})
	dns.SetHost("decode.pdh.test.", "127.0.0.4")
	// d0 was on the command line as well as in DNS: it stays.
	wait(map[string]string{d0.URL(): "active", d1.URL(): "active"})
	dns.SetHost("decode.pdh.test.", "127.0.0.3")
	wait(map[string]string{d0.URL(): "active", d1.URL(): ""})
}
