package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/kvc/kvctest"
)

// TestExecutorConformance runs the conformance suite's scripted sessions
// (kvc/kvctest) through the gateway's executor, over HTTP to emulated
// workers on loopback: the dispatcher calls in order and the belief
// afterwards must be the row's, as the simulator's executor must
// (internal/sim/conformance_test.go).
func TestExecutorConformance(t *testing.T) {
	for _, row := range kvctest.Rows {
		t.Run("gateway/"+row.Name, func(t *testing.T) {
			if row.Only != "" && row.Only != "gateway" {
				t.Skip(row.Why)
			}
			calls, snap, decoders := gatewayConformance(t, row)
			if err := row.Check(calls, snap, nil); err != nil {
				t.Fatal(err)
			}
			if row.MaxResident > 0 {
				for _, d := range decoders {
					if n := residentSessions(t, d); n > float64(row.MaxResident) {
						t.Fatalf("%s holds %g sessions, at most %d allowed", d.URL(), n, row.MaxResident)
					}
				}
			}
		})
	}
}

// gatewayConformance runs a row's turns one after another through a
// gateway in front of one emulated prefill worker and row.Decoders
// emulated KVC decoders, and returns the dispatcher's calls and final
// belief.
func gatewayConformance(t *testing.T, row kvctest.Row) ([]string, kvc.Snapshot, []*emulator.Server) {
	t.Helper()
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true })
	var decoders []*emulator.Server
	for range max(row.Decoders, 1) {
		decoders = append(decoders, emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
			c.Session = engine.SessionConfig{Enabled: true, Cap: row.SessionCap}
		}))
	}
	retries := row.Retries
	if retries == 0 {
		retries = -1 // none, as the simulator
	}
	cfg := Config{Dispatch: row.Config(), Retries: retries, Health: HealthConfig{Interval: -1}}
	if row.Fault == kvctest.FaultAdmitTimeout {
		cfg.AdmissionTimeout = 100 * time.Millisecond
	}
	// The client-leaves rows leave when their fault is in place (the
	// prefill leg held, the pause hint answered), not after a fixed time:
	// on a loaded machine the admission RPC alone can outlast one.
	leave := make(chan struct{})
	var leaveOnce sync.Once
	inPlace := func() { leaveOnce.Do(func() { close(leave) }) }
	cfg.Prefill = []Prefill{{URL: faulty(t, p.URL(), row.Fault, engine.RolePrefill, inPlace), BootstrapPort: p.BootstrapPort()}}
	urls := []string{p.URL()}
	var first atomic.Bool // FaultDecode503Once: the first decode /generate anywhere
	for _, d := range decoders {
		cfg.Decode = append(cfg.Decode, faultyDecoder(t, d.URL(), row.Fault, &first, inPlace))
		urls = append(urls, d.URL())
	}
	emulatortest.WaitHealthy(t, urls...)
	gw, srv := serve(t, cfg)
	var calls []string
	srv.locked(func() { srv.disp.SetTrace(func(c string) { calls = append(calls, c) }) })
	prompts := kvctest.NewPrompts()
	outs := map[string][]int{}
	for i, turn := range row.Turns {
		toks := prompts.Next(turn, outs[turn.Session])
		body := map[string]any{"input_ids": toks, "session_id": turn.Session, "sampling_params": map[string]any{"max_new_tokens": turn.Output}}
		switch row.Fault {
		case kvctest.FaultPauseClientLeaves:
			clientLeaves(t, gw.URL, body, leave)
			continue
		case kvctest.FaultClientLeavesPrefill:
			// Streamed: the decoder's 200 comes before its first token, so
			// the client leaves while the gateway relays D's answer and P's
			// leg is still open.
			body["stream"] = true
			clientLeaves(t, gw.URL, body, leave)
			continue
		case kvctest.FaultClientLeavesMidStream:
			leavesAfterFirstEvent(t, gw.URL, body)
			continue
		case kvctest.FaultDecodeDiesMidStream:
			body["stream"] = true
			if a := generate(t, gw.URL, body); a.status != http.StatusOK || a.done || len(a.outputIDs) >= turn.Output {
				t.Fatalf("turn %d (%s): %+v, want a stream cut short", i+1, turn.Session, a)
			}
			continue
		}
		a := generate(t, gw.URL, body)
		if turn.Fails != (a.status != http.StatusOK) || !turn.Fails && len(a.outputIDs) != turn.Output {
			t.Fatalf("turn %d (%s): %+v, want failed %t", i+1, turn.Session, a, turn.Fails)
		}
		outs[turn.Session] = a.outputIDs
	}
	waitFor(t, func() (idle bool) {
		srv.locked(func() { idle = srv.disp.Open() == 0 })
		return idle
	}, "every dispatch finished")
	var snap kvc.Snapshot
	var got []string
	srv.locked(func() {
		snap = srv.disp.Snapshot()
		got = append(got, calls...)
		if err := srv.disp.LifecycleErr(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("calls %q", got)
	return got, snap, decoders
}

// faulty puts a stand-in before a prefill worker that injects the row's
// fault (the worker itself when there is none to inject there).
func faulty(t *testing.T, base, fault string, role engine.Role, inPlace func()) string {
	t.Helper()
	if fault != kvctest.FaultTransfer && fault != kvctest.FaultClientLeavesPrefill {
		return base
	}
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate" && fault == kvctest.FaultClientLeavesPrefill {
			// The prefill runs until the client has left: the gateway
			// ends this leg only then. (The body is read first: the server
			// notices a closed connection only after it.)
			io.Copy(io.Discard, r.Body)
			inPlace() // the client leaves now, while this leg is held
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second): // bounded: a gateway that never ends it fails the row
				t.Errorf("the gateway kept the prefill leg open 10 s after the client left (an abort P never saw)")
				http.Error(w, `{"error":{"message":"prefill leg never ended","code":500}}`, http.StatusInternalServerError)
			}
			return
		}
		if r.URL.Path == "/generate" {
			// SGLang's prefill worker whose transfer to D failed.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"message":"KVTransferError: KV transfer to the decode instance failed","code":500}}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// faultyDecoder puts a stand-in before a decoder that injects the row's
// decoder faults: a 503 to the first /generate of all decoders, a 5 s
// pause hint refusing every admission, or a stream cut after its first
// event.
func faultyDecoder(t *testing.T, base, fault string, first *atomic.Bool, inPlace func()) string {
	t.Helper()
	switch fault {
	case kvctest.FaultDecode503Once, kvctest.FaultPauseClientLeaves, kvctest.FaultDecodeDiesMidStream, kvctest.FaultAdmitTimeout, kvctest.FaultAdmitPauseOnce:
	default:
		return base
	}
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case fault == kvctest.FaultDecode503Once && r.URL.Path == "/generate" && first.CompareAndSwap(false, true):
			http.Error(w, `{"error":{"message":"overloaded","code":503}}`, http.StatusServiceUnavailable)
			return
		case fault == kvctest.FaultPauseClientLeaves && r.URL.Path == "/session_cache/admit_direct_append":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"can_admit":false,"mode":"none","reason":"fault-injected","recommended_pause_ms":5000}`))
			// The client leaves within the 5 s pause, once the gateway has
			// had time to read this answer.
			time.AfterFunc(200*time.Millisecond, inPlace)
			return
		case fault == kvctest.FaultAdmitPauseOnce && r.URL.Path == "/session_cache/admit_direct_append" && first.CompareAndSwap(false, true):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"can_admit":false,"mode":"none","reason":"fault-injected","recommended_pause_ms":50}`))
			return
		case fault == kvctest.FaultAdmitTimeout && r.URL.Path == "/session_cache/admit_direct_append":
			// Never answers before the gateway gives up (the body read
			// first: the server notices a hang-up only after it).
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		case fault == kvctest.FaultDecodeDiesMidStream && r.URL.Path == "/generate":
			cutAfterFirstEvent(w, r, base)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// clientLeaves sends body and hangs up when leave closes (at most 10 s),
// before any token came.
func clientLeaves(t *testing.T, gw string, body map[string]any, leave <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-leave:
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		cancel()
	}()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw+"/generate", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // it left before the answer began
	}
	defer resp.Body.Close()
	if stream, _ := body["stream"].(bool); !stream || resp.StatusCode != http.StatusOK {
		t.Fatalf("the request answered %d before the client left", resp.StatusCode)
	}
	// A stream's headers may come first; no token may.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			t.Fatalf("a token came before the client left: %s", sc.Text())
		}
	}
}

// cutAfterFirstEvent relays a decoder's streamed answer up to its first
// event, then breaks the connection off: the decoder died mid-stream.
func cutAfterFirstEvent(w http.ResponseWriter, r *http.Request, base string) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		w.Write([]byte(line))
		if err != nil || strings.HasPrefix(line, "data: ") {
			break
		}
	}
	w.Write([]byte("\n"))
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // the connection drops without the stream's end
}

// leavesAfterFirstEvent streams body and hangs up after its first event.
func leavesAfterFirstEvent(t *testing.T, gw string, body map[string]any) {
	t.Helper()
	body["stream"] = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw+"/generate", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line == "data: [DONE]" {
			t.Fatal("the whole stream came before the client left")
		} else if strings.HasPrefix(line, "data: ") {
			return // the first token came: hang up (deferred)
		}
	}
	t.Fatalf("the stream ended without an event (%v)", sc.Err())
}
