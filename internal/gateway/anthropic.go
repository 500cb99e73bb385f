package gateway

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
)

// Anthropic's Messages API (/v1/messages, streamed and not, and
// /v1/messages/count_tokens), so that a coding agent speaking it (Claude
// Code, the Anthropic SDKs) can use the gateway. A request becomes one
// SGLang /generate: the system prompt, tools and messages rendered into one
// prompt in the ChatML layout Qwen3's chat template uses (its tool calls
// in <tool_call> tags, tool results in <tool_response> tags), append-only
// across turns — turn N+1's prompt starts with turn N's prompt and its
// answer — so consecutive turns of a session share their prefix. The
// worker's answer goes back as Anthropic's message or named SSE events
// (anthropic_stream.go), tool calls in its text parsed into tool_use
// blocks.

// messagesReq is a checked Messages body.
type messagesReq struct {
	model     string
	maxTokens int64
	system    string
	tools     []anthTool
	messages  []anthMessage
	stops     []string
	stream    bool
	sampling  map[string]any // temperature, top_p, top_k as given
}

type anthTool struct {
	name, description string
	schema            any
}

type anthMessage struct {
	role   string
	blocks []anthBlock
}

// anthBlock is a content block, reduced to what the prompt needs.
type anthBlock struct {
	kind  string // text, tool_use, tool_result, image, document (others are dropped)
	text  string // text; tool_result's content; image/document: a placeholder
	name  string // tool_use
	input any    // tool_use
}

// parseMessages checks a Messages body (decoded by readJSON, numbers as
// json.Number) the way Anthropic's API does, naming the field at fault.
// count is true for count_tokens, which takes no max_tokens.
func parseMessages(in map[string]any, count bool) (*messagesReq, error) {
	q := &messagesReq{sampling: map[string]any{}}
	var ok bool
	if q.model, ok = in["model"].(string); !ok || q.model == "" {
		return nil, badRequest("model: Field required (a model name)")
	}
	if !count {
		n, ok := in["max_tokens"].(json.Number)
		if !ok {
			return nil, badRequest("max_tokens: Field required (an integer ≥ 1)")
		}
		v, err := n.Int64()
		if err != nil || v < 1 || v > 1<<30 {
			return nil, badRequest("max_tokens: %s is not an integer in [1, %d]", n, 1<<30)
		}
		q.maxTokens = v
		if s, ok := in["stream"]; ok && s != nil {
			if q.stream, ok = s.(bool); !ok {
				return nil, badRequest("stream: Input should be a valid boolean")
			}
		}
		if v, ok := in["stop_sequences"]; ok && v != nil {
			list, ok := v.([]any)
			if !ok {
				return nil, badRequest("stop_sequences: Input should be a valid list of strings")
			}
			for i, x := range list {
				s, ok := x.(string)
				if !ok || s == "" {
					return nil, badRequest("stop_sequences.%d: Input should be a non-empty string", i)
				}
				q.stops = append(q.stops, s)
			}
		}
		for _, k := range []string{"temperature", "top_p", "top_k"} {
			if v, ok := in[k]; ok && v != nil {
				if _, ok := v.(json.Number); !ok {
					return nil, badRequest("%s: Input should be a valid number", k)
				}
				q.sampling[k] = v
			}
		}
	}
	if m, ok := in["metadata"]; ok && m != nil {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil, badRequest("metadata: Input should be a valid object")
		}
		if u, ok := mm["user_id"]; ok && u != nil {
			if _, ok := u.(string); !ok {
				return nil, badRequest("metadata.user_id: Input should be a valid string")
			}
		}
	}
	var err error
	if q.system, err = systemText(in["system"]); err != nil {
		return nil, err
	}
	if q.tools, err = parseTools(in["tools"]); err != nil {
		return nil, err
	}
	msgs, ok := in["messages"].([]any)
	if !ok {
		return nil, badRequest("messages: Field required (a non-empty list)")
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages: at least one message is required")
	}
	for i, m := range msgs {
		msg, err := parseMessage(m, i)
		if err != nil {
			return nil, err
		}
		q.messages = append(q.messages, msg)
	}
	return q, nil
}

// billingHeader starts the line Claude Code puts first in its system
// prompt ("x-anthropic-billing-header: cc_version=…; cch=…;"): a nonce
// that changes on every request and means nothing to the model. Left in,
// it would make every turn's prompt differ from its first bytes and no
// turn would share a prefix with the last; it is dropped.
const billingHeader = "x-anthropic-billing-header:"

// dropBillingHeader removes billingHeader lines from system text.
func dropBillingHeader(s string) string {
	if !strings.Contains(s, billingHeader) {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, billingHeader) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// systemText flattens system: a string, or a list of text blocks joined
// with blank lines (Claude Code's billing header left out).
func systemText(v any) (string, error) {
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		return dropBillingHeader(s), nil
	case []any:
		var parts []string
		for i, b := range s {
			bm, ok := b.(map[string]any)
			if !ok || bm["type"] != "text" {
				return "", badRequest("system.%d: Input should be a text block ({\"type\": \"text\", \"text\": ...})", i)
			}
			t, ok := bm["text"].(string)
			if !ok {
				return "", badRequest("system.%d.text: Field required", i)
			}
			if t = dropBillingHeader(t); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n\n"), nil
	}
	return "", badRequest("system: Input should be a string or a list of text blocks")
}

func parseTools(v any) ([]anthTool, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("tools: Input should be a valid list")
	}
	var out []anthTool
	for i, t := range list {
		tm, ok := t.(map[string]any)
		if !ok {
			return nil, badRequest("tools.%d: Input should be a valid object", i)
		}
		name, ok := tm["name"].(string)
		if !ok || name == "" {
			return nil, badRequest("tools.%d.name: Field required", i)
		}
		desc, _ := tm["description"].(string)
		out = append(out, anthTool{name: name, description: desc, schema: tm["input_schema"]})
	}
	return out, nil
}

func parseMessage(m any, i int) (anthMessage, error) {
	mm, ok := m.(map[string]any)
	if !ok {
		return anthMessage{}, badRequest("messages.%d: Input should be a valid object", i)
	}
	role, _ := mm["role"].(string)
	if role != "user" && role != "assistant" {
		return anthMessage{}, badRequest("messages.%d.role: Input should be 'user' or 'assistant'", i)
	}
	msg := anthMessage{role: role}
	switch c := mm["content"].(type) {
	case string:
		msg.blocks = []anthBlock{{kind: "text", text: c}}
	case []any:
		for j, b := range c {
			blk, keep, err := parseBlock(b, fmt.Sprintf("messages.%d.content.%d", i, j), role)
			if err != nil {
				return anthMessage{}, err
			}
			if keep {
				msg.blocks = append(msg.blocks, blk)
			}
		}
	default:
		return anthMessage{}, badRequest("messages.%d.content: Input should be a string or a list of content blocks", i)
	}
	return msg, nil
}

// parseBlock reads one content block; keep is false for blocks the prompt
// leaves out (thinking: Anthropic drops earlier turns' thinking too).
func parseBlock(b any, at, role string) (anthBlock, bool, error) {
	bm, ok := b.(map[string]any)
	if !ok {
		return anthBlock{}, false, badRequest("%s: Input should be a valid content block", at)
	}
	kind, _ := bm["type"].(string)
	switch kind {
	case "text":
		t, ok := bm["text"].(string)
		if !ok {
			return anthBlock{}, false, badRequest("%s.text: Field required", at)
		}
		return anthBlock{kind: kind, text: t}, true, nil
	case "tool_use":
		if role != "assistant" {
			return anthBlock{}, false, badRequest("%s: tool_use blocks belong in assistant messages", at)
		}
		name, ok := bm["name"].(string)
		if !ok || name == "" {
			return anthBlock{}, false, badRequest("%s.name: Field required", at)
		}
		input := bm["input"]
		if _, ok := input.(map[string]any); !ok {
			return anthBlock{}, false, badRequest("%s.input: Input should be a valid object", at)
		}
		return anthBlock{kind: kind, name: name, input: input}, true, nil
	case "tool_result":
		if role != "user" {
			return anthBlock{}, false, badRequest("%s: tool_result blocks belong in user messages", at)
		}
		if _, ok := bm["tool_use_id"].(string); !ok {
			return anthBlock{}, false, badRequest("%s.tool_use_id: Field required", at)
		}
		text, err := toolResultText(bm["content"], at+".content")
		if err != nil {
			return anthBlock{}, false, err
		}
		return anthBlock{kind: kind, text: text}, true, nil
	case "image", "document":
		return anthBlock{kind: kind, text: mediaPlaceholder(kind, bm["source"])}, true, nil
	case "thinking", "redacted_thinking":
		return anthBlock{}, false, nil
	case "":
		return anthBlock{}, false, badRequest("%s.type: Field required", at)
	}
	return anthBlock{}, false, badRequest("%s.type: unsupported content block type %q (want text, image, document, tool_use, tool_result or thinking)", at, kind)
}

// toolResultText flattens a tool result's content: a string, or blocks
// whose text is joined (images become placeholders).
func toolResultText(v any, at string) (string, error) {
	switch c := v.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var parts []string
		for j, b := range c {
			blk, keep, err := parseBlock(b, fmt.Sprintf("%s.%d", at, j), "user")
			if err != nil {
				return "", err
			}
			if keep && (blk.kind == "text" || blk.kind == "image" || blk.kind == "document") {
				parts = append(parts, blk.text)
			}
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", badRequest("%s: Input should be a string or a list of content blocks", at)
}

// mediaPlaceholder stands in for an image or document (the workers take
// text): a hash of its source, so different media give different prompts
// and the same media the same prefix.
func mediaPlaceholder(kind string, src any) string {
	h := fnv.New64a()
	h.Write([]byte(pyJSON(src)))
	return fmt.Sprintf("[%s %016x]", kind, h.Sum64())
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readMessages(w, r)
	if !ok {
		return
	}
	q, err := parseMessages(in, false)
	if err != nil {
		writeAnthropicError(w, err)
		return
	}
	id, err := s.identify(r, in)
	if err != nil {
		writeAnthropicError(w, badRequest("%v", err))
		return
	}
	sp := map[string]any{"max_new_tokens": q.maxTokens}
	for k, v := range q.sampling {
		sp[k] = v
	}
	if len(q.stops) > 0 {
		stops := make([]any, len(q.stops))
		for i, s := range q.stops {
			stops[i] = s
		}
		sp["stop"] = stops
	}
	req, err := s.newRequest(map[string]any{"text": renderMessages(q), "sampling_params": sp, "stream": q.stream}, id)
	if err != nil {
		writeAnthropicError(w, badRequest("%v", err))
		return
	}
	req.key = s.callerKey(r)
	aw := newAnthropicWriter(w, q)
	aw.estimate = req.tokens
	if q.stream {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			aw.keepAlive(stop)
		}()
		defer func() { close(stop); <-done }()
	}
	s.serveRequest(r.Context(), aw, req)
	aw.finish()
}

// handleCountTokens answers /v1/messages/count_tokens: the rendered
// prompt's tokens counted as the router counts them (4 bytes a token, the
// emulated worker's tokenizer; a real tokenizer gives somewhat different
// counts).
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readMessages(w, r)
	if !ok {
		return
	}
	q, err := parseMessages(in, true)
	if err != nil {
		writeAnthropicError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	ids, exact, err := s.promptTokens(renderMessages(q))
	if err != nil {
		writeError(w, http.StatusBadRequest, "tokenizing the prompt: "+err.Error())
		return
	}
	// Without --tokenizer the count is the router's estimate: say so.
	count := "estimate"
	if exact {
		count = "tokenizer"
	}
	w.Header().Set("X-Pdhybrid-Token-Count", count)
	json.NewEncoder(w).Encode(map[string]any{"input_tokens": len(ids)})
}
