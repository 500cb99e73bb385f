package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// serve's usage errors name what is wrong before anything listens.
func TestServeUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--mechanism", "pd-colo"}, "needs at least one colocated worker"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1@99999", "--decode", "http://127.0.0.1:2"}, "--prefill"},
		{[]string{"serve", "--mechanism", "pd-colo", "--colo", "http://127.0.0.1:3", "--direct-max-uncached-tokens", "100"}, "--direct-max-uncached-tokens"},
		{[]string{"serve", "--mechanism", "nope"}, "--mechanism"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--backpressure=false", "--backpressure-max-pause-ms", "100"}, "--backpressure-max-pause-ms"},
		{[]string{"serve", "--mechanism", "pd-disaggregation", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--backpressure=false"}, "--backpressure"},
		{[]string{"serve", "--mechanism", "pd-disaggregation", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--home-holds"}, "--home-holds"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--d-to-p-sync", "on-evict"}, "--d-to-p-sync"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--d-to-p-sync", "passive", "--d-to-p-delta-tokens", "512"}, "--d-to-p-delta-tokens"},
		{[]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--d-to-p-sync", "active", "--d-to-p-delta-tokens", "0"}, "--d-to-p-delta-tokens"},
		{[]string{"serve", "--mechanism", "pd-disaggregation", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--d-to-p-sync", "active"}, "--d-to-p-sync"},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args, exitCode(err), first, c.want)
		}
	}
}

// serve --config: a YAML file of flag settings, held to the flags' own
// rules; errors name the file, line and key; the command line wins.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `# a KVC gateway over one P and two D
mechanism: kvcache-centric
prefill:
  - http://127.0.0.1:1@8998
decode: [http://127.0.0.1:2, http://127.0.0.1:3]
block_size: 32
direct-max-uncached-tokens: 4096
port: 99999
`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", write("unknown.yaml", "mechanism: pd-colo\nblock-sise: 64\n")}, "unknown.yaml:2: block-sise: not a flag of pdhybrid serve (did you mean block-size?)"},
		{[]string{"serve", "--config", write("range.yaml", "decode: [http://127.0.0.1:2]\nprefill: [http://127.0.0.1:1]\nblock-size: 0\n")}, "range.yaml:3: --block-size 0: want"},
		{[]string{"serve", "--config", write("type.yaml", "\n\nport: eighty\n")}, "type.yaml:3: port:"},
		{[]string{"serve", "--config", write("nested.yaml", "decode:\n  url: x\n")}, "nested.yaml:1: decode: want a value or a list of values, not a mapping"},
		{[]string{"serve", "--config", write("list.yaml", "- a\n- b\n")}, "list.yaml:1: want a mapping"},
		{[]string{"serve", "--config", write("broken.yaml", "a: [1, 2\n")}, "broken.yaml"},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yaml")}, "--config"},
		// The file's port is out of range; the command line's wins and the
		// file's mechanism and workers are taken: the next error is about
		// the policy given on the command line.
		{[]string{"serve", "--config", good, "--port", "0", "--policy", "nope"}, "--policy"},
		{[]string{"serve", "--config", good}, "--port"},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args[2:], exitCode(err), first, c.want)
		}
	}
}

// A good file configures the gateway: it listens with the file's mechanism
// (not the default) on the file's free port.
func TestServeConfigFileTakesEffect(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gw.yaml")
	os.WriteFile(p, []byte("mechanism: pd-disaggregation\nprefill: [http://127.0.0.1:1@8998]\ndecode: [http://127.0.0.1:2]\nport: 0\n"), 0o644)
	c := pdhybrid(t, "serve", "--config", p)
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening url=http://127.0.0.1:") || !strings.Contains(line, "mechanism=pd-disaggregation") {
		t.Fatalf("serve --config printed %q (%v)", line, err)
	}
}

// SIGTERM drains: a stream in flight completes (to its [DONE]), /health
// answers 503 meanwhile while /livez stays 200, a new request is refused
// with a retryable 503, and serve exits 0 once the stream is done.
func TestServeDrainsStreamsOnSIGTERM(t *testing.T) {
	w := emulatortest.Start(t, engine.RoleColocated, false, emulator.Faults{})
	c := pdhybrid(t, "serve", "--mechanism", "pd-colo", "--colo", w.URL(), "--port", "0", "--drain-timeout", "20")
	out, _ := c.StdoutPipe()
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	defer c.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	gw, ok := strings.CutPrefix(strings.Fields(line + " x")[1], "url=")
	if err != nil || !ok {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	body, _ := json.Marshal(map[string]any{"input_ids": []int{1, 2, 3, 4, 5, 6, 7, 8}, "stream": true, "sampling_params": map[string]any{"max_new_tokens": 3000}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c.Process.Signal(syscall.SIGTERM)
	health := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && health != http.StatusServiceUnavailable; time.Sleep(10 * time.Millisecond) {
		h, err := http.Get(gw + "/health")
		if err != nil {
			t.Fatalf("/health while draining: %v (the listener must stay open)", err)
		}
		health = h.StatusCode
		h.Body.Close()
	}
	if health != http.StatusServiceUnavailable {
		t.Fatalf("/health answered %d after SIGTERM, want 503", health)
	}
	if l, err := http.Get(gw + "/livez"); err != nil || l.StatusCode != http.StatusOK {
		t.Fatalf("/livez while draining: %v %v, want 200", l, err)
	}
	short, _ := json.Marshal(map[string]any{"input_ids": []int{1, 2, 3}, "sampling_params": map[string]any{"max_new_tokens": 2}})
	nr, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(short))
	if err != nil {
		t.Fatalf("a new request while draining: %v", err)
	}
	io.Copy(io.Discard, nr.Body)
	nr.Body.Close()
	if nr.StatusCode != http.StatusServiceUnavailable || nr.Header.Get("Retry-After") == "" {
		t.Fatalf("a new request while draining got %d (Retry-After %q), want 503 with Retry-After", nr.StatusCode, nr.Header.Get("Retry-After"))
	}
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream in flight was cut by SIGTERM:\n%s\n%s", lastLine(string(rest)), stderr.String())
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after draining, want status 0\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after draining")
	}
}

// The gateway takes KVC v3's options but not the simulator-only ones, and
// only with the KVC mechanism.
func TestServeKVCv3Flags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--inline-admission"}, "unknown flag: --inline-admission"},
		{[]string{"--count-transfer"}, "unknown flag: --count-transfer"},
		{[]string{"--mechanism", "pd-colo", "--colo", "http://127.0.0.1:1", "--kvc-preset", "v3"}, "--kvc-preset"},
		{[]string{"--kvc-preset", "v9"}, "--kvc-preset"},
		{[]string{"--kvc-preset", "v2", "--p-hosts-sessions"}, "--p-hosts-sessions"}, // without --whole-on-p
		{[]string{"--whole-on-p=false", "--p-hosts-sessions"}, "--p-hosts-sessions"},
		{[]string{"--tpot-slo-ms", "-1"}, "--tpot-slo-ms"},
		{[]string{"--kvc-preset", "v2", "--tpot-slo-ms", "12"}, "--tpot-slo-ms"},                    // v2 has no stall budget in tokens
		{[]string{"--isolation-ttft-slo-ms", "2000"}, "--isolation-ttft-slo-ms"},                    // v3: no --tpot-slo-ms
		{[]string{"--kvc-preset", "v4", "--isolation-max-p-wait", "1e6"}, "--isolation-max-p-wait"}, // over a day
		{[]string{"--kvc-preset", "v4", "--profile-model", "no-such-model"}, "no-such-model"},
		{[]string{"--kvc-preset", "v4", "--link", "no-such-link"}, "--link"},
		{[]string{"--kvc-preset", "v4", "--chunk-tokens", "-5"}, "--chunk-tokens"},
		{[]string{"--profile", "p.json", "--hardware", "h100-80g"}, "--hardware"},
		{[]string{"--mechanism", "pd-disaggregation", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", "--hardware", "h100-80g"}, "--hardware"},
	} {
		args := append([]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2"}, tc.args...)
		if tc.args[0] == "--mechanism" {
			args = append([]string{"serve"}, tc.args...)
		}
		_, se, err := runCLI(args...)
		if err == nil || !strings.Contains(se, tc.want) {
			t.Errorf("%v: err %v, stderr %q; want an error naming %s", tc.args, err, se, tc.want)
		}
	}
}

// --d-to-p-sync and --d-to-p-delta-tokens reach the gateway (the seed's
// D→P flag was parsed and dropped on its way, seed-inventory F24): a
// session's direct append that grew it by more than the delta is synced
// from its decoder to the prefill worker, and /metrics counts the sync ok.
// It runs under --kvc-preset v2, whose turns all go through P and the
// decoder, so the session is the decoder's (v3 may host it on P whole).
func TestServeDToPSync(t *testing.T) {
	p := emulatortest.Start(t, engine.RolePrefill, false, emulator.Faults{})
	d := emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{})
	emulatortest.WaitHealthy(t, p.URL(), d.URL())
	url, _ := startServe(t, "serve", "--prefill", fmt.Sprintf("%s@%d", p.URL(), p.BootstrapPort()), "--decode", d.URL(), "--port", "0",
		"--load-poll-interval", "0", "--d-to-p-sync", "active", "--d-to-p-delta-tokens", "500", "--kvc-preset", "v2")
	prompt := make([]int, 1000)
	for i := range prompt {
		prompt[i] = 100 + i
	}
	for turn := 1; turn <= 2; turn++ {
		if turn == 2 {
			for i := range 600 {
				prompt = append(prompt, 5000+i)
			}
		}
		j, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 4}})
		resp, err := http.Post(url+"/generate", "application/json", bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d", turn, resp.StatusCode)
		}
	}
	waitMetric(t, url, `pdhybrid_dp_syncs_total{outcome="ok: finalize"} 1`, "pdhybrid_dp_syncs_total")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// serve runs the peer baselines on the workers people run: pd-conditional
// on a stock prefill worker and a decoder with conditional aggregation and
// the decode radix cache seeds turn 1 through P and prefills turn 2 on the
// decoder (do_local_prefill), which finds turn 1 in its radix cache.
func TestServePeerMechanism(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
		emulatortest.Stock(c)
		c.ConditionalAgg, c.DecodeRadix = true, true
	})
	emulatortest.WaitHealthy(t, p.URL(), d.URL())
	gw, line := startServe(t, "serve", "--mechanism", "pd-conditional", "--prefill", fmt.Sprintf("%s@%d", p.URL(), p.BootstrapPort()),
		"--decode", d.URL(), "--port", "0")
	if !strings.Contains(line, "mechanism=pd-conditional") {
		t.Fatalf("serve printed %q", line)
	}
	prompt := make([]int, 1500)
	for i := range prompt {
		prompt[i] = 7000 + i
	}
	for turn, want := range []string{"pd-conditional-disagg-router", "pd-conditional-local-prefill-on-d"} {
		body, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 8}})
		resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			OutputIDs []int `json:"output_ids"`
			MetaInfo  struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"meta_info"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if mode := resp.Header.Get("X-PDHybrid-Mode"); err != nil || resp.StatusCode != http.StatusOK || mode != want || len(a.OutputIDs) != 8 {
			t.Fatalf("turn %d: %d in mode %q (%v), want 200 in %s", turn+1, resp.StatusCode, mode, err, want)
		}
		if turn == 1 && a.MetaInfo.CachedTokens < 1472 {
			t.Fatalf("turn 2: %d tokens cached on the decoder, want at least 1472", a.MetaInfo.CachedTokens)
		}
		prompt = append(append(prompt, a.OutputIDs...), 90000, 90001, 90002, 90003)
	}
}

// startServe starts `pdhybrid args...` (a serve command on port 0), stops
// it when the test ends, and returns the URL and the whole of the line it
// printed first ("listening url=…").
func startServe(t *testing.T, args ...string) (url, line string) {
	t.Helper()
	c := pdhybrid(t, args...)
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.Fields(line + " x")[1], "url=")
	if err != nil || !ok {
		t.Fatalf("serve printed %q (%v)", line, err)
	}
	return url, line
}
