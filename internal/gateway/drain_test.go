package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// serving runs a pd-colo gateway through Serve (as serve does) and
// returns its URL, the cancel that starts its drain and Serve's answer.
func serving(t *testing.T, drain time.Duration) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	w := worker(t, engine.RoleColocated, false)
	g, err := New(Config{Dispatch: kvc.Defaults(kvc.MechColo), Colo: []string{w.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		done <- g.Serve(ctx, ln, drain)
		close(ended)
	}()
	t.Cleanup(func() {
		cancel()
		<-ended
	})
	return "http://" + ln.Addr().String(), cancel, done
}

// openStream starts a long SSE answer and reads its first event.
func openStream(t *testing.T, gw string) (*bufio.Reader, io.Closer) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ids": ids(1, 64), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 2000}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %v", resp.StatusCode, err)
	}
	return r, resp.Body
}

// A draining gateway is unready but alive, refuses each new request with
// a retryable 503 in its API's own error shape, lets the open stream run
// to its end, and then Serve returns nil.
func TestDrainRefusesNewRequestsAndFinishesStreams(t *testing.T) {
	gw, cancel, done := serving(t, 20*time.Second)
	r, body := openStream(t, gw)
	defer body.Close()
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h, err := http.Get(gw + "/health")
		if err != nil {
			t.Fatal(err)
		}
		h.Body.Close()
		if h.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/health still ready 5 s after the drain began")
		}
	}
	if l, err := http.Get(gw + "/livez"); err != nil || l.StatusCode != http.StatusOK {
		t.Fatalf("/livez while draining: %v %v, want 200", l, err)
	}
	for _, c := range []struct{ path, body, shape string }{
		{"/generate", `{"text": "hi"}`, `"code":503`},
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`, `"error":{`},
		{"/v1/messages", `{"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}`, `"type":"error"`},
	} {
		resp, err := http.Post(gw+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatalf("%s while draining: %v", c.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !resp.Close {
			t.Errorf("%s while draining: %d, Retry-After %q, close %v; want 503 with Retry-After, the connection closed", c.path, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
		}
		if !strings.Contains(strings.ReplaceAll(string(b), " ", ""), c.shape) {
			t.Errorf("%s while draining answered %s, want its API's error shape (%s)", c.path, b, c.shape)
		}
	}
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the open stream was cut by the drain: ...%s", rest[max(0, len(rest)-200):])
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after a clean drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return once its last stream ended")
	}
}

// A stream longer than the drain timeout is cut, and Serve says so.
func TestDrainTimeoutCutsStreams(t *testing.T) {
	gw, cancel, done := serving(t, 50*time.Millisecond)
	r, body := openStream(t, gw)
	defer body.Close()
	cancel()
	io.ReadAll(r)
	var cut *DrainCutError
	if err := <-done; !errors.As(err, &cut) || cut.Cut != 1 {
		t.Fatalf("Serve after cutting one stream: %v, want a DrainCutError of 1", err)
	}
}
