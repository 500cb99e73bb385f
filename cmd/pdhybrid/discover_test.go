package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/dnstest"
	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// serve --discover's bad values are usage errors naming the flag.
func TestServeDiscoverFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mechanism", "pd-colo", "--discover", "decode=dns://x:1"}, "--discover decode=dns://x:1: --mechanism pd-colo has no decode pool"},
		{[]string{"--mechanism", "pd-colo", "--discover", "colo=http://x:1"}, "--discover \"colo=http://x:1\": want dns+srv://"},
		{[]string{"--colo", "http://127.0.0.1:1", "--mechanism", "pd-colo", "--discover-interval", "2"}, "--discover-interval 2: applies only with --discover"},
		{[]string{"--mechanism", "pd-colo", "--discover", "colo=dns://x:1", "--discover-interval", "0"}, "--discover-interval 0: want"},
		{[]string{"--mechanism", "pd-colo", "--discover", "colo=dns://x:1", "--dns-server", "nowhere"}, "--dns-server nowhere: want HOST:PORT"},
	} {
		_, se, err := runCLI(append([]string{"serve", "--port", "0"}, c.args...)...)
		if err == nil || !strings.Contains(se, c.want) {
			t.Errorf("serve %v: %v\n%s\nwant an error with %q", c.args, err, se, c.want)
		}
	}
}

// serve --discover with no worker on the command line waits until DNS
// names one, serves with it, and adds the next one DNS names.
func TestServeDiscoversWorkers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine's loopback: %v", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	c0 := emulatortest.StartAt(t, "127.0.0.2:"+port, engine.RoleColocated, false, emulator.Faults{})
	c1 := emulatortest.StartAt(t, "127.0.0.3:"+port, engine.RoleColocated, false, emulator.Faults{})
	dns := dnstest.Start(t)
	c := pdhybrid(t, "serve", "--mechanism", "pd-colo", "--discover", "colo=dns://colo.pdh.test.:"+port, "--dns-server", dns.Addr(),
		"--discover-interval", "0.02", "--port", "0", "--admin-token", deployToken)
	out, _ := c.StdoutPipe()
	errp, _ := c.StderrPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	stderr := bufio.NewReader(errp)
	if l, err := stderr.ReadString('\n'); err != nil || !strings.Contains(l, "waiting for colo workers to be discovered") {
		t.Fatalf("serve with nothing in DNS printed %q (%v), want it waiting", l, err)
	}
	go func() {
		for {
			if _, err := stderr.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	dns.SetHost("colo.pdh.test.", "127.0.0.2")
	line, err := bufio.NewReader(out).ReadString('\n')
	gw, ok := strings.CutPrefix(strings.Fields(line + " x")[1], "url=")
	if err != nil || !ok {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	b, _ := json.Marshal(map[string]any{"input_ids": []int{1, 2, 3}, "sampling_params": map[string]any{"max_new_tokens": 2}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(b))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-PDHybrid-Worker") != c0.URL() {
		t.Fatalf("a request to the discovered pool: %v %v, want it answered by %s", resp, err, c0.URL())
	}
	resp.Body.Close()
	dns.SetHost("colo.pdh.test.", "127.0.0.2", "127.0.0.3")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, gw+"/admin/workers", nil)
		req.Header.Set("Authorization", "Bearer "+deployToken)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Workers []struct{ URL, State string }
		}
		json.NewDecoder(r.Body).Decode(&v)
		r.Body.Close()
		if len(v.Workers) == 2 && v.Workers[1].URL == c1.URL() && v.Workers[1].State == "active" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %+v, want %s added", v.Workers, c1.URL())
		}
	}
}
