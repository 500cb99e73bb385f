package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI's /v1/completions and /v1/chat/completions, streamed and not. A
// request becomes one SGLang /generate (a chat's messages rendered into one
// prompt in the ChatML layout Qwen3 uses, so consecutive turns of a
// conversation share their prefix), dispatched like any other; the worker's
// answer is translated back on the way to the client by an openaiWriter.

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.serveOpenAI(w, r, false)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.serveOpenAI(w, r, true)
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, chat bool) {
	if err := checkContentType(r); err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	in, err := s.readJSON(r)
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkOpenAI(in, chat); err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	body := map[string]any{}
	if chat {
		text, err := renderChatTools(in["messages"], in["tools"]) // openai_tools.go
		if err != nil {
			writeOpenAIError(w, http.StatusBadRequest, err.Error())
			return
		}
		body["text"] = text
	} else {
		switch p := in["prompt"].(type) {
		case string:
			body["text"] = p
		case []any:
			body["input_ids"] = p
		default:
			writeOpenAIError(w, http.StatusBadRequest, "prompt must be a string or a list of token ids")
			return
		}
	}
	maxTokens := json.Number("16") // OpenAI's completions default
	if chat {
		maxTokens = "128"
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if n, ok := in[k].(json.Number); ok {
			maxTokens = n
			break
		}
	}
	stream, _ := in["stream"].(bool)
	stops, err := openaiStops(in["stop"])
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	sp := map[string]any{"max_new_tokens": maxTokens}
	if len(stops) > 0 {
		sp["stop"] = stops
	}
	body["sampling_params"] = sp
	body["stream"] = stream
	id, err := s.identify(r, in)
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	q, err := s.newRequest(body, id)
	if err != nil {
		writeOpenAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	q.key = s.callerKey(r)
	model, _ := in["model"].(string)
	includeUsage := false
	if so, ok := in["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	ow := &openaiWriter{w: w, chat: chat, stream: stream, model: model, includeUsage: includeUsage,
		id: "pdh-" + newRID(), created: time.Now().Unix(), split: outSplitter{stops: stops, plain: !chat}}
	s.serveRequest(r.Context(), ow, q)
	ow.finish()
}

// renderChat lays messages out as ChatML: "<|im_start|>role\ncontent<|im_end|>\n"
// per message, then the assistant's opening.
func renderChat(v any) (string, error) {
	msgs, ok := v.([]any)
	if !ok || len(msgs) == 0 {
		return "", fmt.Errorf("messages must be a non-empty list")
	}
	var b strings.Builder
	for i, m := range msgs {
		mm, ok := m.(map[string]any)
		if !ok {
			return "", fmt.Errorf("messages[%d] is not an object", i)
		}
		role, _ := mm["role"].(string)
		if role == "" {
			return "", fmt.Errorf("messages[%d] has no role", i)
		}
		if role == "tool" || role == "assistant" {
			b.WriteString(renderToolTurn(msgs, i, role, mm)) // openai_tools.go
			continue
		}
		b.WriteString("<|im_start|>" + role + "\n" + contentText(mm["content"]) + "<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String(), nil
}

// contentText flattens a message's content: a string, or a list of parts
// whose text parts are joined.
func contentText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok {
				if t, ok := pm["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	return ""
}

// openaiWriter turns an SGLang /generate answer (JSON, or SSE events each
// carrying the cumulative text) into OpenAI's shape as it streams through.
type openaiWriter struct {
	w            http.ResponseWriter
	chat, stream bool
	includeUsage bool
	model, id    string
	created      int64

	status   int
	header   http.Header
	buf      bytes.Buffer
	sentRole bool
	last     map[string]any // the last answer or event seen
	done     bool
	split    outSplitter // stop sequences and tool calls (openai_tools.go)
	calls    int         // tool calls sent
}

func (o *openaiWriter) Header() http.Header {
	if o.header == nil {
		o.header = http.Header{}
	}
	return o.header
}

func (o *openaiWriter) WriteHeader(status int) {
	o.status = status
	for _, k := range []string{"X-Pdhybrid-Mode", "X-Pdhybrid-Worker"} {
		if v := o.Header().Get(k); v != "" {
			o.w.Header().Set(k, v)
		}
	}
	if o.stream && status == http.StatusOK {
		o.w.Header().Set("Content-Type", "text/event-stream")
		o.w.Header().Set("Cache-Control", "no-cache")
		o.w.WriteHeader(status)
	}
}

func (o *openaiWriter) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.WriteHeader(http.StatusOK)
	}
	o.buf.Write(b)
	if o.stream && o.status == http.StatusOK {
		o.drainEvents()
	}
	return len(b), nil
}

func (o *openaiWriter) Flush() {
	if f, ok := o.w.(http.Flusher); ok && o.stream {
		f.Flush()
	}
}

// drainEvents translates every complete SSE line buffered so far.
func (o *openaiWriter) drainEvents() {
	for {
		line, err := o.buf.ReadBytes('\n')
		if err != nil {
			o.buf.Write(line) // incomplete: wait for the rest
			return
		}
		t := strings.TrimSpace(string(line))
		if !strings.HasPrefix(t, "data: ") {
			continue
		}
		data := t[len("data: "):]
		if data == "[DONE]" {
			o.end()
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if e, ok := ev["error"]; ok {
			// The worker's (or the gateway's) error frame: pass it on in
			// OpenAI's streaming error shape and end the stream without
			// [DONE], so no client takes a cut answer for a whole one.
			msg := fmt.Sprint(e)
			if m, ok := e.(map[string]any); ok {
				msg = fmt.Sprint(m["message"])
			}
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}})
			fmt.Fprintf(o.w, "data: %s\n\n", b)
			o.Flush()
			o.done = true
			continue
		}
		o.last = ev
		text, _ := ev["text"].(string)
		o.segments(text, finishOf(ev))
	}
}

func (o *openaiWriter) chunk(delta string, finish any, usage any) {
	choice := map[string]any{"index": 0, "finish_reason": finish}
	obj := "text_completion"
	if o.chat {
		obj = "chat.completion.chunk"
		d := map[string]any{"content": delta}
		if !o.sentRole {
			d["role"] = "assistant"
			o.sentRole = true
		}
		choice["delta"] = d
	} else {
		choice["text"] = delta
	}
	m := map[string]any{"id": o.id, "object": obj, "created": o.created, "model": o.model, "choices": []any{choice}}
	if usage != nil {
		m["choices"] = []any{}
		m["usage"] = usage
	}
	b, _ := json.Marshal(m)
	fmt.Fprintf(o.w, "data: %s\n\n", b)
	o.Flush()
}

func (o *openaiWriter) end() {
	if o.done {
		return
	}
	o.done = true
	if o.includeUsage && o.last != nil {
		o.chunk("", nil, usageOf(o.last))
	}
	fmt.Fprint(o.w, "data: [DONE]\n\n")
	o.Flush()
}

// finish answers a non-streamed request (or closes a stream cut short).
func (o *openaiWriter) finish() {
	if o.stream && o.status == http.StatusOK {
		o.end()
		return
	}
	if o.status == 0 {
		o.status = http.StatusInternalServerError
	}
	var ans map[string]any
	if json.Unmarshal(o.buf.Bytes(), &ans) != nil || o.status != http.StatusOK {
		msg := strings.TrimSpace(o.buf.String())
		if e, ok := ans["error"].(map[string]any); ok {
			if m, ok := e["message"].(string); ok {
				msg = m
			}
		}
		writeOpenAIError(o.w, o.status, msg)
		return
	}
	choice, obj := o.finalChoice(ans)
	out := map[string]any{"id": o.id, "object": obj, "created": o.created, "model": o.model,
		"choices": []any{choice}, "usage": usageOf(ans)}
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	json.NewEncoder(o.w).Encode(out)
}

// finishOf maps SGLang's finish_reason ({"type": "length"|"stop"|"abort"})
// to OpenAI's; nil while a stream goes on.
func finishOf(ans map[string]any) any {
	mi, _ := ans["meta_info"].(map[string]any)
	fr, _ := mi["finish_reason"].(map[string]any)
	if fr == nil {
		return nil
	}
	switch fr["type"] {
	case "stop":
		return "stop"
	case "abort":
		return "error"
	}
	return "length"
}

func usageOf(ans map[string]any) map[string]any {
	mi, _ := ans["meta_info"].(map[string]any)
	num := func(k string) int64 {
		switch v := mi[k].(type) {
		case float64:
			return int64(v)
		case json.Number:
			n, _ := v.Int64()
			return n
		}
		return 0
	}
	p, c := num("prompt_tokens"), num("completion_tokens")
	return map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
		"prompt_tokens_details": map[string]any{"cached_tokens": num("cached_tokens")}}
}

func writeOpenAIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": openaiErrorType(status), "param": nil, "code": status}})
}

// openaiErrorType is the error type OpenAI's API (and its SDKs' error
// classes) give a status.
func openaiErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable:
		return "service_unavailable_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}
