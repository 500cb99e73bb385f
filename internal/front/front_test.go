package front

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// replicas starts n test servers that answer with their index, and one
// that streams two SSE events with a pause between them.
func replicas(t *testing.T, n int) []string {
	var out []string
	for i := range n {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stream" {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: 1\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond)
				fmt.Fprint(w, "data: [DONE]\n\n")
				return
			}
			fmt.Fprint(w, i)
		}))
		t.Cleanup(ts.Close)
		out = append(out, ts.URL)
	}
	return out
}

func get(t *testing.T, url string, header map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestRoundRobinAndSessionHash(t *testing.T) {
	reps := replicas(t, 3)
	rr, err := New(RoundRobin, reps)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(rr)
	defer ts.Close()
	var got []string
	for range 6 {
		got = append(got, get(t, ts.URL+"/x", map[string]string{"X-Session-Id": "s"}))
	}
	if strings.Join(got, "") != "012012" {
		t.Fatalf("round-robin served %v", got)
	}
	sh, _ := New(SessionHash, reps)
	hs := httptest.NewServer(sh)
	defer hs.Close()
	seen := map[string]bool{}
	for i := range 30 {
		s := fmt.Sprintf("session-%d", i)
		a := get(t, hs.URL+"/x", map[string]string{"X-Claude-Code-Session-Id": s})
		if b := get(t, hs.URL+"/x", map[string]string{"X-Claude-Code-Session-Id": s}); a != b {
			t.Fatalf("%s went to replicas %s and %s", s, a, b)
		}
		seen[a] = true
	}
	if len(seen) != 3 {
		t.Fatalf("30 sessions hashed onto replicas %v, want all 3 used", seen)
	}
	// Removing a replica moves only its own sessions.
	for i := range 30 {
		s := fmt.Sprintf("session-%d", i)
		if a, b := rendezvous(s, 3), rendezvous(s, 2); a < 2 && a != b {
			t.Fatalf("%s moved from replica %d to %d when replica 2 left", s, a, b)
		}
	}
}

// An SSE stream passes through unbuffered: its first event arrives before
// the replica has finished.
func TestStreamUnbuffered(t *testing.T) {
	f, _ := New(RoundRobin, replicas(t, 1))
	ts := httptest.NewServer(f)
	defer ts.Close()
	start := time.Now()
	resp, err := http.Get(ts.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if time.Since(start) > 250*time.Millisecond {
		t.Fatal("the first event waited for the end of the stream")
	}
}

func TestBadConfigAndDeadReplica(t *testing.T) {
	if _, err := New("random", []string{"http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "round-robin") {
		t.Fatalf("bad policy: %v", err)
	}
	if _, err := New(RoundRobin, nil); err == nil {
		t.Fatal("no replicas accepted")
	}
	if _, err := New(RoundRobin, []string{"not a url"}); err == nil {
		t.Fatal("bad URL accepted")
	}
	f, _ := New(RoundRobin, []string{"http://127.0.0.1:1"})
	ts := httptest.NewServer(f)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "127.0.0.1:1") {
		t.Fatalf("dead replica: %d %s", resp.StatusCode, b)
	}
}

// A replica that is down is passed over: with one of two replicas refusing
// connections, every request (its body intact) is answered by the other.
func TestDeadReplicaPassedOver(t *testing.T) {
	var got []string
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		fmt.Fprint(w, "live")
	}))
	defer live.Close()
	f, _ := New(RoundRobin, []string{"http://127.0.0.1:1", live.URL})
	ts := httptest.NewServer(f)
	defer ts.Close()
	for i := range 4 {
		resp, err := http.Post(ts.URL+"/x", "text/plain", strings.NewReader(fmt.Sprint("body-", i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "live" || resp.Header.Get("X-PDHybrid-Replica") != live.URL {
			t.Fatalf("request %d: %d %q from %s", i, resp.StatusCode, b, resp.Header.Get("X-PDHybrid-Replica"))
		}
	}
	if strings.Join(got, ",") != "body-0,body-1,body-2,body-3" {
		t.Fatalf("the live replica got bodies %v", got)
	}
	if s := f.Served(); s[0] != 0 || s[1] != 4 {
		t.Fatalf("served %v", s)
	}
}

// A replica that dies with the request on it (its connection closed before
// any answer) costs the client nothing: the request goes to the next
// replica, and for a while later requests pass the dead one over.
func TestDeadReplicaSkipped(t *testing.T) {
	var hits int
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close() // killed mid-request: no status line ever comes
		}
	}))
	t.Cleanup(dying.Close)
	good := replicas(t, 1)[0]
	f, err := New(RoundRobin, []string{dying.URL, good})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f)
	defer ts.Close()
	for i := range 4 {
		resp, err := http.Post(ts.URL+"/generate", "application/json", strings.NewReader(`{"text":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "0" {
			t.Fatalf("request %d: %d %q, want the live replica's answer", i, resp.StatusCode, b)
		}
	}
	if hits != 1 {
		t.Errorf("the dead replica was tried %d times in its down second, want 1", hits)
	}
}
