package dnstest

import (
	"context"
	"net"
	"slices"
	"testing"
)

// Go's own resolver reads the server's answers: addresses of both
// families, SRV targets and ports, a missing name as not found, an outage
// as a failure that is not "not found".
func TestGoResolverReadsAnswers(t *testing.T) {
	s := Start(t)
	s.SetHost("w.pdh.test", "127.0.0.2", "127.0.0.3", "::1")
	s.SetSRV("_http._tcp.d.pdh.test", SRV{"v.pdh.test.", 30001}, SRV{"w.pdh.test.", 30002})
	r, ctx := s.Resolver(), context.Background()
	hosts, err := r.LookupHost(ctx, "w.pdh.test.")
	slices.Sort(hosts)
	if err != nil || !slices.Equal(hosts, []string{"127.0.0.2", "127.0.0.3", "::1"}) {
		t.Fatalf("LookupHost: %v %v", hosts, err)
	}
	_, srvs, err := r.LookupSRV(ctx, "", "", "_http._tcp.d.pdh.test.")
	if err != nil || len(srvs) != 2 {
		t.Fatalf("LookupSRV: %v %v", srvs, err)
	}
	got := map[string]uint16{}
	for _, s := range srvs {
		got[s.Target] = s.Port
	}
	if got["v.pdh.test."] != 30001 || got["w.pdh.test."] != 30002 {
		t.Fatalf("SRV records %v", got)
	}
	var de *net.DNSError
	if _, err := r.LookupHost(ctx, "gone.pdh.test."); err == nil || !asDNS(err, &de) || !de.IsNotFound {
		t.Fatalf("a missing name: %v, want not found", err)
	}
	s.Fail(true)
	if _, err := r.LookupHost(ctx, "w.pdh.test."); err == nil || (asDNS(err, &de) && de.IsNotFound) {
		t.Fatalf("an outage: %v, want a failure other than not found", err)
	}
}

func asDNS(err error, de **net.DNSError) bool {
	e, ok := err.(*net.DNSError)
	*de = e
	return ok
}
