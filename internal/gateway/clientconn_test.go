package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptedWorker answers every /generate with the same pieces of raw
// HTTP, one write each, pause apart (a piece "<close>" closes the
// connection); anything else gets a 404.
func scriptedWorker(t *testing.T, pause time.Duration, pieces ...string) string {
	t.Helper()
	return generateWorker(t, func(c net.Conn) bool {
		for i, p := range pieces {
			if i > 0 {
				time.Sleep(pause)
			}
			if p == "<close>" {
				return false
			}
			io.WriteString(c, p)
		}
		return true
	})
}

// generateWorker is a stand-in worker on loopback that writes its own raw
// HTTP: on every connection it reads requests one after another, answers
// all but /generate with a 404 (the gateway's probes), and hands each
// /generate's connection to answer, which writes the answer and says
// whether to keep the connection for the next request. It returns the
// worker's URL; the listener closes with the test.
func generateWorker(t *testing.T, answer func(c net.Conn) (keep bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if req.URL.Path != "/generate" {
						io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					if !answer(c) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// readRawChunked reads one answer off br as it came on the wire: its
// status line, and its body's chunks to the chunked end; a stray byte
// before the status line (a second chunked end) is an error.
func readRawChunked(br *bufio.Reader) (status string, body []byte, err error) {
	status, err = br.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 ") {
		return status, nil, fmt.Errorf("answer begins %q, not a status line", status)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return status, nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return status, body, err
		}
		size, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			return status, body, fmt.Errorf("chunk size %q", line)
		}
		if size == 0 {
			if end, err := br.ReadString('\n'); err != nil || end != "\r\n" {
				return status, body, fmt.Errorf("chunked end %q, %v", end, err)
			}
			return status, body, nil
		}
		chunk := make([]byte, size+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return status, body, err
		}
		body = append(body, chunk[:size]...)
	}
}

// The direct relay writes a stream's chunked end with its terminal event,
// and net/http's own end is dropped (clientconn.go): a stream whole in
// hand at its head goes to the client in one write, a stream the worker
// sends in k writes in at most k (before: one more, net/http's end). On
// the wire each answer has exactly one chunked end — the next answer on
// the kept-alive connection begins right after it — and every event once.
func TestDirectRelayEndsWithTheLastEvent(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	a, b := sglEvent("a", "null"), sglEvent("b", `{"type": "length", "length": 2}`)
	done := "data: [DONE]\n\n"
	want := a + b + done
	for _, tc := range []struct {
		name   string
		pieces []string
	}{
		{"whole in one write", []string{head + chunk(a) + chunk(b) + chunk(done) + "0\r\n\r\n"}},
		{"head alone, then events", []string{head, chunk(a), chunk(b) + chunk(done) + "0\r\n\r\n"}},
		{"the worker's end on its own", []string{head + chunk(a), chunk(b) + chunk(done), "0\r\n\r\n"}},
		{"an error frame", []string{head + chunk(a), "5\r\nbroken", "<close>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, _ := directGateway(t, scriptedWorker(t, 20*time.Millisecond, tc.pieces...))
			c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			loopsAvailable() // started before relayWrites reads them
			taken := directTaken.Load()
			const n = 3
			var writes int64
			for i := range n {
				body := `{"text": "hi", "stream": true}`
				before := clientWrites.Load() + relayWrites()
				fmt.Fprintf(c, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				status, got, err := readRawChunked(br)
				if err != nil {
					t.Fatalf("request %d: %v (status %q, body %q)", i, err, status, got)
				}
				writes += clientWrites.Load() + relayWrites() - before
				if !strings.HasPrefix(status, "HTTP/1.1 200") {
					t.Fatalf("request %d: %q", i, status)
				}
				if tc.name == "an error frame" {
					if !bytes.HasPrefix(got, []byte(a)) || bytes.Count(got, []byte("data: ")) != 2 || !bytes.Contains(got, []byte(`"error"`)) {
						t.Fatalf("request %d: %q, want the first event and one error frame", i, got)
					}
				} else if string(got) != want {
					t.Fatalf("request %d: %q\nwant %q", i, got, want)
				}
			}
			if k := directTaken.Load() - taken; k != n {
				t.Errorf("the direct relay took %d of %d streams", k, n)
			}
			// Every write is counted before it is made, so the count is
			// whole once the client has read the answer.
			k := len(tc.pieces)
			if tc.pieces[k-1] == "<close>" {
				k--
			}
			if max := int64(n * k); writes > max {
				t.Errorf("%d writes to the client for %d streams the worker sent in %d writes each, want at most %d", writes, n, k, max)
			}
		})
	}
}
