package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A chat's tool calls and tool results, rendered as Qwen3's chat template
// does (as the Anthropic frontend renders tool_use and tool_result): an
// assistant message's tool_calls follow its content, each in <tool_call>
// tags on a line of its own; tool messages become one user turn per run of
// consecutive results, each in <tool_response> tags. So the model sees the
// calls it made, and a turn that sends back the answer it got (its content,
// then its calls) still extends the previous prompt.

// renderToolTurn renders msgs[i], an assistant or tool message.
func renderToolTurn(msgs []any, i int, role string, m map[string]any) string {
	content := contentText(m["content"])
	if role == "assistant" {
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			cm, _ := c.(map[string]any)
			fn, _ := cm["function"].(map[string]any)
			name, _ := fn["name"].(string)
			if content != "" {
				content += "\n"
			}
			content += toolCallText(name, toolArguments(fn["arguments"]))
		}
		return "<|im_start|>assistant\n" + content + "<|im_end|>\n"
	}
	out := ""
	if i == 0 || roleOf(msgs[i-1]) != "tool" {
		out = "<|im_start|>user"
	}
	out += "\n<tool_response>\n" + content + "\n</tool_response>"
	if i+1 == len(msgs) || roleOf(msgs[i+1]) != "tool" {
		out += "<|im_end|>\n"
	}
	return out
}

func roleOf(m any) string {
	mm, _ := m.(map[string]any)
	r, _ := mm["role"].(string)
	return r
}

// toolArguments reads a call's arguments (a JSON string in OpenAI's API);
// arguments that are not JSON stay the string they are.
func toolArguments(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if dec.Decode(&out) != nil || dec.More() {
		return s
	}
	return out
}

// renderChatTools is renderChat with the request's tool definitions in the
// system message (Qwen3's tools section; a system message of their own
// when the chat has none).
func renderChatTools(msgs, tools any) (string, error) {
	defs, _ := tools.([]any)
	list, ok := msgs.([]any)
	if len(defs) == 0 || !ok || len(list) == 0 {
		return renderChat(msgs)
	}
	section := toolsSection(defs)
	out := append([]any(nil), list...)
	if first, ok := out[0].(map[string]any); ok && roleOf(first) == "system" {
		sys := clone(first)
		sys["content"] = contentText(first["content"]) + "\n\n" + section
		out[0] = sys
	} else {
		out = append([]any{map[string]any{"role": "system", "content": section}}, out...)
	}
	return renderChat(out)
}

// openaiStops reads OpenAI's stop: a string or a list of strings.
func openaiStops(v any) ([]string, error) {
	switch s := v.(type) {
	case nil:
		return nil, nil
	case string:
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	case []any:
		var out []string
		for i, x := range s {
			str, ok := x.(string)
			if !ok || str == "" {
				return nil, fmt.Errorf("stop[%d]: want a non-empty string", i)
			}
			out = append(out, str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("stop: want a string or a list of strings")
}

// segments streams the worker's text so far as chunks: text deltas, each
// tool call parsed from it as a tool_calls delta, and with the worker's
// last event the finish reason.
func (o *openaiWriter) segments(text string, finish any) {
	o.split.update(text)
	for _, s := range o.split.next(finish != nil) {
		if !s.tool {
			o.chunk(s.text, nil, nil)
			continue
		}
		d := map[string]any{"tool_calls": []any{o.toolCall(s, true)}}
		if !o.sentRole {
			d["role"] = "assistant"
			o.sentRole = true
		}
		b, _ := json.Marshal(map[string]any{"id": o.id, "object": "chat.completion.chunk", "created": o.created, "model": o.model,
			"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}})
		fmt.Fprintf(o.w, "data: %s\n\n", b)
		o.Flush()
	}
	if finish != nil {
		o.chunk("", o.finishReason(finish), nil)
	}
}

// toolCall is OpenAI's shape of a parsed tool call (streamed: with its
// index among the answer's calls).
func (o *openaiWriter) toolCall(s segment, streamed bool) map[string]any {
	c := map[string]any{"id": "call_" + randHex(12), "type": "function",
		"function": map[string]any{"name": s.text, "arguments": string(s.input)}}
	if streamed {
		c["index"] = o.calls
	}
	o.calls++
	return c
}

func (o *openaiWriter) finishReason(worker any) any {
	switch {
	case o.split.tools > 0:
		return "tool_calls"
	case o.split.stopped != "":
		return "stop"
	}
	return worker
}

// finalChoice is a non-streamed answer's choice: its text cut at a stop
// sequence, its tool calls taken out (chat only).
func (o *openaiWriter) finalChoice(ans map[string]any) (map[string]any, string) {
	text, _ := ans["text"].(string)
	o.split.update(text)
	var content strings.Builder
	var calls []any
	for _, s := range o.split.next(true) {
		if s.tool {
			calls = append(calls, o.toolCall(s, false))
		} else {
			content.WriteString(s.text)
		}
	}
	choice := map[string]any{"index": 0, "finish_reason": o.finishReason(finishOf(ans))}
	if !o.chat {
		choice["text"] = content.String()
		return choice, "text_completion"
	}
	msg := map[string]any{"role": "assistant", "content": content.String()}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if content.Len() == 0 {
			msg["content"] = nil
		}
	}
	choice["message"] = msg
	return choice, "chat.completion"
}
