package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBurst fires bursts of N simultaneous streamed /generate
// requests through a pd-colo gateway (direct relay, kv-aware routing, as
// scripts/proxybench runs it) to a stand-in worker on loopback, and
// measures per request the time from the client's write to the worker's
// read of it. The stand-in reads every request on a goroutine of its own
// and answers at once (its head, two token events, [DONE]), so the
// spread of those times within a burst is the gateway's serial work
// between a request's arrival and its bytes leaving for the worker: what
// the last request of proxybench's lockstep bursts waits for. "none"
// sends the same bursts straight to the stand-in (the floor: the client's
// and the stand-in's own work on these cores).
//
// An iteration is one burst of N on N warm keep-alive connections (each
// client connection and each of the gateway's worker connections already
// used once); reported: the write→arrival p50 and p99 over every request
// of every burst (hop-p50-µs, hop-p99-µs), the mean time from a burst's
// first write to its last arrival (span-µs), and the process's CPU per
// request (cpu-ns/req: client, gateway and stand-in together; the "none"
// row is the part that is not the gateway's).
//
//	go test -run X -bench Burst -benchtime 20x -count 6 ./internal/gateway/
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{100, 500} {
		for _, via := range []string{"none", "gateway"} {
			b.Run(fmt.Sprintf("streams=%d/via=%s", n, via), func(b *testing.B) { burst(b, n, via == "gateway", 0) })
		}
	}
}

// BenchmarkBurstStreamed is BenchmarkBurst with the stand-in sending its
// head at once and its events 5 ms later, as a worker streams
// (its head before the prefill's first token): the direct relay's
// streams go on its event loop, where BenchmarkBurst's, whole in hand
// with their heads, need none.
//
//	go test -run X -bench BurstStreamed -benchtime 20x -count 6 ./internal/gateway/
func BenchmarkBurstStreamed(b *testing.B) {
	for _, n := range []int{100, 500} {
		for _, via := range []string{"none", "gateway"} {
			b.Run(fmt.Sprintf("streams=%d/via=%s", n, via), func(b *testing.B) { burst(b, n, via == "gateway", 5*time.Millisecond) })
		}
	}
}

func burst(b *testing.B, n int, viaGateway bool, pause time.Duration) {
	w := startBurstWorker(b)
	w.pause = pause
	target := w.addr
	if viaGateway {
		target = serveColoBench(b, "http://"+w.addr, true)
	}
	clients := make([]*burstClient, n)
	for i := range clients {
		c, err := dialBurst(target)
		if err != nil {
			b.Fatal(err)
		}
		defer c.c.Close()
		clients[i] = c
	}
	// Warm-up: every connection used once, all at once, so the gateway's
	// worker pool holds n connections as in a steady run.
	seq := 0
	fire := func() (sent, first []time.Time, seqs []int) {
		sent, first, seqs = make([]time.Time, n), make([]time.Time, n), make([]int, n)
		for i := range seqs {
			seq++
			seqs[i] = seq
		}
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(n)
		wg.Add(n)
		errs := make(chan error, n)
		for i, c := range clients {
			go func() {
				defer wg.Done()
				ready.Done()
				<-start
				t, f, err := c.do(seqs[i])
				sent[i], first[i] = t, f
				if err != nil {
					errs <- err
				}
			}()
		}
		ready.Wait()
		close(start)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		return sent, first, seqs
	}
	fire()
	var hops, ttfts []time.Duration
	var span time.Duration
	b.ResetTimer()
	cpu := cpuNow()
	for range b.N {
		sent, got, seqs := fire()
		first, last := sent[0], time.Time{}
		for i, s := range seqs {
			ttfts = append(ttfts, got[i].Sub(sent[i]))
			at := w.arrival(s)
			if at.IsZero() {
				b.Fatalf("request %d never reached the stand-in", s)
			}
			hops = append(hops, at.Sub(sent[i]))
			if sent[i].Before(first) {
				first = sent[i]
			}
			if at.After(last) {
				last = at
			}
		}
		span += last.Sub(first)
	}
	used := cpuNow() - cpu
	b.StopTimer()
	slices.Sort(hops)
	slices.Sort(ttfts)
	pct := func(x []time.Duration, p int) float64 { return float64(x[(len(x)-1)*p/100]) / 1e3 }
	b.ReportMetric(pct(hops, 50), "hop-p50-µs")
	b.ReportMetric(pct(hops, 99), "hop-p99-µs")
	b.ReportMetric(pct(ttfts, 50), "ttft-p50-µs")
	b.ReportMetric(pct(ttfts, 99), "ttft-p99-µs")
	b.ReportMetric(float64(span)/float64(b.N)/1e3, "span-µs")
	b.ReportMetric(float64(used)/float64(b.N*n), "cpu-ns/req")
}

// cpuNow is the process's CPU time so far (user + system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burstClient is one client keep-alive connection, written and read raw
// so the client's own work stays small beside the gateway's.
type burstClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialBurst(addr string) (*burstClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &burstClient{c: c, br: bufio.NewReaderSize(c, 16<<10)}, nil
}

// burstBody is proxybench's request (64 prompt tokens, 32 out, streamed),
// its first token the request's sequence number so that the stand-in
// can tell the requests apart.
func burstBody(seq int) []byte {
	ids := make([]int, 64)
	for i := range ids {
		ids[i] = 1000 + i
	}
	ids[0] = seq
	j, _ := json.Marshal(map[string]any{"input_ids": ids, "stream": true, "sampling_params": map[string]any{"max_new_tokens": 32, "ignore_eos": true}})
	return j
}

// do writes one request and reads its answer to the end; it returns when
// the write began and when the first token event came.
func (c *burstClient) do(seq int) (sent, first time.Time, err error) {
	body := burstBody(seq)
	msg := fmt.Appendf(nil, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	sent = time.Now()
	if _, err := c.c.Write(msg); err != nil {
		return sent, first, err
	}
	first, err = readChunkedAnswer(c.br)
	return sent, first, err
}

// readChunkedAnswer reads one chunked 200 answer that ends in [DONE],
// and tells when its first token event was read.
func readChunkedAnswer(br *bufio.Reader) (first time.Time, err error) {
	status, err := br.ReadString('\n')
	if err != nil {
		return first, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		return first, fmt.Errorf("answer %q", strings.TrimSpace(status))
	}
	for { // head
		line, err := br.ReadString('\n')
		if err != nil {
			return first, err
		}
		if line == "\r\n" {
			break
		}
	}
	var body []byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return first, err
		}
		size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			return first, fmt.Errorf("chunk size %q", line)
		}
		if size == 0 {
			if _, err := br.ReadString('\n'); err != nil {
				return first, err
			}
			if !bytes.Contains(body, []byte("data: [DONE]")) {
				return first, fmt.Errorf("answer without [DONE]: %q", body)
			}
			return first, nil
		}
		chunk := make([]byte, size+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return first, err
		}
		body = append(body, chunk[:size]...)
		if first.IsZero() && bytes.Contains(body, []byte("data: {")) {
			first = time.Now()
		}
	}
}

// burstWorker is the stand-in worker: raw HTTP/1.1 over loopback, one
// goroutine a connection, recording when each /generate request's first
// bytes were read (by the sequence number in its first token).
type burstWorker struct {
	addr  string
	mu    sync.Mutex
	at    map[int]time.Time
	pause time.Duration // between the answer's head and its events (0: one write)
}

// burstHead is the length of burstAnswer's head.
var burstHead = bytes.Index(burstAnswer, []byte("\r\n\r\n")) + 4

var burstAnswer = func() []byte {
	ev := func(text, fin string) string {
		return fmt.Sprintf(`data: {"text": %q, "output_ids": [1], "meta_info": {"id": "x", "prompt_tokens": 64, "completion_tokens": 1, "cached_tokens": 0, "finish_reason": %s}}`+"\n\n", text, fin)
	}
	body := ev("a", "null") + ev("b", `{"type": "length", "length": 2}`) + "data: [DONE]\n\n"
	return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}()

func startBurstWorker(b *testing.B) *burstWorker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	w := &burstWorker{addr: ln.Addr().String(), at: map[int]time.Time{}}
	var served sync.WaitGroup
	var open []net.Conn // closed at the end: the gateway's own client keeps idle ones
	b.Cleanup(func() {
		ln.Close()
		w.mu.Lock()
		for _, c := range open {
			c.Close()
		}
		w.mu.Unlock()
		served.Wait()
	})
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.mu.Lock()
			open = append(open, c)
			w.mu.Unlock()
			served.Add(1)
			go func() { defer served.Done(); w.serve(c) }()
		}
	}()
	return w
}

func (w *burstWorker) arrival(seq int) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at[seq]
}

// serve answers one connection's requests until it closes (or the
// listener does).
func (w *burstWorker) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		if _, err := br.Peek(1); err != nil {
			return
		}
		at := time.Now()
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		if req.URL.Path != "/generate" {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"))
			continue
		}
		seq, ok := firstID(body)
		if !ok {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			continue
		}
		w.mu.Lock()
		w.at[seq] = at
		w.mu.Unlock()
		answer := burstAnswer
		if w.pause > 0 {
			if _, err := c.Write(answer[:burstHead]); err != nil {
				return
			}
			time.Sleep(w.pause)
			answer = answer[burstHead:]
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// firstID is a /generate body's first token id, read without decoding
// the whole body (json.Marshal's spelling, as the client and the
// gateway's direct client write it).
func firstID(body []byte) (int, bool) {
	_, rest, ok := bytes.Cut(body, []byte(`"input_ids":[`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexAny(rest, ",]")
	if end < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:end]))
	return n, err == nil
}
