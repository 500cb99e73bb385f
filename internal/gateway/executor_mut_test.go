package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// TestAdmissionCutIsCountedUnreachable: a decoder whose admission RPC's
// connection is cut (the RPC fails with a transport error, long before its
// timeout) has that reply counted under the reason admission-unreachable,
// the one the operator's dashboards and the dispatcher's log name it by —
// not under an HTTP status it never answered (admission-http-0).
func TestAdmissionCutIsCountedUnreachable(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var cut atomic.Bool
	var cuts atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() && r.URL.Path == "/session_cache/admit_direct_append" {
			cuts.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // no status line: a transport failure
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Decode = []string{front.URL}
		c.Health.Interval = -1
	})
	g.Discover(context.Background())
	if c := decoderSessionCache(g); c != present {
		t.Fatalf("decoder's session cache %v after discovery, want present", c)
	}
	cut.Store(true)
	turns(t, gw.URL, "cut", 2) // answered or not: only the admission's count is asserted
	if cuts.Load() == 0 {
		t.Fatal("no admission RPC reached the decoder: the test asserts nothing")
	}
	fams := scrape(t, gw.URL)
	got := value(fams, "pdhybrid_admissions_total", map[string]string{"result": "rejected", "reason": "admission-unreachable"})
	if got < 1 {
		t.Errorf("admissions counted unreachable %v after %d cut RPCs, want at least 1", got, cuts.Load())
	}
	if got := sum(fams, "pdhybrid_admissions_total"); got != value(fams, "pdhybrid_admissions_total", map[string]string{"reason": "admission-unreachable"}) {
		var labels []string
		for _, m := range fams["pdhybrid_admissions_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					labels = append(labels, l.GetValue())
				}
			}
		}
		t.Errorf("admission replies counted under reasons %v, want only admission-unreachable (every RPC was cut)", labels)
	}
}

// TestWholeOnPRetriesStopAtTheBudget: a session KVC v3 hosts whole on its
// prefill worker, whose process is then gone, while no health check runs
// (so P is not taken out of service and the session's next turn is sent
// to P again on every attempt). With Retries 1 the turn is dispatched
// twice — one retry — and then answered 503; never a third time.
func TestWholeOnPRetriesStopAtTheBudget(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true })
	d := worker(t, engine.RoleDecode, true)
	gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Dispatch.V3 = kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true, ColdInflightTokens: 6144,
			LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true}
		c.Health.Interval = -1 // no health check: a refused dial leaves P in service
		c.Retries = 1
	})
	b1, stop := v3SessionOnP(t, gw.URL, p, d)
	stop()
	settled(t, d.URL())
	p.Kill()
	b2 := generate(t, gw.URL, map[string]any{"input_ids": append(append(ids(50000, 2000), b1.outputIDs...), ids(700000, 300)...),
		"session_id": "b", "sampling_params": map[string]any{"max_new_tokens": 8}})
	var down bool
	srv.locked(func() { down = srv.disp.Down(kvc.RolePrefill, 0) })
	if down {
		t.Fatal("P taken out of service without a health check: the test does not reach the retry on P")
	}
	fams := scrape(t, gw.URL)
	retries := sum(fams, "pdhybrid_retries_total")
	onP := value(fams, "pdhybrid_retries_total", map[string]string{"worker": p.URL()})
	if retries != 1 || onP != 1 {
		t.Fatalf("b turn 2 (%+v) retried %v times, %v of them after P, want exactly 1 (Retries 1) after P", b2, retries, onP)
	}
	if b2.status != http.StatusServiceUnavailable {
		t.Errorf("b turn 2: %+v, want 503 once its one retry on the dead P failed", b2)
	}
}

// zeroThen is a body whose first reads return no bytes (a reader may
// answer 0, nil) before its data.
type zeroThen struct {
	zeros int
	r     io.Reader
}

func (z *zeroThen) Read(p []byte) (int, error) {
	if z.zeros > 0 {
		z.zeros--
		return 0, nil
	}
	return z.r.Read(p)
}

func (z *zeroThen) Close() error { return nil }

// TestFirstByteNeedsAByte: firstByte's hook (the prefill's end, the KV's
// landing) runs at the first read that returns a byte, once — not at a
// read of zero bytes, and never for an answer with no body at all.
func TestFirstByteNeedsAByte(t *testing.T) {
	for _, c := range []struct {
		name  string
		zeros int
		body  string
	}{
		{"data at once", 0, "data: 1\n\n"},
		{"two empty reads first", 2, "data: 1\n\n"},
		{"empty body", 0, ""},
		{"empty reads, then end", 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			b := &firstByte{ReadCloser: &zeroThen{zeros: c.zeros, r: strings.NewReader(c.body)}, f: func() { runs++ }}
			buf := make([]byte, 4)
			for i := range c.zeros {
				if n, err := b.Read(buf); n != 0 || err != nil {
					t.Fatalf("read %d: %d, %v", i, n, err)
				}
				if runs != 0 {
					t.Fatalf("hook ran %d times after %d empty reads, want 0", runs, i+1)
				}
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != c.body {
				t.Fatalf("body %q, %v, want %q", got, err, c.body)
			}
			want := 0
			if c.body != "" {
				want = 1
			}
			if runs != want {
				t.Errorf("hook ran %d times for body %q, want %d", runs, c.body, want)
			}
		})
	}
}
