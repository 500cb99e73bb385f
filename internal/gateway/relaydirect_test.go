package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// serveGateway serves g's handler on loopback as HTTPServer does, its
// client connections in their requests' context (the direct relay's).
func serveGateway(g *Server) *httptest.Server {
	ts := httptest.NewUnstartedServer(g.Handler())
	ts.Config.ConnContext = connContext
	ts.Listener = directListener{ts.Listener}
	ts.Start()
	return ts
}

// directGateway serves a colocated gateway with the direct relay on
// worker through Serve, on loopback.
func directGateway(t *testing.T, worker string) (string, *Server) {
	t.Helper()
	g, err := New(Config{Colo: []string{worker}, Health: HealthConfig{Interval: -1}, Retries: -1, RelayDirect: true, Ops: Ops{Log: io.Discard},
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Serve(ctx, ln, time.Second); close(done) }()
	t.Cleanup(func() { cancel(); <-done; g.Close() })
	return "http://" + ln.Addr().String(), g
}

// Streams relayed directly reuse both connections: three streamed
// requests in turn on one client go over one client connection and one
// worker connection (back in the direct client's pool after each), each
// answered whole and once.
func TestDirectRelayReusesConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{} // the connections /generate came on
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			return // the gateway's probes, on its ordinary client
		}
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fin := "null"
			if i == 2 {
				fin = `{"type": "length", "length": 3}`
			}
			fmt.Fprint(w, sglEvent(strings.Repeat("a", i+1), fin))
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(ws.Close)
	gw, _ := directGateway(t, ws.URL)
	taken := directTaken.Load()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range 3 {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "POST", gw+"/generate", strings.NewReader(`{"text": "hi", "stream": true}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || bytes.Count(b, []byte("data: {")) != 3 || bytes.Count(b, []byte("data: [DONE]")) != 1 ||
			!bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) || resp.Header.Get("X-PDHybrid-Mode") == "" {
			t.Fatalf("request %d: %d %v %v\n%s", i, resp.StatusCode, err, resp.Header, b)
		}
		if i > 0 && !reused {
			t.Errorf("request %d: a new client connection; want the first one kept alive", i)
		}
	}
	if n := directTaken.Load() - taken; n != 3 {
		t.Errorf("the direct relay took %d streams, want 3", n)
	}
	if n := len(conns); n != 1 {
		t.Errorf("%d worker connections for 3 requests in turn, want 1 (the pool's)", n)
	}
}

// A client that leaves mid-stream under the direct relay is seen: the
// worker's request is aborted and closed, and the request is counted as
// the client's disconnect, not the worker's failure.
func TestDirectRelayClientLeaves(t *testing.T) {
	gone := make(chan struct{})
	aborted := make(chan struct{}, 1)
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort_request" {
			select {
			case aborted <- struct{}{}:
			default:
			}
			return
		}
		if r.URL.Path != "/generate" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		defer close(gone)
		for range 2000 { // at most 20 s: the client leaves long before
			fmt.Fprint(w, sglEvent("a", "null"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(ws.Close)
	gw, g := directGateway(t, ws.URL)
	taken := directTaken.Load()
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"text": "hi", "stream": true}`
	fmt.Fprintf(c, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {") {
			break
		}
	}
	c.Close() // the client leaves after its first event
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's request went on after its client left")
	}
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway sent the worker no abort for the request its client left")
	}
	if n := directTaken.Load() - taken; n != 1 {
		t.Fatalf("the direct relay took %d streams, want 1", n)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && outcomes(t, g)[outcomeDisconnect] == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	if o := outcomes(t, g); o[outcomeDisconnect] != 1 || o[outcomeWorkerError] != 0 || len(o) != 1 {
		t.Errorf("requests counted by outcome %v, want one client_disconnect only", o)
	}
}

// outcomes is pdhybrid_requests_total by outcome.
func outcomes(t *testing.T, g *Server) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range gathered(t, g) {
		if mf.GetName() != "pdhybrid_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// The stream tests pass under both relays: one terminal event, nothing
// after [DONE] or an error frame, an abort never a success, the first
// token's time observed, clients leaving no worker's fault. The whole
// package runs under the direct relay by default and under the ordinary
// one with GATEWAY_RELAY=ordinary; this runs the stream tests under the
// other one, so that a plain `go test` covers both.
func TestStreamTestsUnderTheOtherRelay(t *testing.T) {
	was := forceRelayDirect
	forceRelayDirect = !was
	defer func() { forceRelayDirect = was }()
	taken := directTaken.Load()
	for name, f := range map[string]func(*testing.T){
		"DoneThenCut": TestStreamEndsOnceAfterDoneThenCut, "Abort": TestStreamAbortEndsInOneError,
		"WithoutDone": TestStreamWithoutDoneEndsInError, "AbortNeverOK": TestAbortedAnswerIsNeverOK,
		"DoneInContent": TestSSEDoneInsideContent, "ErrorFrame": TestSSEErrorFrame,
		"TTFT": TestTTFTObservesFirstToken, "Disconnect": TestClientDisconnectIsNotAWorkerFailure,
	} {
		t.Run(name, f)
	}
	if n := directTaken.Load() - taken; forceRelayDirect != (n > 0) {
		t.Errorf("%d streams through the direct relay with it forced %v", n, forceRelayDirect)
	}
}

// A pooled worker connection the worker closed while it sat idle (its
// keep-alive ran out) is retried once on a fresh one, nothing of the
// request lost; the answer is read whole either way.
func TestWorkerPoolRetriesStaleConnection(t *testing.T) {
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"got": %d}`, len(b))
	}))
	t.Cleanup(ws.Close)
	p := newWorkerPool(Ops{})
	t.Cleanup(p.closeIdle)
	for i := range 3 {
		resp, err := p.post(context.Background(), ws.URL+"/generate", map[string]any{"text": "hi"})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != `{"got": 13}` {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, b, err)
		}
		if n := len(p.idle[strings.TrimPrefix(ws.URL, "http://")]); n != 1 {
			t.Fatalf("request %d: %d idle connections after an answer read whole, want 1", i, n)
		}
		ws.CloseClientConnections() // the worker drops its idle connections
	}
}

// A worker whose head and first events come in one segment: the direct
// relay takes the stream with its events already read (they go out with
// the response head, through net/http's writer) and the rest from the
// loop; the client gets every event once, one terminal, a well-framed
// chunked body, and both connections are kept for the next request.
func TestDirectRelayHeadWithFirstEvents(t *testing.T) {
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	first := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		chunk(sglEvent("a", "null")+sglEvent("b", "null"))
	rest := chunk(sglEvent("c", `{"type": "length", "length": 3}`)) + chunk("data: [DONE]\n\n") + "0\r\n\r\n"
	var mu sync.Mutex
	conns := map[string]bool{} // the connections /generate came on
	worker := generateWorker(t, func(c net.Conn) bool {
		mu.Lock()
		conns[c.RemoteAddr().String()] = true
		mu.Unlock()
		io.WriteString(c, first) // head and two events: one write
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, rest)
		return true
	})
	gw, _ := directGateway(t, worker)
	taken := directTaken.Load()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range 2 {
		resp, err := client.Post(gw+"/generate", "application/json", strings.NewReader(`{"text": "hi", "stream": true}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := sglEvent("a", "null") + sglEvent("b", "null") + sglEvent("c", `{"type": "length", "length": 3}`) + "data: [DONE]\n\n"
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != want {
			t.Fatalf("request %d: %d %v\n%q\nwant\n%q", i, resp.StatusCode, err, b, want)
		}
	}
	if n := directTaken.Load() - taken; n != 2 {
		t.Errorf("the direct relay took %d streams, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(conns); n != 1 {
		t.Errorf("%d worker connections for 2 requests in turn, want 1 (kept alive)", n)
	}
}

// The direct client serves plain http:// workers only, and none the
// ordinary client would reach through a proxy: an https:// worker, or
// one HTTP_PROXY covers, keeps net/http's client (before, such a streamed
// request went to the direct client and failed: "only http:// workers").
func TestDirectClientOnlyForPlainWorkers(t *testing.T) {
	proxied := func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "10.0.0.9" {
			return url.Parse("http://proxy:3128")
		}
		return nil, nil
	}
	broken := func(*http.Request) (*url.URL, error) { return nil, errors.New("bad proxy setting") }
	for _, tc := range []struct {
		base  string
		proxy func(*http.Request) (*url.URL, error)
		want  bool
	}{
		{"http://127.0.0.1:30000", nil, true},
		{"http://127.0.0.1:30000", proxied, true},
		{"http://10.0.0.9:30000", proxied, false},
		{"https://127.0.0.1:30000", nil, false},
		{"HTTP://127.0.0.1:30000", nil, true}, // url.Parse lower-cases the scheme
		{"http://", nil, false},
		{"127.0.0.1:30000", nil, false},
		{"http://127.0.0.1:30000", broken, false},
	} {
		if got := plainWorker(tc.base, tc.proxy); got != tc.want {
			t.Errorf("plainWorker(%q) = %v, want %v", tc.base, got, tc.want)
		}
	}
	d := &directRelay{proxy: proxied}
	for range 2 { // the second answer from the cache
		if d.serves("https://w:1") || d.serves("http://10.0.0.9:1") || !d.serves("http://w:1") {
			t.Fatal("serves disagrees with plainWorker")
		}
	}
}

// A worker whose answer's headers never end is an error after
// maxWorkerHead bytes, as net/http's Transport makes it (before, the
// direct client read it all into memory and waited for the head's end):
// the client gets a 503, and it comes while the worker still sends.
func TestDirectClientBoundsTheWorkersHead(t *testing.T) {
	stop := make(chan struct{})
	worker := generateWorker(t, func(c net.Conn) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
		line := "X-Pad: " + strings.Repeat("a", 64<<10) + "\r\n"
		for range 4 * maxWorkerHead / len(line) { // four times the cap, then hold on
			if _, err := io.WriteString(c, line); err != nil {
				return false
			}
		}
		<-stop
		return false
	})
	t.Cleanup(func() { close(stop) })
	gw, _ := directGateway(t, worker)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(gw+"/generate", "application/json", strings.NewReader(`{"text": "hi", "stream": true}`))
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "worker-unreachable") {
		t.Fatalf("%d %s, want 503 worker-unreachable", resp.StatusCode, b)
	}
}
