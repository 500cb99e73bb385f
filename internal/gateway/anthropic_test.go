package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// decodeBody reads a JSON body as the gateway does (numbers exact).
func decodeBody(t testing.TB, body string) map[string]any {
	t.Helper()
	s := &Server{cfg: Config{MaxBodyBytes: 1 << 20}}
	m, err := s.readJSON(httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustParse(t *testing.T, body string) *messagesReq {
	t.Helper()
	q, err := parseMessages(decodeBody(t, body), false)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The layout is Qwen3's chat template: system (with the tools section),
// user text and tool results, assistant text with its tool calls, and the
// assistant's opening at the end.
func TestRenderMessages(t *testing.T) {
	q := mustParse(t, `{"model":"m","max_tokens":8,
		"system":[{"type":"text","text":"You are an agent."},{"type":"text","text":"Be brief."}],
		"tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],
		"messages":[
			{"role":"user","content":"Open <a.go> & fix it"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Reading."},
				{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.go","n":2}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package a"}]},
				{"type":"text","text":"Go on."}]}]}`)
	want := "<|im_start|>system\nYou are an agent.\n\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"function": {"description": "Read a file", "name": "read", "parameters": {"properties": {"path": {"type": "string"}}, "type": "object"}}, "type": "function"}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\nOpen <a.go> & fix it<|im_end|>\n" +
		"<|im_start|>assistant\nReading.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"n\": 2, \"path\": \"a.go\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\npackage a\n</tool_response>\nGo on.<|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got := renderMessages(q); got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	// A last assistant message is a prefill, continued rather than closed.
	q = mustParse(t, `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Sure:"}]}`)
	if got, want := renderMessages(q), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nSure:"; got != want {
		t.Fatalf("prefill rendered %q, want %q", got, want)
	}
}

// Claude Code's per-request billing nonce is not part of the prompt: two
// requests differing only in it render the same.
func TestRenderDropsBillingHeader(t *testing.T) {
	body := func(cch string) string {
		return `{"model":"m","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.117.48f; cc_entrypoint=cli; cch=` +
			cch + `;"},{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":"hi"}]}`
	}
	a, b := renderMessages(mustParse(t, body("71fea"))), renderMessages(mustParse(t, body("0aaa9")))
	if a != b || strings.Contains(a, "cch=") || !strings.HasPrefix(a, "<|im_start|>system\nYou are Claude Code.<|im_end|>") {
		t.Fatalf("rendered %q and %q", a, b)
	}
	q := mustParse(t, `{"model":"m","max_tokens":8,"system":"x-anthropic-billing-header: cch=1;\nBe brief.","messages":[{"role":"user","content":"hi"}]}`)
	if got := renderMessages(q); !strings.HasPrefix(got, "<|im_start|>system\nBe brief.<|im_end|>") {
		t.Fatalf("string system rendered %q", got)
	}
}

// answerAs runs a fake worker answer with text through the Anthropic writer
// (non-streamed) and returns the message the client gets.
func answerAs(t *testing.T, q *messagesReq, text string, finish string) map[string]any {
	t.Helper()
	rec := httptest.NewRecorder()
	aw := newAnthropicWriter(rec, q)
	b, _ := json.Marshal(map[string]any{"text": text, "meta_info": map[string]any{"prompt_tokens": 100, "completion_tokens": 7,
		"cached_tokens": 40, "finish_reason": map[string]any{"type": finish}}})
	aw.Header().Set("Content-Type", "application/json")
	aw.WriteHeader(http.StatusOK)
	aw.Write(b)
	aw.finish()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var msg map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil {
		t.Fatal(err)
	}
	return msg
}

// The rendering is append-only across turns: each turn's prompt starts with
// the previous prompt plus the answer the client got back, with the answer
// text, tool calls and tool results of a coding agent's loop.
func TestRenderAppendOnly(t *testing.T) {
	answers := []string{
		"I will read the file.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"b.go\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"n\": 3, \"q\": \"x<y\"}}\n</tool_call>",
		"Both files are fine.\n\nDone.",
		"<think>\nok\n</think>\n\nNothing else.",
	}
	msgs := []any{map[string]any{"role": "user", "content": "Fix a.go"}}
	var prev string
	for turn, ans := range answers {
		body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 64, "system": "You are an agent.",
			"tools": []any{map[string]any{"name": "read", "input_schema": map[string]any{"type": "object"}}}, "messages": msgs})
		q := mustParse(t, string(body))
		prompt := renderMessages(q)
		if turn > 0 && !strings.HasPrefix(prompt, prev) {
			t.Fatalf("turn %d's prompt does not start with turn %d's prompt + answer:\n%q\n%q", turn+1, turn, prompt, prev)
		}
		msg := answerAs(t, q, ans, "stop")
		content := msg["content"].([]any)
		var results []any
		for _, c := range content {
			if b := c.(map[string]any); b["type"] == "tool_use" {
				results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b["id"], "content": "ok " + b["name"].(string)})
			}
		}
		if wantTool := strings.Contains(ans, "<tool_call>"); (msg["stop_reason"] == "tool_use") != wantTool {
			t.Fatalf("turn %d: stop_reason %v for %q", turn+1, msg["stop_reason"], ans)
		}
		prev = prompt + ans
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
		if len(results) == 0 {
			results = []any{map[string]any{"type": "text", "text": "Thanks."}}
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": results})
	}
}

func TestParseMessagesErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"max_tokens":8,"messages":[{"role":"user","content":"x"}]}`, "model: Field required"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens: Field required"},
		{`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens: 0 is not an integer in [1,"},
		{`{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, "max_tokens: 1.5"},
		{`{"model":"m","max_tokens":8}`, "messages: Field required"},
		{`{"model":"m","max_tokens":8,"messages":[]}`, "messages: at least one"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"system","content":"x"}]}`, "messages.0.role"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":5}]}`, "messages.0.content: Input should be a string or a list"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, `messages.0.content.0.type: unsupported content block type "video"`},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages.0.content.0.type: Field required"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_use","name":"r","input":{}}]}]}`, "tool_use blocks belong in assistant messages"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"r","input":[]}]}]}`, "messages.0.content.0.input: Input should be a valid object"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id: Field required"},
		{`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"zip"}]}]}]}`, "messages.0.content.0.content.0.type"},
		{`{"model":"m","max_tokens":8,"stop_sequences":"END","messages":[{"role":"user","content":"x"}]}`, "stop_sequences: Input should be a valid list"},
		{`{"model":"m","max_tokens":8,"stop_sequences":[""],"messages":[{"role":"user","content":"x"}]}`, "stop_sequences.0"},
		{`{"model":"m","max_tokens":8,"system":[{"type":"image"}],"messages":[{"role":"user","content":"x"}]}`, "system.0"},
		{`{"model":"m","max_tokens":8,"tools":[{"description":"d"}],"messages":[{"role":"user","content":"x"}]}`, "tools.0.name: Field required"},
		{`{"model":"m","max_tokens":8,"metadata":{"user_id":7},"messages":[{"role":"user","content":"x"}]}`, "metadata.user_id"},
		{`{"model":"m","max_tokens":8,"stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream: Input should be a valid boolean"},
		{`{"model":"m","max_tokens":8,"temperature":"hot","messages":[{"role":"user","content":"x"}]}`, "temperature"},
	} {
		_, err := parseMessages(decodeBody(t, tc.body), false)
		var ae *anthError
		if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want a 400 containing %q", tc.body, err, tc.want)
		}
	}
}

// Errors come back in Anthropic's shape with the status its type takes:
// the gateway's own refusals and a worker that cannot be reached.
func TestAnthropicErrorShapes(t *testing.T) {
	g, err := New(Config{Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}, Colo: []string{"http://127.0.0.1:1"},
		MaxBodyBytes: 4096, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveGateway(g)
	defer ts.Close()
	for _, tc := range []struct {
		method, path, body string
		status             int
		typ, msg           string
	}{
		{"POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "max_tokens"},
		{"POST", "/v1/messages", `[1,2]`, 400, "invalid_request_error", "not a JSON object"},
		{"POST", "/v1/messages", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "request_too_large", "at most 4096"},
		{"GET", "/v1/messages", ``, 405, "invalid_request_error", "use POST"},
		{"POST", "/v1/messages", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}]}`, 529, "overloaded_error", "unreachable"},
		{"POST", "/v1/messages", `{"model":"m","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"x"}]}`, 529, "overloaded_error", "unreachable"},
		{"POST", "/v1/messages/count_tokens", `{"model":"m"}`, 400, "invalid_request_error", "messages: Field required"},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || out.Type != "error" || out.Error.Type != tc.typ || !strings.Contains(out.Error.Message, tc.msg) {
			t.Errorf("%s %s %.60s: status %d %+v (%v), want %d %s containing %q", tc.method, tc.path, tc.body, resp.StatusCode, out, err, tc.status, tc.typ, tc.msg)
		}
	}
}

func TestAnthropicErrorType(t *testing.T) {
	for _, tc := range []struct {
		in, out int
		typ     string
	}{{400, 400, "invalid_request_error"}, {401, 401, "authentication_error"}, {403, 403, "permission_error"},
		{404, 404, "not_found_error"}, {413, 413, "request_too_large"}, {429, 429, "rate_limit_error"},
		{500, 500, "api_error"}, {502, 500, "api_error"}, {503, 529, "overloaded_error"}, {504, 504, "timeout_error"},
		{408, 504, "timeout_error"}, {422, 422, "invalid_request_error"}} {
		if typ, code := anthropicErrorType(tc.in); typ != tc.typ || code != tc.out {
			t.Errorf("%d → %s %d, want %s %d", tc.in, typ, code, tc.typ, tc.out)
		}
	}
}

// count_tokens counts the rendered prompt at the router's 4 bytes a token,
// what the emulated worker reports as prompt_tokens for the same request.
func TestCountTokens(t *testing.T) {
	g, err := New(Config{Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo}, Colo: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(body string) int {
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/messages/count_tokens", strings.NewReader(body)))
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("count_tokens %s: %d %s", body, rec.Code, rec.Body)
		}
		return out.InputTokens
	}
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("abcd", 100) + `"}]}`
	prompt := renderMessages(mustParse(t, strings.Replace(body, `"model":"m"`, `"model":"m","max_tokens":1`, 1)))
	if got, want := count(body), (len(prompt)+3)/4; got != want {
		t.Fatalf("count_tokens %d, want %d (%d bytes rendered)", got, want, len(prompt))
	}
	withSystem := count(`{"model":"m","system":"` + strings.Repeat("s", 400) + `","messages":[{"role":"user","content":"` + strings.Repeat("abcd", 100) + `"}]}`)
	if withSystem < count(body)+100 {
		t.Fatalf("a 400-byte system prompt added %d tokens, want ≥ 100", withSystem-count(body))
	}
}

// streamAs runs a fake worker stream (cumulative texts) through the writer
// and returns the Anthropic events the client gets.
func streamAs(t *testing.T, q *messagesReq, texts []string) []map[string]any {
	t.Helper()
	rec := httptest.NewRecorder()
	streamed := *q
	streamed.stream = true
	aw := newAnthropicWriter(rec, &streamed)
	aw.estimate = 49
	aw.Header().Set("Content-Type", "text/event-stream")
	aw.WriteHeader(http.StatusOK)
	for i, text := range texts {
		mi := map[string]any{"prompt_tokens": 50, "completion_tokens": i + 1, "cached_tokens": 0}
		if i == len(texts)-1 {
			mi["cached_tokens"] = 32
			mi["finish_reason"] = map[string]any{"type": "length"}
		}
		b, _ := json.Marshal(map[string]any{"text": text, "meta_info": mi})
		aw.Write([]byte("data: " + string(b) + "\n\n"))
	}
	aw.Write([]byte("data: [DONE]\n\n"))
	aw.finish()
	var evs []map[string]any
	sc := bufio.NewScanner(rec.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			if err := json.Unmarshal([]byte(d), &ev); err != nil || ev["type"] != name {
				t.Fatalf("event %q data %s (%v)", name, d, err)
			}
			evs = append(evs, ev)
		}
	}
	return evs
}

// text and tools collect a stream's content the way the SDK accumulates it.
func collect(evs []map[string]any) (text string, tools []string, last map[string]any) {
	for _, ev := range evs {
		switch ev["type"] {
		case "content_block_start":
			if cb := ev["content_block"].(map[string]any); cb["type"] == "tool_use" {
				tools = append(tools, cb["name"].(string))
			}
		case "content_block_delta":
			d := ev["delta"].(map[string]any)
			if d["type"] == "text_delta" {
				text += d["text"].(string)
			} else {
				tools[len(tools)-1] += " " + d["partial_json"].(string)
			}
		case "message_delta":
			last = ev
		}
	}
	return
}

// A stop sequence cuts the answer (streamed: even split across events,
// and no byte of it reaches the client) and is reported as the stop reason.
func TestStopSequences(t *testing.T) {
	q := mustParse(t, `{"model":"m","max_tokens":64,"stop_sequences":["END","\n\nHuman:"],"messages":[{"role":"user","content":"x"}]}`)
	msg := answerAs(t, q, "abcdEfgEND and more", "length")
	if c := msg["content"].([]any); len(c) != 1 || c[0].(map[string]any)["text"] != "abcdEfg" ||
		msg["stop_reason"] != "stop_sequence" || msg["stop_sequence"] != "END" {
		t.Fatalf("non-streamed: %v", msg)
	}
	evs := streamAs(t, q, []string{"ab", "abcdE", "abcdEfgEN", "abcdEfgEND and", "abcdEfgEND and more"})
	text, _, last := collect(evs)
	d := last["delta"].(map[string]any)
	if text != "abcdEfg" || d["stop_reason"] != "stop_sequence" || d["stop_sequence"] != "END" {
		t.Fatalf("streamed: text %q, delta %v", text, d)
	}
	names := []string{}
	for _, ev := range evs {
		names = append(names, ev["type"].(string))
	}
	if names[0] != "message_start" || names[1] != "ping" || names[len(names)-1] != "message_stop" {
		t.Fatalf("events %v", names)
	}
	// message_start goes out before the worker's first event, with the
	// router's count of the prompt; message_delta has the worker's.
	if u := evs[0]["message"].(map[string]any)["usage"].(map[string]any); u["input_tokens"] != 49.0 {
		t.Fatalf("message_start usage %v, want the router's 49 input tokens", u)
	}
	if u := last["usage"].(map[string]any); u["input_tokens"] != 18.0 || u["cache_read_input_tokens"] != 32.0 {
		t.Fatalf("message_delta usage %v, want the worker's 50 = 18 + 32 cached", u)
	}
	// Without a match the answer ends by length: max_tokens.
	msg = answerAs(t, q, "all of it", "length")
	if msg["stop_reason"] != "max_tokens" || msg["stop_sequence"] != nil {
		t.Fatalf("no match: %v", msg)
	}
}

// Tool calls in the worker's text become tool_use blocks as they stream,
// even with the tags split across events; the usage is the final event's.
func TestStreamToolCalls(t *testing.T) {
	q := mustParse(t, `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"x"}]}`)
	full := "Let me look.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>"
	var texts []string
	for i := 3; i < len(full); i += 5 {
		texts = append(texts, full[:i])
	}
	texts = append(texts, full)
	evs := streamAs(t, q, texts)
	text, tools, last := collect(evs)
	if text != "Let me look." || len(tools) != 1 || tools[0] != `read {"path":"a.go"}` {
		t.Fatalf("text %q tools %q", text, tools)
	}
	u := last["usage"].(map[string]any)
	if last["delta"].(map[string]any)["stop_reason"] != "tool_use" || u["cache_read_input_tokens"] != 32.0 || u["input_tokens"] != 18.0 {
		t.Fatalf("message_delta %v", last)
	}
	// An unclosed or malformed call stays text.
	evs = streamAs(t, q, []string{"a <tool_call>\n{\"name\": \"r\"", "a <tool_call>\n{\"name\": \"r\""})
	if text, tools, _ := collect(evs); text != "a <tool_call>\n{\"name\": \"r\"" || len(tools) != 0 {
		t.Fatalf("unclosed call: text %q tools %q", text, tools)
	}
	msg := answerAs(t, q, "<tool_call>\nnot json\n</tool_call>", "stop")
	if c := msg["content"].([]any); len(c) != 1 || msg["stop_reason"] != "end_turn" {
		t.Fatalf("malformed call: %v", msg)
	}
}

// A worker that fails mid-stream (SGLang's error event) ends the stream
// with Anthropic's error event.
func TestStreamWorkerError(t *testing.T) {
	q := mustParse(t, `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	rec := httptest.NewRecorder()
	aw := newAnthropicWriter(rec, q)
	aw.WriteHeader(http.StatusOK)
	aw.Write([]byte("data: {\"text\":\"ab\",\"meta_info\":{}}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n"))
	aw.finish()
	out := rec.Body.String()
	if !strings.Contains(out, "event: error\ndata: {\"error\":{\"message\":\"worker error: boom\",\"type\":\"api_error\"},\"type\":\"error\"}") ||
		strings.Contains(out, "message_stop") {
		t.Fatalf("stream:\n%s", out)
	}
	// Cut short: no [DONE], no finish.
	rec = httptest.NewRecorder()
	aw = newAnthropicWriter(rec, q)
	aw.WriteHeader(http.StatusOK)
	aw.Write([]byte("data: {\"text\":\"ab\",\"meta_info\":{}}\n\n"))
	aw.finish()
	if !strings.Contains(rec.Body.String(), "event: error") {
		t.Fatalf("stream cut short:\n%s", rec.Body)
	}
}

// The Messages body parser never panics, and every refusal is a 400 that
// names something.
func FuzzParseMessages(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":8,"system":[{"type":"text","text":"s"}],"tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"i","name":"t","input":{"a":[1,{"b":null}]}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"i","content":[{"type":"image","source":{"data":"x"}}]}]}]}`,
		`{"model":"m","max_tokens":-1,"stop_sequences":[1],"metadata":{"user_id":null}}`,
		`{"model":"","messages":null}`,
		`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"i","content":{}}]}]}`,
	} {
		f.Add(s)
	}
	s := &Server{cfg: Config{MaxBodyBytes: 1 << 20}}
	f.Fuzz(func(t *testing.T, body string) {
		in, err := s.readJSON(httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body)))
		if err != nil {
			return
		}
		for _, count := range []bool{false, true} {
			q, err := parseMessages(in, count)
			if err != nil {
				var ae *anthError
				if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || !strings.Contains(err.Error(), ":") {
					t.Fatalf("refusal %v is not a 400 naming a field", err)
				}
				continue
			}
			if p := renderMessages(q); !strings.HasPrefix(p, "<|im_start|>") {
				t.Fatalf("rendered %q", p)
			}
		}
	})
}

// However the worker's text is cut into events, the splitter gives the
// same answer: the text up to the first stop sequence, tool calls taken
// out whole, nothing emitted twice or lost.
func FuzzOutSplitter(f *testing.F) {
	f.Add("Let me look.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {}}\n</tool_call>\nDone END more", "END", uint64(12345))
	f.Add("abc<tool_call>oops</tool_call> <tool_c", "", uint64(7))
	f.Add("x\n\nHuman: y", "\n\nHuman:", uint64(99))
	f.Fuzz(func(t *testing.T, full, stop string, cuts uint64) {
		whole := outSplitter{}
		if stop != "" {
			whole.stops = []string{stop}
		}
		piecewise := whole
		whole.update(full)
		want := whole.next(true)
		var got []segment
		for i := 0; i < len(full); {
			i += 1 + int(cuts%7)
			cuts = cuts/7 + uint64(i)
			piecewise.update(full[:min(i, len(full))])
			got = append(got, piecewise.next(false)...)
		}
		got = append(got, piecewise.next(true)...)
		render := func(segs []segment) string {
			var b strings.Builder
			for _, s := range segs {
				if s.tool {
					b.WriteString("\x00" + s.text + string(s.input) + "\x00")
				} else {
					b.WriteString(s.text)
				}
			}
			return b.String()
		}
		if render(got) != render(want) {
			t.Fatalf("piecewise %q, whole %q", render(got), render(want))
		}
		if !strings.Contains(full, toolOpen) {
			cut := full
			if i := strings.Index(full, stop); stop != "" && i >= 0 {
				cut = full[:i]
			}
			if render(want) != cut {
				t.Fatalf("text %q, want %q", render(want), cut)
			}
		}
	})
}
