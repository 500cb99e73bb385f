// Package dnstest is test helpers only: a DNS server on loopback answering
// A, AAAA and SRV questions from records a test sets and changes, and a
// *net.Resolver that asks it, for the tests of worker discovery (a
// Kubernetes headless Service's answers without a cluster). It speaks just
// enough of RFC 1035 for Go's own resolver: one question per message,
// answers uncompressed but for the pointer to the question's name.
package dnstest

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// DNS types and codes used here (RFC 1035, 2782, 3596).
const (
	typeA    = 1
	typeAAAA = 28
	typeSRV  = 33
	classIN  = 1

	rcodeOK       = 0
	rcodeServFail = 2
	rcodeNXDomain = 3
)

// SRV is one SRV record's target and port.
type SRV struct {
	Target string // a name, ending in "."
	Port   uint16
}

// Server is a DNS server on 127.0.0.1 (UDP), stopped at test end.
type Server struct {
	conn    net.PacketConn
	mu      sync.Mutex
	addrs   map[string][]netip.Addr // name → A/AAAA records
	srvs    map[string][]SRV        // name → SRV records
	failing bool
	queries int
}

// Start runs a server with no records.
func Start(t testing.TB) *Server {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{conn: c, addrs: map[string][]netip.Addr{}, srvs: map[string][]SRV{}}
	done := make(chan struct{})
	go func() { defer close(done); s.serve() }()
	t.Cleanup(func() { c.Close(); <-done })
	return s
}

// Addr is the server's UDP address.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// SetHost sets a name's addresses (none: the name does not exist).
func (s *Server) SetHost(name string, addrs ...string) {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs[canonical(name)] = as
}

// SetSRV sets a name's SRV records (none: the name does not exist).
func (s *Server) SetSRV(name string, recs ...SRV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srvs[canonical(name)] = recs
}

// Fail makes every answer SERVFAIL (a DNS outage) until called with false.
func (s *Server) Fail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = on
}

// Queries is how many questions the server has answered.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// Resolver is a Go resolver that asks this server alone.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr())
	}}
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

func (s *Server) serve() {
	buf := make([]byte, 4096)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := s.answer(buf[:n]); err == nil {
			s.conn.WriteTo(out, from)
		}
	}
}

// answer builds the reply to one query message.
func (s *Server) answer(q []byte) ([]byte, error) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil, errors.New("want one question")
	}
	name, end, err := readName(q, 12)
	if err != nil || end+4 > len(q) {
		return nil, errors.New("bad question")
	}
	qtype, qclass := binary.BigEndian.Uint16(q[end:]), binary.BigEndian.Uint16(q[end+2:])
	question := q[12 : end+4]

	s.mu.Lock()
	s.queries++
	rcode, rdatas := s.lookup(name, qtype, qclass)
	s.mu.Unlock()

	// QR, AA and RA set (Go's resolver takes an answer with neither AA nor
	// RA for a lame referral), RD copied.
	flags := uint16(0x8000|0x0400|0x0080) | binary.BigEndian.Uint16(q[2:])&0x0100 | uint16(rcode)
	out := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(q))
	out = binary.BigEndian.AppendUint16(out, flags)
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint16(out, uint16(len(rdatas)))
	out = append(out, 0, 0, 0, 0) // no authority, no additional records
	out = append(out, question...)
	for _, rd := range rdatas {
		out = append(out, 0xC0, 12) // the question's name
		out = binary.BigEndian.AppendUint16(out, qtype)
		out = binary.BigEndian.AppendUint16(out, classIN)
		out = binary.BigEndian.AppendUint32(out, 0) // TTL 0: never cached
		out = binary.BigEndian.AppendUint16(out, uint16(len(rd)))
		out = append(out, rd...)
	}
	return out, nil
}

// lookup is a question's rcode and answer records' data (held lock).
func (s *Server) lookup(name string, qtype, qclass uint16) (int, [][]byte) {
	if s.failing {
		return rcodeServFail, nil
	}
	addrs, hasAddrs := s.addrs[name]
	srvs, hasSRV := s.srvs[name]
	if (!hasAddrs || len(addrs) == 0) && (!hasSRV || len(srvs) == 0) || qclass != classIN {
		return rcodeNXDomain, nil
	}
	var out [][]byte
	switch qtype {
	case typeA, typeAAAA:
		for _, a := range addrs {
			if a.Is4() == (qtype == typeA) {
				out = append(out, a.AsSlice())
			}
		}
	case typeSRV:
		for _, r := range srvs {
			rd := []byte{0, 0, 0, 0} // priority, weight
			rd = binary.BigEndian.AppendUint16(rd, r.Port)
			out = append(out, appendName(rd, r.Target))
		}
	}
	return rcodeOK, out
}

// readName reads an uncompressed name at off, lower-cased with its final
// dot, and returns the offset after it.
func readName(b []byte, off int) (string, int, error) {
	var sb strings.Builder
	for {
		if off >= len(b) {
			return "", 0, errors.New("name past the message")
		}
		n := int(b[off])
		off++
		if n == 0 {
			break
		}
		if n&0xC0 != 0 || off+n > len(b) {
			return "", 0, errors.New("compressed or long label in a question")
		}
		sb.WriteString(strings.ToLower(string(b[off : off+n])))
		sb.WriteByte('.')
		off += n
	}
	if sb.Len() == 0 {
		return ".", off, nil
	}
	return sb.String(), off, nil
}

func appendName(b []byte, name string) []byte {
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}
