package gateway

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// A Messages request rendered into one prompt, append-only across turns
// (anthropic.go parses it; anthropic_stream.go answers).

// renderMessages lays the request out as Qwen3's chat template does. Every
// message renders on its own, as a pure function of its blocks, and ends
// "<|im_end|>\n"; the prompt ends with the assistant's opening. So when a
// client sends back the answer it got (its text, and its tool calls as
// tool_use blocks) the next turn's prompt starts with this one's plus the
// answer. A last assistant message is a prefill: left open, it is
// continued.
func renderMessages(q *messagesReq) string {
	var b strings.Builder
	if q.system != "" || len(q.tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		b.WriteString(q.system)
		if len(q.tools) > 0 {
			if q.system != "" {
				b.WriteString("\n\n")
			}
			var defs []any
			for _, t := range q.tools {
				fn := map[string]any{"name": t.name, "description": t.description}
				if t.schema != nil {
					fn["parameters"] = t.schema
				}
				defs = append(defs, map[string]any{"type": "function", "function": fn})
			}
			b.WriteString(toolsSection(defs))
		}
		b.WriteString("<|im_end|>\n")
	}
	for i, m := range q.messages {
		b.WriteString("<|im_start|>" + m.role + "\n")
		if m.role == "assistant" {
			b.WriteString(assistantText(m.blocks))
		} else {
			var parts []string
			for _, blk := range m.blocks {
				if blk.kind == "tool_result" {
					parts = append(parts, "<tool_response>\n"+blk.text+"\n</tool_response>")
				} else {
					parts = append(parts, blk.text)
				}
			}
			b.WriteString(strings.Join(parts, "\n"))
		}
		if i == len(q.messages)-1 && m.role == "assistant" {
			return b.String() // a prefill: the answer continues it
		}
		b.WriteString("<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}

// toolsSection is the system prompt's tools part in Qwen3's template, each
// definition ({"type": "function", "function": {...}}) as JSON on a line.
func toolsSection(defs []any) string {
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, d := range defs {
		b.WriteString("\n" + pyJSON(d))
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String()
}

// assistantText is an assistant turn as the model wrote it: text as is,
// each tool call in Qwen3's form on a line of its own.
func assistantText(blocks []anthBlock) string {
	var b strings.Builder
	for _, blk := range blocks {
		switch blk.kind {
		case "tool_use":
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(toolCallText(blk.name, blk.input))
		default:
			b.WriteString(blk.text)
		}
	}
	return b.String()
}

// toolCallText is one tool call as Qwen3's template writes it.
func toolCallText(name string, input any) string {
	return "<tool_call>\n{\"name\": " + pyJSON(name) + ", \"arguments\": " + pyJSON(input) + "}\n</tool_call>"
}

// pyJSON encodes v as Python's json.dumps does by default (what the chat
// template's tojson writes): ", " and ": " separators, keys sorted here so
// that the same value always gives the same text, no HTML escaping.
func pyJSON(v any) string {
	var b strings.Builder
	writePyJSON(&b, v)
	return b.String()
}

func writePyJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSON(b, k)
			b.WriteString(": ")
			writePyJSON(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSON(b, e)
		}
		b.WriteByte(']')
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(x) != nil {
			b.WriteString("null")
			return
		}
		b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
}
