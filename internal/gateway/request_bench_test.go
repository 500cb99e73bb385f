package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// benchBody is scripts/proxybench's request: 64 prompt tokens, streamed,
// 32 tokens out.
func benchBody() []byte {
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = 1000 + i
	}
	b, _ := json.Marshal(map[string]any{"input_ids": ids, "stream": true, "sampling_params": map[string]any{"max_new_tokens": 32, "ignore_eos": true}})
	return b
}

// cpuPerOp reports the process's CPU time (user + system) per iteration
// as cpu-ns/op from when it is called: on a shared machine wall time per
// op is mostly the run queue, CPU time is the work.
func cpuPerOp(b *testing.B) {
	used := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(used()-start)/float64(b.N), "cpu-ns/op")
		}
	})
}

// BenchmarkGenerateBodySmall is the gateway's own cost per /generate
// request of the proxy benchmark's short prompt: the body (as the limits
// hand it over, read whole) parsed for what routing needs, and the
// worker's request built for one leg as the direct client writes it (the
// colocated path).
func BenchmarkGenerateBodySmall(b *testing.B) {
	raw := benchBody()
	s := &Server{cfg: Config{MaxBodyBytes: 64 << 20, BlockSize: 64}}
	r := httptest.NewRequest("POST", "/generate", nil)
	b.ReportAllocs()
	cpuPerOp(b)
	for b.Loop() {
		r.Body = newReadBody(raw)
		q, err := s.parseGenerate(r)
		if err != nil {
			b.Fatal(err)
		}
		body := clone(q.body)
		body["rid"] = newRID()
		rd, n := jsonBody(body)
		if _, err := appendAll(make([]byte, 0, n+128), rd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamedRequest is one streamed /generate request's whole path
// through a colocated gateway on loopback (client, gateway and a stub
// worker in this process): the stub answers its head, then two events at once, so what
// an iteration costs is mostly per request — HTTP in and out, the body,
// dispatch, the worker request, the relay's set-up and the recorder. Run
// for both relays.
func BenchmarkStreamedRequest(b *testing.B) {
	ev := func(text, fin string) string {
		return fmt.Sprintf(`data: {"text": %q, "output_ids": [1], "meta_info": {"id": "x", "prompt_tokens": 64, "completion_tokens": 1, "cached_tokens": 0, "finish_reason": %s}}`+"\n\n", text, fin)
	}
	answer := []byte(ev("a", "null") + ev("b", `{"type": "length", "length": 2}`) + "data: [DONE]\n\n")
	ws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush() // chunked, as a streaming worker answers
		w.Write(answer)
	}))
	defer ws.Close()
	for _, relay := range []string{"ordinary", "direct"} {
		b.Run("relay="+relay, func(b *testing.B) {
			url := "http://" + serveColoBench(b, ws.URL, relay == "direct") + "/generate"
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			body := benchBody()
			b.ReportAllocs()
			cpuPerOp(b)
			for b.Loop() {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte("[DONE]")) {
					b.Fatalf("status %d: %s", resp.StatusCode, got)
				}
			}
		})
	}
}

// serveColoBench serves a kv-aware colocated gateway in front of worker on
// loopback, health checks and retries off (the relay under test is all
// there is), until b ends; it returns the gateway's host:port.
func serveColoBench(b *testing.B, worker string, direct bool) string {
	g, err := New(Config{Colo: []string{worker}, Health: HealthConfig{Interval: -1}, Retries: -1, RelayDirect: direct,
		Ops: Ops{Log: io.Discard}, Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Serve(ctx, ln, time.Second); close(done) }()
	b.Cleanup(func() { cancel(); <-done; g.Close() })
	return ln.Addr().String()
}
