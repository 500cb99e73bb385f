package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A chat's tool calls and results render as Qwen3's template lays them out
// (consecutive tool results in one user turn), and as the Anthropic
// frontend renders the same conversation.
func TestRenderChatTools(t *testing.T) {
	var msgs []any
	json.Unmarshal([]byte(`[
		{"role":"user","content":"Fix a.go"},
		{"role":"assistant","content":"Reading.","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\": \"a.go\"}"}},
			{"id":"c2","type":"function","function":{"name":"grep","arguments":"not json"}}]},
		{"role":"tool","tool_call_id":"c1","content":"package a"},
		{"role":"tool","tool_call_id":"c2","content":"none"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c3","type":"function","function":{"name":"read","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c3","content":"x"}]`), &msgs)
	got, err := renderChat(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nFix a.go<|im_end|>\n" +
		"<|im_start|>assistant\nReading.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"grep\", \"arguments\": \"not json\"}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\npackage a\n</tool_response>\n<tool_response>\nnone\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"read\", \"arguments\": {}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	// The Anthropic frontend renders the first exchange the same way.
	q := mustParse(t, `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Fix a.go"},
		{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"c1","name":"read","input":{"path":"a.go"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"package a"}]}]}`)
	oa, _ := renderChat([]any{msgs[0], map[string]any{"role": "assistant", "content": "Reading.", "tool_calls": []any{
		map[string]any{"function": map[string]any{"name": "read", "arguments": `{"path": "a.go"}`}}}},
		map[string]any{"role": "tool", "content": "package a"}})
	if an := renderMessages(q); an != oa {
		t.Fatalf("Anthropic rendered\n%q\nOpenAI\n%q", an, oa)
	}
}

// openaiAnswer runs fake worker output (cumulative texts; one text = not
// streamed) through the OpenAI writer and returns the body the client gets.
func openaiAnswer(t *testing.T, chat, stream bool, stops []string, texts ...string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	ow := &openaiWriter{w: rec, chat: chat, stream: stream, id: "x", split: outSplitter{stops: stops, plain: !chat}}
	ow.WriteHeader(http.StatusOK)
	for i, text := range texts {
		mi := map[string]any{"prompt_tokens": 10, "completion_tokens": i + 1}
		if i == len(texts)-1 {
			mi["finish_reason"] = map[string]any{"type": "length"}
		}
		b, _ := json.Marshal(map[string]any{"text": text, "meta_info": mi})
		if stream {
			ow.Write([]byte("data: " + string(b) + "\n\n"))
		} else {
			ow.Write(b)
		}
	}
	if stream {
		ow.Write([]byte("data: [DONE]\n\n"))
	}
	ow.finish()
	return rec.Body.String()
}

// A chat answer's tool calls come back as tool_calls (streamed: as
// tool_calls deltas), its text cut at a stop sequence; a text completion
// keeps tags as text.
func TestOpenAIToolCallsAndStops(t *testing.T) {
	call := "Checking.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a.go\"}}\n</tool_call>"
	var msg struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Text         string `json:"text"`
			Message      struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(openaiAnswer(t, true, false, nil, call)), &msg); err != nil {
		t.Fatal(err)
	}
	c := msg.Choices[0]
	if c.FinishReason != "tool_calls" || *c.Message.Content != "Checking." || len(c.Message.ToolCalls) != 1 ||
		c.Message.ToolCalls[0].Function.Name != "read" || c.Message.ToolCalls[0].Function.Arguments != `{"path":"a.go"}` {
		t.Fatalf("chat answer: %+v", c)
	}
	json.Unmarshal([]byte(openaiAnswer(t, true, false, []string{"STOP"}, "abcSTOPdef")), &msg)
	if c := msg.Choices[0]; *c.Message.Content != "abc" || c.FinishReason != "stop" {
		t.Fatalf("stop sequence: %+v", c)
	}
	json.Unmarshal([]byte(openaiAnswer(t, false, false, nil, call)), &msg)
	if c := msg.Choices[0]; c.Text != call || c.FinishReason != "length" {
		t.Fatalf("completion: %+v", c)
	}
	// Streamed, the tag split across events.
	var texts []string
	for i := 2; i < len(call); i += 6 {
		texts = append(texts, call[:i])
	}
	out := openaiAnswer(t, true, true, nil, append(texts, call)...)
	var content, args, finish string
	for _, line := range strings.Split(out, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				args += tc.Function.Name + tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if content != "Checking." || args != `read{"path":"a.go"}` || finish != "tool_calls" || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("streamed: content %q, calls %q, finish %q\n%s", content, args, finish, out)
	}
}

// A chat's tools go into the system message as Qwen3's tools section, as
// the Anthropic frontend renders them.
func TestRenderChatToolDefinitions(t *testing.T) {
	var tools, msgs []any
	json.Unmarshal([]byte(`[{"type":"function","function":{"name":"read","description":"Read a file","parameters":{"type":"object"}}}]`), &tools)
	json.Unmarshal([]byte(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`), &msgs)
	got, err := renderChatTools(msgs, tools)
	if err != nil {
		t.Fatal(err)
	}
	want := renderMessages(mustParse(t, `{"model":"m","max_tokens":1,"system":"Be brief.","tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Hi"}]}`))
	if got != want {
		t.Fatalf("chat rendered\n%q\nAnthropic\n%q", got, want)
	}
	got, _ = renderChatTools(msgs[1:], tools)
	if !strings.HasPrefix(got, "<|im_start|>system\n# Tools\n") {
		t.Fatalf("without a system message: %q", got)
	}
}
