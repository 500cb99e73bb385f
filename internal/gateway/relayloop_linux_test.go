package gateway

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// registered counts the client sockets registered with the relay loops,
// and the streams on them.
func registered() (clients, streams int) {
	for _, l := range loops {
		l.mu.Lock()
		clients += len(l.clients)
		streams += len(l.streams)
		l.mu.Unlock()
	}
	return clients, streams
}

// settles waits (a bounded time) until registered answers want.
func settles(t *testing.T, what string, clients, streams int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, s := registered()
		if c == clients && s == streams {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d client sockets and %d streams on the loops, want %d and %d", what, c, s, clients, streams)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A keep-alive client connection's socket is registered with a relay loop
// once, at its first stream on the loop, and kept for its next ones (one
// registration, one duplicate for all: before, each stream added and
// removed both sockets); it goes when the connection closes — after a
// clean end, and when the client leaves mid-stream.
func TestDirectRelayKeepsTheClientRegistered(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	a, b := sglEvent("a", "null"), sglEvent("b", `{"type": "length", "length": 2}`)
	want := a + b + "data: [DONE]\n\n"
	gw, _ := directGateway(t, scriptedWorker(t, 20*time.Millisecond, head+chunk(a), chunk(b)+chunk("data: [DONE]\n\n")+"0\r\n\r\n"))
	addr := strings.TrimPrefix(gw, "http://")
	loopsAvailable()
	clients0, streams0 := registered()
	request := func(c net.Conn, br *bufio.Reader) string {
		t.Helper()
		body := `{"text": "hi", "stream": true}`
		fmt.Fprintf(c, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		status, got, err := readRawChunked(br)
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
			t.Fatalf("%q %v", status, err)
		}
		return string(got)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	taken := directTaken.Load()
	for i := range 3 {
		if got := request(c, br); got != want {
			t.Fatalf("stream %d: %q, want %q", i, got, want)
		}
		settles(t, fmt.Sprintf("after stream %d", i), clients0+1, streams0)
	}
	if n := directTaken.Load() - taken; n != 3 {
		t.Fatalf("the direct relay took %d of 3 streams", n)
	}
	c.Close()
	settles(t, "after the client closed", clients0, streams0)

	// A client that leaves while its stream is on the loop.
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"text": "hi", "stream": true}`
	fmt.Fprintf(c, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br = bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {") {
			break // the first event: the stream is on the loop
		}
	}
	c.Close()
	settles(t, "after the client left mid-stream", clients0, streams0)
}
