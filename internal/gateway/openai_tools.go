package gateway

import (
	"bytes"
	"encoding/json"
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
