package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// stalledUpload opens a connection to gw, sends a POST declaring n body
// bytes and only the first few, and leaves it hanging (closed at test
// end). It returns the connection, to read its answer.
func stalledUpload(t *testing.T, gw, path, header string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n{\"input_ids\":[1", path, n, header)
	return c
}

// waitInFlight waits until the gateway holds at least n body bytes.
func waitInFlight(t *testing.T, g *Server, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); g.budget.inFlight() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway holds %d body bytes, want ≥ %d", g.budget.inFlight(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The byte budgets: while one client's upload holds most of its budget,
// its next body is a 429 (Retry-After, in each API's shape) naming the
// client's budget, another client's is served; past the gateway's whole
// budget every body is a 429; once the uploads end their bytes are given
// back.
func TestBodyByteBudgets(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.LoadPoll, cfg.ClientHeader = -1, "X-Api-Key"
	cfg.MaxInflightBytes, cfg.MaxClientBytes = 1<<20, 600<<10
	gw, g := start(t, cfg)
	up := stalledUpload(t, gw.URL, "/generate", "X-Api-Key: a\r\n", 500<<10)
	waitInFlight(t, g, 500<<10)
	small, _ := json.Marshal(map[string]any{"model": "m", "prompt": ids(1, 30000), "max_tokens": 2})
	send := func(path, key string) (int, string, http.Header) {
		req, _ := http.NewRequest("POST", gw.URL+path, bytes.NewReader(small))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for _, path := range []string{"/generate", "/v1/completions", "/v1/messages"} {
		status, b, h := send(path, "a")
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(b, "this client") {
			t.Errorf("%s from the client holding its budget: %d %s, want 429 with Retry-After", path, status, b)
		}
	}
	if s, b, _ := send("/v1/completions", "b"); s != http.StatusOK {
		t.Errorf("another client: %d %s, want 200", s, b)
	}
	up2 := stalledUpload(t, gw.URL, "/generate", "X-Api-Key: c\r\n", 500<<10)
	waitInFlight(t, g, 1000<<10)
	if s, b, _ := send("/v1/completions", "d"); s != http.StatusTooManyRequests || !strings.Contains(b, "gateway holds") {
		t.Errorf("past the whole budget: %d %s, want 429", s, b)
	}
	up.Close()
	up2.Close()
	for deadline := time.Now().Add(5 * time.Second); g.budget.inFlight() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d body bytes still held after the uploads ended", g.budget.inFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s, b, _ := send("/v1/completions", "a"); s != http.StatusOK {
		t.Errorf("after the uploads ended: %d %s", s, b)
	}
}

// A client sending its body too slowly is answered 408 and its connection
// closed once the body timeout passes; headers over the cap are a 431 in
// JSON.
func TestSlowBodyAndHeaderCap(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.LoadPoll, cfg.BodyTimeout, cfg.MaxHeaderBytes = -1, 200*time.Millisecond, 4096
	gw, _ := start(t, cfg)
	conn := stalledUpload(t, gw.URL, "/v1/chat/completions", "", 1000)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a stalled body got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"type":"invalid_request_error"`) {
		t.Errorf("stalled body: %d %s, want 408 in OpenAI's shape", resp.StatusCode, b)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the slow client's connection stayed open")
	}
	req, _ := http.NewRequest("POST", gw.URL+"/generate", strings.NewReader(`{"text":"hi"}`))
	req.Header.Set("X-Big", strings.Repeat("x", 6000))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(string(b), `"code":431`) {
		t.Errorf("big headers: %d %s, want a JSON 431", resp.StatusCode, b)
	}
}

// The budget's counts: a take past either cap is refused and takes
// nothing; what was taken is given back.
func TestByteBudget(t *testing.T) {
	var b byteBudget
	if w := b.take("a", 60, 100, 80); w != "" {
		t.Fatal(w)
	}
	if w := b.take("a", 30, 100, 80); w != rejectClientBytes {
		t.Fatalf("over the client's cap: %q", w)
	}
	if w := b.take("b", 50, 100, 80); w != rejectBytes {
		t.Fatalf("over the total: %q", w)
	}
	if w := b.take("b", 40, 100, 80); w != "" || b.inFlight() != 100 {
		t.Fatalf("%q, %d in flight", w, b.inFlight())
	}
	b.give("a", 60)
	b.give("b", 40)
	if b.inFlight() != 0 || len(b.perClient) != 0 {
		t.Fatalf("left %d, %v", b.inFlight(), b.perClient)
	}
}
