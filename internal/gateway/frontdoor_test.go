package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// trap is a loopback listener that must receive nothing: it counts the
// connections made to it.
func trap(t *testing.T) (port int, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, conns
}

// post sends a raw body and returns the status, the body and the header.
func postRaw(t *testing.T, u, contentType, body string) (int, []byte, http.Header) {
	t.Helper()
	resp, err := http.Post(u, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// Routing fields a client sets (the PD bootstrap address and room, rid,
// DP ranks) never steer a worker: a session seeded through P and its
// direct turn on the decoder, with the body naming a listener as its
// bootstrap server, reach no one there; two requests with one rid are both
// served.
func TestClientRoutingFieldsIgnored(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw := gateway(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	port, conns := trap(t)
	hostile := func(prompt []int) map[string]any {
		return map[string]any{"input_ids": prompt, "session_id": "victim", "sampling_params": map[string]any{"max_new_tokens": 4},
			"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 7, "rid": "same-rid", "data_parallel_rank": 3}
	}
	prompt := ids(10, 600)
	a := generate(t, gw.URL, hostile(prompt))
	if a.status != http.StatusOK || a.mode != "pd-router-turn1-seed" {
		t.Fatalf("turn 1: %+v", a)
	}
	prompt = append(append(prompt, a.outputIDs...), ids(9000, 50)...)
	var wg sync.WaitGroup
	res := make([]answer, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := hostile(prompt)
			if i == 1 {
				body = hostile(ids(50000, 300)) // another session's turn 1, same rid
				body["session_id"] = "other"
			}
			res[i] = generate(t, gw.URL, body)
		}()
	}
	wg.Wait()
	if res[0].status != http.StatusOK || res[0].mode != "kvcache-direct-to-d-session" {
		t.Errorf("turn 2: %+v, want a direct append (session_id still names the session)", res[0])
	}
	if res[1].status != http.StatusOK {
		t.Errorf("a second request with the same client rid: %+v", res[1])
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the client's bootstrap address received %d connections, want 0", n)
	}
}

// Client errors are 400s in the API's own shape on KVC, before any worker
// sees them: SGLang's /generate as SGLang checks it, a prompt over the
// context in all three APIs.
func TestClientErrorsAre400(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.ContextTokens = 4096 })
	for _, body := range []string{
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":-1}}`,
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":2.5}}`,
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":1e12}}`,
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":4294967296}}`,
		`{"input_ids":[1,2],"sampling_params":"x"}`,
		`{"input_ids":[]}`,
		`{"input_ids":[-1, 5]}`,
		`{"input_ids":[1, 2147483648]}`,
		`{"text":""}`,
		`{"input_ids":[1,2],"stream":"yes"}`,
		`{"text":"` + strings.Repeat("abcd", 5000) + `"}`,
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":4095}}`,
		`{"input_ids":[1,2],"sampling_params":{"max_new_tokens":4094}}`, // exactly the context: SGLang refuses (>=)
	} {
		status, b, _ := postRaw(t, gw.URL+"/generate", "application/json", body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != 400 || e.Error.Message == "" {
			t.Errorf("/generate %.80s: %d %s, want a 400 in SGLang's shape", body, status, b)
		}
	}
	long := strings.Repeat("word ", 5000)
	status, b, _ := postRaw(t, gw.URL+"/v1/chat/completions", "application/json",
		`{"model":"m","messages":[{"role":"user","content":"`+long+`"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "invalid_request_error") {
		t.Errorf("chat over the context: %d %s", status, b)
	}
	status, b, _ = postRaw(t, gw.URL+"/v1/messages", "application/json",
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"`+long+`"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "invalid_request_error") {
		t.Errorf("messages over the context: %d %s, want 400 invalid_request_error (not 529)", status, b)
	}
}

// OpenAI requests are checked as vLLM checks them; each refusal is a 400
// whose type is invalid_request_error and whose message names the field.
func TestOpenAIValidation(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	gw := gateway(t, kvc.MechColo, nil, []*emulator.Server{c})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ ct, body, field string }{
		{"application/json", `{"model":"m",` + msgs + `,"n":3}`, "n"},
		{"application/json", `{"model":"m",` + msgs + `,"max_tokens":"5"}`, "max_tokens"},
		{"application/json", `{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens"},
		{"application/json", `{"model":"m","messages":[{"role":"wizard","content":"hi"}]}`, "role"},
		{"application/json", `{"model":"m","messages":[{"role":"user","content":42}]}`, "content"},
		{"application/json", `{"model":"m",` + msgs + `,"temperature":-5}`, "temperature"},
		{"application/json", `{"model":"m",` + msgs + `,"top_p":0}`, "top_p"},
		{"application/json", `{"model":"m",` + msgs + `,"stream":"yes"}`, "stream"},
		{"application/json", `{"model":"m",` + msgs + `,"logprobs":true}`, "logprobs"},
		{"application/json", `{` + msgs + `}`, "model"},
		{"text/plain", `{"model":"m",` + msgs + `}`, "Content-Type"},
	} {
		status, b, _ := postRaw(t, gw.URL+"/v1/chat/completions", tc.ct, tc.body)
		var e struct {
			Error struct {
				Message, Type string
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.field) {
			t.Errorf("%s %s: %d %s, want 400 invalid_request_error naming %s", tc.ct, tc.body, status, b, tc.field)
		}
	}
	status, b, _ := postRaw(t, gw.URL+"/v1/completions", "application/json", `{"model":"m","prompt":"hi","max_tokens":-1}`)
	if status != http.StatusBadRequest || !strings.Contains(string(b), "max_tokens") {
		t.Errorf("completion with max_tokens -1: %d %s", status, b)
	}
	// The SDK sees the refusal as a 400 (which it does not retry), and a
	// well-formed request still goes through.
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, N: openai.Int(3), MaxTokens: openai.Int(2)})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest {
		t.Errorf("SDK with n=3: %v, want a 400", err)
	}
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, Temperature: openai.Float(0.7), MaxTokens: openai.Int(2)}); err != nil {
		t.Errorf("a valid request: %v", err)
	}
}

// Unknown paths and wrong methods are JSON errors in each API's shape;
// GET /v1/models (through the OpenAI SDK), /version and /health_generate
// answer; an OpenAI 503 is not typed invalid_request_error.
func TestRoutesAndErrorShapes(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	gw, _ := gatewayServer(t, kvc.MechColo, nil, []*emulator.Server{c}, func(c *Config) { c.Model = "qwen3-test" })
	for _, tc := range []struct {
		method, path string
		status       int
		shape        string // a substring of the JSON error
	}{
		{"GET", "/generate", 405, `"code":405`},
		{"GET", "/v1/chat/completions", 405, `"type":"invalid_request_error"`},
		{"GET", "/v1/messages", 405, `"type":"error"`},
		{"POST", "/v1/models", 405, `"type":"invalid_request_error"`},
		{"GET", "/nope", 404, `"code":404`},
		{"GET", "/v1/nope", 404, `"type":"not_found_error"`},
		{"POST", "/v1/messages/nope", 404, `"not_found_error"`},
		{"GET", "/v1/models/other", 404, `"not_found_error"`},
	} {
		req, _ := http.NewRequest(tc.method, gw.URL+tc.path, bytes.NewReader(nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(string(b), tc.shape) {
			t.Errorf("%s %s: %d %q %s, want %d JSON with %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.shape)
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("unused"))
	page, err := client.Models.List(context.Background())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "qwen3-test" {
		t.Fatalf("models: %+v, %v", page, err)
	}
	for _, p := range []string{"/version", "/health_generate"} {
		resp, err := http.Get(gw.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	c.Kill()
	resp, err := http.Get(gw.URL + "/health_generate")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health_generate with its only worker dead: %d, want 503", resp.StatusCode)
	}
	status, b, _ := postRaw(t, gw.URL+"/v1/completions", "application/json", `{"model":"m","prompt":"hi","max_tokens":2}`)
	if status < 500 || strings.Contains(string(b), "invalid_request_error") {
		t.Errorf("completion with the worker dead: %d %s, want a 5xx not typed invalid_request_error", status, b)
	}
}

// syncBuffer is a log sink safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Operable: /metrics carries the Go runtime's and the process's series; a
// failed request is logged as a JSON line with its cause (the log keeps
// the worker's address, the client's error body does not), and so is a
// worker the health checks take out of service.
func TestOperable(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	var log syncBuffer
	gw, _ := gatewayServer(t, kvc.MechColo, nil, []*emulator.Server{c}, func(cfg *Config) {
		cfg.Log = &log
		cfg.Health = HealthConfig{Interval: 20 * time.Millisecond, Failures: 1}
	})
	fams := scrape(t, gw.URL)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	host := strings.TrimPrefix(c.URL(), "http://")
	c.Kill()
	status, b, h := postRaw(t, gw.URL+"/generate", "application/json", `{"text":"hello","sampling_params":{"max_new_tokens":2}}`)
	if status != http.StatusServiceUnavailable || strings.Contains(string(b), host) || h.Get("Retry-After") == "" {
		t.Errorf("with the worker dead: %d %s (Retry-After %q), want a 503 with Retry-After naming no address", status, b, h.Get("Retry-After"))
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), `"msg":"worker down"`); {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := log.String()
	var failed map[string]any
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request failed" {
			failed = m
		}
	}
	if failed == nil || failed["status"] != float64(503) || !strings.Contains(fmt.Sprint(failed["cause"]), host) {
		t.Errorf("no JSON 'request failed' line with its cause in the log:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"worker down"`) {
		t.Errorf("no 'worker down' line in the log:\n%s", out)
	}
	if strings.Contains(out, "hello") {
		t.Errorf("the log shows prompt text:\n%s", out)
	}
}

// With API keys in use (Ops.ClientHeader), a session id is the caller's
// own: a second key naming the same session with the same prompt does not
// land on the first key's session (its turn is a first turn, seeded), and
// the first key's next turn is still a direct append.
func TestSessionsScopedByKey(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1}, func(c *Config) { c.ClientHeader = "X-Api-Key" })
	send := func(key string, prompt []int) answer {
		j, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": "shared-name", "sampling_params": map[string]any{"max_new_tokens": 4}})
		req, _ := http.NewRequest("POST", gw.URL+"/generate", bytes.NewReader(j))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return answer{status: resp.StatusCode, mode: resp.Header.Get("X-PDHybrid-Mode")}
	}
	prompt := ids(100, 800)
	if a := send("key-a", prompt); a.status != 200 || a.mode != "pd-router-turn1-seed" {
		t.Fatalf("key a turn 1: %+v", a)
	}
	next := append(append([]int(nil), prompt...), ids(7000, 40)...)
	if a := send("key-b", next); a.status != 200 || a.mode == "kvcache-direct-to-d-session" {
		t.Fatalf("key b naming key a's session: %+v, want a session of its own (not a direct append)", a)
	}
	if a := send("key-a", next); a.status != 200 || a.mode != "kvcache-direct-to-d-session" {
		t.Fatalf("key a turn 2: %+v, want a direct append", a)
	}
}
