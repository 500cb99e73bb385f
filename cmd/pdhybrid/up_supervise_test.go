package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a stderr sink the test reads while up writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// up supervises: kill -9 of a decoder and of a gateway replica is logged,
// both are restarted on their ports, up keeps running, and once they are
// back every request is served again.
func TestUpRestartsDeadChildren(t *testing.T) {
	c := pdhybrid(t, "up", "--mechanism", "kvcache-centric", "--prefill", "1", "--decode", "2", "--gateways", "2", "--port", "0", "--time-scale", "20")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	c.Stderr = stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		c.Process.Kill()
		<-exited
	})
	type proc struct{ name, url string }
	pids := map[int]proc{}
	entry := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var decoders, gateways int
		for sc.Scan() {
			l := sc.Text()
			kv := map[string]string{}
			for _, f := range strings.Fields(l) {
				if k, v, ok := strings.Cut(f, "="); ok {
					kv[k] = v
				}
			}
			pid, _ := strconv.Atoi(kv["pid"])
			switch {
			case strings.HasPrefix(l, "worker ") && kv["role"] == "decode":
				pids[pid] = proc{"decode-" + strconv.Itoa(decoders), kv["url"]}
				decoders++
			case strings.HasPrefix(l, "gateway "):
				pids[pid] = proc{"gateway-" + strconv.Itoa(gateways), kv["url"]}
				gateways++
			case strings.HasPrefix(l, "listening "):
				entry <- kv["url"]
			}
		}
		io.Copy(io.Discard, out)
		exited <- c.Wait()
	}()
	var gw string
	select {
	case gw = <-entry:
	case err := <-exited:
		exited <- err
		t.Fatalf("up exited: %v\n%s", err, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("up did not listen")
	}
	ask := func(i int) int {
		b, _ := json.Marshal(map[string]any{"input_ids": []int{i, i + 1, i + 2, 7, 8, 9}, "sampling_params": map[string]any{"max_new_tokens": 3}})
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(gw+"/generate", "application/json", bytes.NewReader(b))
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 4 {
		if s := ask(i * 10); s != http.StatusOK {
			t.Fatalf("before the kills, request %d: %d", i, s)
		}
	}
	var killed []string
	for pid, p := range pids {
		if p.name == "decode-0" || p.name == "gateway-0" {
			syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, p.name)
		}
	}
	if len(killed) != 2 {
		t.Fatalf("found %v to kill in %v", killed, pids)
	}
	for _, name := range killed {
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "[up] "+name+" restarted"); {
			if time.Now().After(deadline) {
				t.Fatalf("%s was not restarted:\n%s", name, stderr.String())
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("up exited after a child died: %v\n%s", err, stderr.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// Back in service: the gateways' health checks see the decoder again
	// within a few seconds; every request is then served.
	ok := 0
	for i := 0; ok < 8 && i < 200; i++ {
		if ask(1000+i*10) == http.StatusOK {
			ok++
		} else {
			ok = 0
			time.Sleep(100 * time.Millisecond)
		}
	}
	if ok < 8 {
		t.Fatalf("requests still failing after the restarts:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "[up] decode-0 exited") {
		t.Errorf("the decoder's death was not logged:\n%s", stderr.String())
	}
}
