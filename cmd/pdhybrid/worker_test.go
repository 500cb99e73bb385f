package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// worker is a pdhybrid worker process and what it printed when it listened.
type worker struct {
	cmd    *exec.Cmd
	url    string
	boot   string // prefill: bootstrap port
	stderr *bytes.Buffer
	exited chan error
}

// startWorker runs pdhybrid worker on free loopback ports and waits for its
// "listening" line; the process is killed when the test ends.
func startWorker(t *testing.T, args ...string) *worker {
	t.Helper()
	c := pdhybrid(t, append([]string{"worker", "--port", "0"}, args...)...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: c, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	c.Stderr = w.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		<-w.exited
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, out)
		w.exited <- c.Wait()
	}()
	select {
	case l := <-line:
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "url="); ok {
				w.url = v
			}
			if v, ok := strings.CutPrefix(f, "bootstrap_port="); ok {
				w.boot = v
			}
		}
		if !strings.HasPrefix(l, "listening ") || w.url == "" {
			t.Fatalf("worker printed %q", l)
		}
	case err := <-w.exited:
		w.exited <- err // for the cleanup, which waits for it
		t.Fatalf("worker exited: %v\n%s", err, w.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not listen")
	}
	return w
}

func postJSON(t *testing.T, url, body string) (int, string, error) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestWorkerServesAndStops: a colocated worker process answers /generate
// and /health, and SIGINT stops it with status 130.
func TestWorkerServesAndStops(t *testing.T) {
	w := startWorker(t, "--time-scale", "100")
	st, body, err := postJSON(t, w.url+"/generate", `{"text":"hello emulated world","rid":"x","sampling_params":{"max_new_tokens":3}}`)
	if err != nil || st != 200 || !strings.Contains(body, `"completion_tokens":3`) {
		t.Fatalf("generate: %v %d %s", err, st, body)
	}
	resp, err := http.Get(w.url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", err, resp)
	}
	resp.Body.Close()
	w.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-w.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Fatalf("after SIGINT: %v\n%s", err, w.stderr)
		}
		w.exited <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not stop the worker")
	}
}

// TestWorkerPDProcesses: a prefill and a decode worker process pair up by
// bootstrap room over loopback.
func TestWorkerPDProcesses(t *testing.T) {
	p := startWorker(t, "--role", "prefill", "--bootstrap-port", "0", "--time-scale", "20")
	d := startWorker(t, "--role", "decode", "--time-scale", "20")
	if p.boot == "" {
		t.Fatal("no bootstrap port printed")
	}
	body := `{"input_ids":[1,2,3,4,5,6,7,8,9,10],"rid":"pd","sampling_params":{"max_new_tokens":4},"bootstrap_host":"127.0.0.1","bootstrap_port":` + p.boot + `,"bootstrap_room":12}`
	type ans struct {
		st   int
		body string
		err  error
	}
	pc := make(chan ans, 1)
	go func() { st, b, err := postJSON(t, p.url+"/generate", body); pc <- ans{st, b, err} }()
	st, b, err := postJSON(t, d.url+"/generate", body)
	pa := <-pc
	if err != nil || st != 200 || pa.err != nil || pa.st != 200 {
		t.Fatalf("decode %v %d %s; prefill %v %d %s", err, st, b, pa.err, pa.st, pa.body)
	}
	var dOut, pOut struct {
		OutputIDs []int `json:"output_ids"`
	}
	json.Unmarshal([]byte(b), &dOut)
	json.Unmarshal([]byte(pa.body), &pOut)
	if len(dOut.OutputIDs) != 4 || len(pOut.OutputIDs) != 1 || dOut.OutputIDs[0] != pOut.OutputIDs[0] {
		t.Fatalf("decode %v, prefill %v", dOut.OutputIDs, pOut.OutputIDs)
	}
	// A raw /generate to the decoder fails as SGLang's does.
	st, b, _ = postJSON(t, d.url+"/generate", `{"text":"raw","rid":"r"}`)
	if st != 400 || !strings.Contains(b, "without bootstrap room id") {
		t.Fatalf("raw to decode: %d %s", st, b)
	}
}

// TestWorkerCrashAfter: --fault-crash-after N serves N requests and the
// process exits (status 1) at the next.
func TestWorkerCrashAfter(t *testing.T) {
	w := startWorker(t, "--time-scale", "100", "--fault-crash-after", "1")
	if st, b, err := postJSON(t, w.url+"/generate", `{"input_ids":[1,2,3]}`); err != nil || st != 200 {
		t.Fatalf("first: %v %d %s", err, st, b)
	}
	if _, _, err := postJSON(t, w.url+"/generate", `{"input_ids":[1,2,3]}`); err == nil {
		t.Fatal("the crashing request got an answer")
	}
	select {
	case err := <-w.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitError || !strings.Contains(w.stderr.String(), "crashing at /generate request 2") {
			t.Fatalf("exit %v, stderr %s", err, w.stderr)
		}
		w.exited <- err
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not exit")
	}
}

// TestWorkerPortTaken: a taken port is an error naming the address.
func TestWorkerPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	_, stderr, err := runCLI("worker", "--port", port)
	if exitCode(err) != exitError || !strings.Contains(stderr, "listen on 127.0.0.1:"+port) || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d: %s", exitCode(err), stderr)
	}
}

// The decoder's backpressure flags reach its admission replies: with a
// session's KV held, a high water of 0.001 makes the next admission carry
// a pause; --backpressure=false never does.
func TestWorkerBackpressureFlags(t *testing.T) {
	prompt, _ := json.Marshal(func() []int {
		ids := make([]int, 3000)
		for i := range ids {
			ids[i] = i + 1
		}
		return ids
	}())
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--backpressure-high-water", "0.001"}, 10},
		{nil, 0},
		{[]string{"--backpressure=false"}, 0},
	} {
		d := startWorker(t, append([]string{"--role", "decode", "--session-cache", "--time-scale", "20"}, tc.args...)...)
		// A direct turn of session S, served whole on the decoder, which keeps it.
		if st, b, err := postJSON(t, d.url+"/generate", `{"input_ids":`+string(prompt)+`,"rid":"a","session_id":"S","sampling_params":{"max_new_tokens":2}}`); err != nil || st != 200 {
			t.Fatalf("%v: session turn: %v %d %s", tc.args, err, st, b)
		}
		st, b, err := postJSON(t, d.url+"/session_cache/admit_direct_append", `{"session_id":"T","input_ids":[5,6,7],"max_new_tokens":2}`)
		var a struct {
			CanAdmit bool `json:"can_admit"`
			PauseMs  int  `json:"recommended_pause_ms"`
		}
		if err != nil || st != 200 || json.Unmarshal([]byte(b), &a) != nil || !a.CanAdmit || a.PauseMs != tc.want {
			t.Fatalf("%v: admission %v %d %s; want admitted with a pause of %d ms", tc.args, err, st, b, tc.want)
		}
	}
}

// TestWorkerTPOTSLOFlag: --tpot-slo-ms out of [0, 1000000] is a usage
// error naming the flag and its range; a worker started with it reports
// it in /server_info (its effect on the schedule: the emulator's
// TestDecodeSlicingHoldsTPOT).
func TestWorkerTPOTSLOFlag(t *testing.T) {
	for _, v := range []string{"-1", "1e7", "NaN"} {
		_, stderr, err := runCLI("worker", "--tpot-slo-ms", v)
		if err == nil || !strings.Contains(stderr, "--tpot-slo-ms") || !strings.Contains(stderr, "[0, 1000000]") {
			t.Errorf("--tpot-slo-ms %s: %v\n%s", v, err, stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want float64
	}{{nil, 0}, {[]string{"--tpot-slo-ms", "12"}, 12}} {
		w := startWorker(t, append([]string{"--role", "decode", "--time-scale", "20"}, c.args...)...)
		resp, err := http.Get(w.url + "/server_info")
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Ext struct {
				TPOT float64 `json:"tpot_slo_ms"`
			} `json:"pdhybrid"`
		}
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if err != nil || info.Ext.TPOT != c.want {
			t.Errorf("%v: /server_info tpot_slo_ms %v (%v), want %v", c.args, info.Ext.TPOT, err, c.want)
		}
	}
}

// A decoder with SGLang's decode radix cache keeps a prefix cache, so it
// takes a host KV tier (the simulator's "PD + decode radix + HiCache"
// baseline, live): the worker starts with both and /server_info reports
// the tier; a plain PD decoder is still refused the flag (cli_test.go).
func TestWorkerDecodeRadixHiCache(t *testing.T) {
	w := startWorker(t, "--role", "decode", "--time-scale", "20", "--disaggregation-decode-enable-radix-cache", "--enable-hierarchical-cache")
	resp, err := http.Get(w.url + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		HiCache bool `json:"enable_hierarchical_cache"`
		Radix   bool `json:"disaggregation_decode_enable_radix_cache"`
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || !info.HiCache || !info.Radix {
		t.Fatalf("/server_info: enable_hierarchical_cache %v, disaggregation_decode_enable_radix_cache %v (%v), want both true", info.HiCache, info.Radix, err)
	}
}

// TestWorkerPrefillBypassFlags: a prefill worker takes --prefill-bypass-tokens
// (KVC v4's prefill bypass) as a session-aware decoder does; a plain
// decoder does not, and --prefill-bypass-ahead wants a prefill worker with
// a bypass and shortest-first admission, each refusal naming the flag.
func TestWorkerPrefillBypassFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--role", "decode", "--prefill-bypass-tokens", "512"}, "--prefill-bypass-tokens"},
		{[]string{"--role", "prefill", "--prefill-bypass-ahead", "--prefill-order", "shortest"}, "--prefill-bypass-ahead"},
		{[]string{"--role", "prefill", "--prefill-bypass-tokens", "2048", "--prefill-bypass-ahead"}, "--prefill-bypass-ahead"},
		{[]string{"--role", "decode", "--session-cache", "--prefill-bypass-tokens", "512", "--prefill-bypass-ahead", "--prefill-order", "shortest"}, "--prefill-bypass-ahead"},
	} {
		_, stderr, err := runCLI(append([]string{"worker"}, c.args...)...)
		if err == nil || !strings.Contains(stderr, c.flag) {
			t.Errorf("%v: %v, want a usage error naming %s\n%s", c.args, err, c.flag, stderr)
		}
	}
	w := startWorker(t, "--role", "prefill", "--time-scale", "20", "--prefill-bypass-tokens", "2048", "--prefill-bypass-ahead", "--prefill-order", "shortest")
	resp, err := http.Get(w.url + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Ext struct {
			Bypass int  `json:"prefill_bypass_tokens"`
			Ahead  bool `json:"prefill_bypass_ahead"`
		} `json:"pdhybrid"`
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.Ext.Bypass != 2048 || !info.Ext.Ahead {
		t.Errorf("/server_info: prefill bypass %d, ahead %v (%v); want 2048 and true", info.Ext.Bypass, info.Ext.Ahead, err)
	}
}
