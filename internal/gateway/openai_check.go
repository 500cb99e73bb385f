package gateway

// OpenAI requests checked as vLLM's OpenAI frontend checks them (its
// pydantic models and SamplingParams), before any worker sees them: types,
// ranges, roles, and the fields the gateway cannot honour refused with a
// message instead of silently ignored.

import (
	"encoding/json"
	"fmt"
)

// openaiRoles are the chat roles vLLM's chat template renderer takes.
var openaiRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// numRange is a sampling parameter's valid range (inclusive unless open).
type numRange struct {
	name    string
	lo, hi  float64
	openLo  bool
	integer bool
}

var openaiNumbers = []numRange{
	{name: "temperature", lo: 0, hi: 2},
	{name: "top_p", lo: 0, hi: 1, openLo: true},
	{name: "presence_penalty", lo: -2, hi: 2},
	{name: "frequency_penalty", lo: -2, hi: 2},
	{name: "repetition_penalty", lo: 0, hi: 1e9, openLo: true},
	{name: "min_p", lo: 0, hi: 1},
	{name: "top_k", lo: -1, hi: 1 << 30, integer: true},
	{name: "seed", lo: -(1 << 62), hi: 1 << 62, integer: true},
}

// checkOpenAI refuses an OpenAI body vLLM would refuse, or one asking for
// what the gateway does not do (n > 1, logprobs, echo, best_of, suffix,
// logit_bias), naming the field.
func checkOpenAI(in map[string]any, chat bool) error {
	if m, ok := in["model"].(string); !ok || m == "" {
		return fmt.Errorf("model: required, a model name (GET /v1/models lists them)")
	}
	if chat {
		if err := checkChatMessages(in["messages"]); err != nil {
			return err
		}
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := in[k]; ok && v != nil {
			if _, err := boundedInt(k, v, 1, maxNewTokensCap); err != nil {
				return err
			}
		}
	}
	if v, ok := in["n"]; ok && v != nil {
		n, err := boundedInt("n", v, 1, 128)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("n: %d choices asked; this gateway returns one choice per request (n must be 1)", n)
		}
	}
	for _, k := range []string{"stream", "echo"} {
		if v, ok := in[k]; ok && v != nil {
			if _, ok := v.(bool); !ok {
				return fmt.Errorf("%s: want a boolean, got %s", k, jsonText(v))
			}
		}
	}
	if v, ok := in["stream_options"]; ok && v != nil {
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("stream_options: want an object, got %s", jsonText(v))
		}
		if s, _ := in["stream"].(bool); !s {
			return fmt.Errorf("stream_options: only allowed with stream true")
		}
	}
	for _, r := range openaiNumbers {
		if v, ok := in[r.name]; ok && v != nil {
			if err := r.check(v); err != nil {
				return err
			}
		}
	}
	if v, ok := in["user"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return fmt.Errorf("user: want a string, got %s", jsonText(v))
		}
	}
	return unsupportedOpenAI(in)
}

func (r numRange) check(v any) error {
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("%s: want a number, got %s", r.name, jsonText(v))
	}
	if r.integer {
		_, err := boundedInt(r.name, v, int64(r.lo), int64(r.hi))
		return err
	}
	x, err := n.Float64()
	if err != nil || x > r.hi || x < r.lo || r.openLo && x == r.lo {
		lb := "["
		if r.openLo {
			lb = "("
		}
		return fmt.Errorf("%s: want a number in %s%g, %g], got %s", r.name, lb, r.lo, r.hi, n)
	}
	return nil
}

// unsupportedOpenAI refuses the options the gateway would otherwise drop:
// a client asking for log probabilities or several candidates must hear
// that it will not get them.
func unsupportedOpenAI(in map[string]any) error {
	for _, k := range []string{"logprobs", "top_logprobs", "best_of", "suffix", "logit_bias", "echo", "prompt_logprobs"} {
		v, ok := in[k]
		if !ok || v == nil || v == false {
			continue
		}
		if n, ok := v.(json.Number); ok && (n == "0" || k == "best_of" && n == "1") {
			continue
		}
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			continue
		}
		if s, ok := v.(string); ok && s == "" {
			continue
		}
		return fmt.Errorf("%s: not supported by this gateway", k)
	}
	return nil
}

// checkChatMessages refuses a message list vLLM's chat request model
// refuses: not a non-empty list, a message that is not an object, an
// unknown role, a content that is neither a string, a list of parts nor
// null.
func checkChatMessages(v any) error {
	msgs, ok := v.([]any)
	if !ok || len(msgs) == 0 {
		return fmt.Errorf("messages: want a non-empty list of messages")
	}
	for i, m := range msgs {
		mm, ok := m.(map[string]any)
		if !ok {
			return fmt.Errorf("messages[%d]: want an object, got %s", i, jsonText(m))
		}
		role, ok := mm["role"].(string)
		if !ok || !openaiRoles[role] {
			return fmt.Errorf("messages[%d].role: want one of system, developer, user, assistant, tool, function; got %s", i, jsonText(mm["role"]))
		}
		switch c := mm["content"].(type) {
		case nil:
			if role != "assistant" { // an assistant's may be null beside tool_calls
				return fmt.Errorf("messages[%d].content: required for a %s message", i, role)
			}
		case string:
		case []any:
			for j, p := range c {
				pm, ok := p.(map[string]any)
				if !ok {
					return fmt.Errorf("messages[%d].content[%d]: want a content part object, got %s", i, j, jsonText(p))
				}
				if t, ok := pm["type"].(string); !ok || t == "" {
					return fmt.Errorf("messages[%d].content[%d].type: required", i, j)
				}
			}
		default:
			return fmt.Errorf("messages[%d].content: want a string or a list of content parts, got %s", i, jsonText(c))
		}
	}
	return nil
}
