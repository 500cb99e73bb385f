package main

// Live tests of the shipped proxy configs (deploy/nginx.conf,
// deploy/haproxy.cfg): three `serve` replicas as processes behind the real
// nginx or HAProxy, emulated workers on loopback. They skip, saying how to
// install the proxy, where it is absent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/replay"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

const deployToken = "deploy-test-token"

// findProxy is the proxy's binary, or skips the test.
func findProxy(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	t.Skipf("%s not found: the live test of deploy/ behind %s skips (apt-get install %s)", name, name, name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// replica is one `serve` process.
type replica struct {
	url    string
	cmd    *exec.Cmd
	exited chan error
	stderr *bytes.Buffer
}

// startReplicas runs n kvcache-centric gateways over the same workers.
func startReplicas(t *testing.T, n int) []*replica {
	t.Helper()
	p := emulatortest.Start(t, engine.RolePrefill, false, emulator.Faults{})
	d0 := emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{})
	d1 := emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{})
	emulatortest.WaitHealthy(t, p.URL(), d0.URL(), d1.URL())
	var out []*replica
	for range n {
		c := pdhybrid(t, "serve", "--mechanism", "kvcache-centric", "--prefill", p.URL()+"@"+strconv.Itoa(p.BootstrapPort()),
			"--decode", d0.URL()+","+d1.URL(), "--port", "0", "--drain-timeout", "20")
		c.Env = append(c.Env, adminTokenEnv+"="+deployToken)
		r := &replica{cmd: c, exited: make(chan error, 1), stderr: &bytes.Buffer{}}
		stdout, _ := c.StdoutPipe()
		c.Stderr = r.stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		go func() { io.Copy(io.Discard, stdout); r.exited <- c.Wait() }()
		t.Cleanup(func() {
			c.Process.Kill()
			<-r.exited
		})
		u, ok := strings.CutPrefix(strings.Fields(line + " x")[1], "url=")
		if err != nil || !ok {
			t.Fatalf("serve printed %q (%v)\n%s", line, err, r.stderr)
		}
		r.url = u
		out = append(out, r)
	}
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// shipped reads a file of deploy/ and replaces its example replicas (the
// lines matching server) by the test's and its listening port by port:
// everything else is the file as shipped.
func shipped(t *testing.T, file string, server *regexp.Regexp, listen, newListen string, lines []string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, listen) {
		t.Fatalf("deploy/%s has no %q", file, listen)
	}
	s = strings.Replace(s, listen, newListen, 1)
	first := true
	s = server.ReplaceAllStringFunc(s, func(string) string {
		if !first {
			return ""
		}
		first = false
		return strings.Join(lines, "\n")
	})
	if first {
		t.Fatalf("deploy/%s has no replica lines (%s)", file, server)
	}
	return s
}

// startNginx runs nginx with deploy/nginx.conf in front of reps, in a
// folder of its own, and returns its URL.
func startNginx(t *testing.T, reps []*replica) string {
	bin := findProxy(t, "nginx")
	var lines []string
	for _, r := range reps {
		lines = append(lines, "    server "+strings.TrimPrefix(r.url, "http://")+" max_fails=1 fail_timeout=10s;")
	}
	port := freePort(t)
	conf := shipped(t, "nginx.conf", regexp.MustCompile(`(?m)^\s*server 127\.0\.0\.1:\d+[^;]*;\n?`), "listen 8000;", fmt.Sprintf("listen 127.0.0.1:%d;", port), lines)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pdhybrid.conf"), []byte(conf), 0o644)
	// The main file a distribution ships, reduced to what runs unprivileged
	// in a folder: the shipped file goes in at http level as conf.d would.
	main := `pid nginx.pid;
error_log stderr warn;
events {}
http {
    access_log off;
    client_body_temp_path body; proxy_temp_path proxy; fastcgi_temp_path fastcgi; uwsgi_temp_path uwsgi; scgi_temp_path scgi;
    include pdhybrid.conf;
}
`
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644)
	return runProxy(t, port, bin, "-p", dir, "-e", "stderr", "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off; master_process off;")
}

// startHAProxy runs HAProxy with deploy/haproxy.cfg in front of reps.
func startHAProxy(t *testing.T, reps []*replica) string {
	bin := findProxy(t, "haproxy")
	var lines []string
	for i, r := range reps {
		lines = append(lines, fmt.Sprintf("    server r%d %s", i+1, strings.TrimPrefix(r.url, "http://")))
	}
	port := freePort(t)
	conf := shipped(t, "haproxy.cfg", regexp.MustCompile(`(?m)^\s*server r\d+ 127\.0\.0\.1:\d+\n?`), "bind 127.0.0.1:8000", fmt.Sprintf("bind 127.0.0.1:%d", port), lines)
	p := filepath.Join(t.TempDir(), "haproxy.cfg")
	os.WriteFile(p, []byte(conf+"\n"), 0o644)
	return runProxy(t, port, bin, "-db", "-f", p)
}

// runProxy starts a proxy (stopped at test end) and waits until it routes
// a /health to a replica.
func runProxy(t *testing.T, port int, bin string, args ...string) string {
	t.Helper()
	c := exec.Command(bin, args...)
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stderr, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t.Cleanup(func() {
		c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			c.Process.Kill()
			<-done
		}
	})
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err := http.Get(u + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return u
			}
		}
		select {
		case <-done:
			t.Fatalf("%s exited: %s", filepath.Base(bin), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not route /health within 10 s: %s", filepath.Base(bin), stderr.String())
		}
	}
}

// sessionsOn is each session's turn count on a replica (its /admin/sessions).
func sessionsOn(t *testing.T, r *replica) map[string]int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url+"/admin/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+deployToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Sessions []struct {
			ID    string `json:"session_id"`
			Turns int    `json:"turns"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("%s/admin/sessions: %v", r.url, err)
	}
	out := map[string]int{}
	for _, s := range v.Sessions {
		out[s.ID] = s.Turns
	}
	return out
}

// homes maps each session to the replica index that has seen it, failing
// the test if one was seen by two, or with a turn count other than turns.
func homes(t *testing.T, reps []*replica, alive func(int) bool, turns map[string]int) map[string]int {
	t.Helper()
	home := map[string]int{}
	for i, r := range reps {
		if !alive(i) {
			continue
		}
		for s, n := range sessionsOn(t, r) {
			if j, ok := home[s]; ok {
				t.Errorf("session %s seen by replicas %d and %d: its turns were not kept on one", s, j, i)
			}
			home[s] = i
			if want, ok := turns[s]; ok && n != want {
				t.Errorf("session %s: %d turns on replica %d, want all %d there", s, n, i, want)
			}
		}
	}
	return home
}

// agentTrace is 8 sessions × 4 turns of appends to a growing prompt.
func agentTrace(t *testing.T) (trace.Header, []trace.Request) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if _, se, err := runCLI("trace", "synth", "small-append", "--sessions", "8", "--turns", "4", "--initial", "2048", "--append", "256",
		"--output", "16", "--gap", "0.2", "--stagger", "0.05", "--out", p); err != nil {
		t.Fatalf("synth: %v\n%s", err, se)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, reqs, err := trace.ReadAll(f, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, reqs
}

func replayThrough(t *testing.T, url string, h trace.Header, reqs []trace.Request) map[string]*metrics.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[string]*metrics.Record{}
	cfg := replay.Config{URL: url, BlockSize: h.BlockSize, TimeScale: emulatortest.TimeScale, TimeoutS: 30}
	if err := replay.Run(ctx, cfg, reqs, func(r *metrics.Record) { out[r.SessionID+"/"+strconv.Itoa(r.Turn)] = r }); err != nil {
		t.Fatal(err)
	}
	for k, r := range out {
		if r.Status != metrics.StatusCompleted {
			t.Fatalf("%s through the proxy: %s %s", k, r.Status, r.Error)
		}
	}
	if len(out) != len(reqs) {
		t.Fatalf("%d of %d requests came back", len(out), len(reqs))
	}
	return out
}

// proxyRehash: a multi-turn replay through the proxy keeps every session's
// turns on one replica; after the busiest replica is killed, the last turn
// of its sessions lands on the others, which find each session on its
// decoder by the residency probe and append to its cache.
func proxyRehash(t *testing.T, start func(*testing.T, []*replica) string) {
	reps := startReplicas(t, 3)
	front := start(t, reps)
	h, reqs := agentTrace(t)
	var early, last []trace.Request
	turns := map[string]int{}
	for _, r := range reqs {
		if r.Turn < 4 {
			early = append(early, r)
			turns[r.SessionID] = r.Turn
		} else {
			last = append(last, r)
		}
	}
	replayThrough(t, front, h, early)
	all := func(int) bool { return true }
	home := homes(t, reps, all, turns)
	if len(home) != len(turns) {
		t.Fatalf("%d sessions on the replicas, want %d", len(home), len(turns))
	}
	per := make([]int, len(reps))
	for _, i := range home {
		per[i]++
	}
	victim := 0
	for i := range per {
		if per[i] > per[victim] {
			victim = i
		}
	}
	if per[victim] == len(turns) {
		t.Fatalf("every session hashed to one replica (%v): the test shows no spread", per)
	}
	reps[victim].cmd.Process.Kill()
	<-reps[victim].exited
	reps[victim].exited <- nil // for the cleanup

	recs := replayThrough(t, front, h, last)
	alive := func(i int) bool { return i != victim }
	for s := range turns {
		turns[s]++
	}
	now := map[string]int{}
	for i, r := range reps {
		if alive(i) {
			for s, n := range sessionsOn(t, r) {
				now[s] = i
				want := 4
				if home[s] == victim {
					want = 1 // the turn it re-hashed with
				}
				if n != want {
					t.Errorf("session %s (home %d): %d turns on replica %d, want %d", s, home[s], n, i, want)
				}
			}
		}
	}
	for s, i := range home {
		r := recs[s+"/4"]
		if i != victim {
			if now[s] != i {
				t.Errorf("session %s moved from live replica %d to %d when replica %d died", s, i, now[s], victim)
			}
			continue
		}
		if _, ok := now[s]; !ok {
			t.Errorf("session %s of the dead replica: its last turn is on no live replica", s)
		}
		// The replica that inherits it has never seen it: the residency
		// probe finds its decoder, and the turn appends to its cache.
		if r.ExecutionMode != "kvcache-direct-to-d-session" || r.CachedTokens < r.InputLength/2 {
			t.Errorf("session %s re-hashed: mode %s, %d of %d tokens cached; want a direct append to its cache", s, r.ExecutionMode, r.CachedTokens, r.InputLength)
		}
	}
}

func TestNginxKeepsSessionsOnReplicas(t *testing.T)   { proxyRehash(t, startNginx) }
func TestHAProxyKeepsSessionsOnReplicas(t *testing.T) { proxyRehash(t, startHAProxy) }

// SIGTERM to a replica behind nginx mid-stream: the stream completes, the
// replica is refused new requests which nginx sends on to another replica,
// and the replica exits 0 once its stream is done.
func TestNginxRollingRestartLosesNothing(t *testing.T) {
	reps := startReplicas(t, 3)
	front := startNginx(t, reps)
	post := func(turn, tokens int, stream bool) *http.Response {
		b, _ := json.Marshal(map[string]any{"input_ids": replay.Tokens([]uint64{1, 2, 3, uint64(turn + 10)}, 256, 64), "stream": stream,
			"sampling_params": map[string]any{"max_new_tokens": tokens}})
		req, _ := http.NewRequest(http.MethodPost, front+"/generate", bytes.NewReader(b))
		req.Header.Set("X-Claude-Code-Session-Id", "rolling")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r1 := post(1, 4, false)
	io.Copy(io.Discard, r1.Body)
	r1.Body.Close()
	home := homes(t, reps, func(int) bool { return true }, nil)["rolling"]
	stream := post(2, 1500, true)
	defer stream.Body.Close()
	sr := bufio.NewReader(stream.Body)
	if _, err := sr.ReadString('\n'); err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("turn 2's stream: %d %v", stream.StatusCode, err)
	}
	reps[home].cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h, err := http.Get(reps[home].url + "/health")
		if err != nil {
			t.Fatalf("the draining replica's /health: %v", err)
		}
		h.Body.Close()
		if h.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica was still ready 5 s after SIGTERM")
		}
	}
	r3 := post(3, 4, false)
	b, _ := io.ReadAll(r3.Body)
	r3.Body.Close()
	if r3.StatusCode != http.StatusOK {
		t.Fatalf("turn 3, sent while the session's replica drained: %d %s, want nginx to hand it to another replica", r3.StatusCode, b)
	}
	rest, _ := io.ReadAll(sr)
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream through nginx was cut by the replica's SIGTERM: ...%s", rest[max(0, len(rest)-200):])
	}
	select {
	case err := <-reps[home].exited:
		reps[home].exited <- nil
		if err != nil {
			t.Fatalf("the drained replica exited with %v, want 0:\n%s", err, reps[home].stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replica did not exit once its stream ended")
	}
	took := -1
	for i, r := range reps {
		if i != home && sessionsOn(t, r)["rolling"] == 1 {
			took = i
		}
	}
	if took < 0 {
		t.Fatal("no other replica took turn 3")
	}
}
