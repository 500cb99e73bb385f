package gateway

import (
	"encoding/json"
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
