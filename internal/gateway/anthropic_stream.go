package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The worker's answer on its way back as Anthropic's Messages answer: one
// message object, or the named SSE events (message_start, ping, then per
// content block content_block_start, content_block_delta…,
// content_block_stop, then message_delta with the stop reason and the
// whole usage, and message_stop; an error event if the worker fails
// mid-stream). The worker's text is cut at the first stop sequence and
// split into text and tool_use blocks (Qwen3's <tool_call> tags) by an
// outSplitter, which holds back what could still turn into a tag or a
// stop sequence.

const toolOpen, toolClose = "<tool_call>", "</tool_call>"

// segment is a piece of the answer ready to go out.
type segment struct {
	tool  bool
	text  string          // text, or the tool call's name
	input json.RawMessage // a tool call's arguments
}

// outSplitter turns the worker's cumulative text into segments.
type outSplitter struct {
	stops   []string
	text    string // the answer so far, cut at a stop sequence
	done    int    // bytes of text already turned into segments
	stopped string // the stop sequence that ended it
	tools   int    // tool calls parsed
	plain   bool   // no tool calls to look for (a text completion)
}

// update takes the worker's text so far (SGLang streams it cumulative).
func (o *outSplitter) update(full string) {
	if o.stopped != "" {
		return
	}
	o.text = full
	cut := -1
	for _, s := range o.stops {
		if i := strings.Index(full, s); i >= 0 && (cut < 0 || i < cut) {
			cut, o.stopped = i, s
		}
	}
	if cut >= 0 {
		o.text = full[:cut]
	}
}

// next returns the segments that are certain now; final flushes the rest
// (an unclosed tool call goes out as text).
func (o *outSplitter) next(final bool) []segment {
	final = final || o.stopped != ""
	var out []segment
	for {
		rest := o.text[o.done:]
		k := strings.Index(rest, toolOpen)
		if o.plain {
			k = -1
		}
		if k < 0 {
			emit := rest
			if !final {
				emit = rest[:len(rest)-o.holdBack(rest)]
			}
			if emit != "" {
				out = append(out, segment{text: emit})
			}
			o.done += len(emit)
			return out
		}
		before := strings.TrimSuffix(rest[:k], "\n") // the call's own line break
		end := strings.Index(rest[k:], toolClose)
		if end < 0 {
			if final {
				out = append(out, segment{text: rest})
				o.done += len(rest)
				return out
			}
			if before != "" {
				out = append(out, segment{text: before})
			}
			o.done += len(before) // wait for the call to close (or the end)
			return out
		}
		body := rest[k+len(toolOpen) : k+end]
		whole := len(rest[:k]) + end + len(toolClose)
		name, input, ok := parseToolCall(body)
		if !ok {
			out = append(out, segment{text: rest[:whole]})
			o.done += whole
			continue
		}
		if before != "" {
			out = append(out, segment{text: before})
		}
		out = append(out, segment{tool: true, text: name, input: input})
		o.tools++
		o.done += whole
	}
}

// holdBack is how many trailing bytes of s could still become a tool-call
// tag (with the line break before it) or a stop sequence.
func (o *outSplitter) holdBack(s string) int {
	n := 0
	tags := []string{"\n" + toolOpen, toolOpen}
	if o.plain {
		tags = nil
	}
	for _, p := range append(tags, o.stops...) {
		for l := min(len(p)-1, len(s)); l > n; l-- {
			if strings.HasSuffix(s, p[:l]) {
				n = l
				break
			}
		}
	}
	return n
}

// parseToolCall reads {"name": ..., "arguments": {...}} (arguments may
// also come as a JSON string, as some models write them).
func parseToolCall(body string) (string, json.RawMessage, bool) {
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &call) != nil || call.Name == "" {
		return "", nil, false
	}
	args := bytes.TrimSpace(call.Arguments)
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = []byte(s)
	}
	var obj map[string]any
	if len(args) == 0 {
		args = []byte("{}")
	} else if json.Unmarshal(args, &obj) != nil || obj == nil {
		return "", nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil {
		return "", nil, false
	}
	return call.Name, buf.Bytes(), true
}

// anthropicWriter is the http.ResponseWriter the gateway's dispatch writes
// the worker's answer to; it writes Anthropic's shapes to the client.
type anthropicWriter struct {
	w      http.ResponseWriter
	stream bool
	model  string
	id     string
	split  outSplitter

	status   int
	header   http.Header
	buf      bytes.Buffer
	last     map[string]any // the last answer or event seen
	started  bool           // message_start sent
	open     int            // index of the open content block, −1 none
	openKnd  string         // "text" or "tool_use"
	blocks   int            // content blocks started
	content  []any          // the blocks, for a non-streamed answer
	ended    bool
	estimate int // the prompt's tokens as the router counts them

	// mu serialises the relay's writes with the keep-alive pings; lastOut
	// is when an event last went out.
	mu      sync.Mutex
	lastOut time.Time
}

// keepAliveEvery is how long a streamed answer may stay silent (a long
// prefill, a queue) before a ping goes out, as Anthropic's API sends them,
// so no proxy or client drops the connection as idle.
var keepAliveEvery = 10 * time.Second

// keepAlive sends a ping whenever the stream has been silent for
// keepAliveEvery, from message_start until the end or until stop closes.
func (a *anthropicWriter) keepAlive(stop <-chan struct{}) {
	t := time.NewTicker(keepAliveEvery / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		a.mu.Lock()
		if a.started && !a.ended && time.Since(a.lastOut) >= keepAliveEvery {
			a.event("ping", map[string]any{"type": "ping"})
		}
		a.mu.Unlock()
	}
}

func newAnthropicWriter(w http.ResponseWriter, q *messagesReq) *anthropicWriter {
	return &anthropicWriter{w: w, stream: q.stream, model: q.model, id: "msg_" + randHex(12), open: -1,
		split: outSplitter{stops: q.stops}}
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

func (a *anthropicWriter) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *anthropicWriter) WriteHeader(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writeHeader(status)
}

func (a *anthropicWriter) writeHeader(status int) {
	if a.status != 0 {
		return
	}
	a.status = status
	for _, k := range []string{"X-Pdhybrid-Mode", "X-Pdhybrid-Worker"} {
		if v := a.Header().Get(k); v != "" {
			a.w.Header().Set(k, v)
		}
	}
	a.w.Header().Set("Request-Id", a.id)
	if a.stream && status == http.StatusOK {
		a.w.Header().Set("Content-Type", "text/event-stream")
		a.w.Header().Set("Cache-Control", "no-cache")
		a.w.WriteHeader(status)
		a.start() // the client hears at once, not after the prefill
	}
}

func (a *anthropicWriter) Write(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status == 0 {
		a.writeHeader(http.StatusOK)
	}
	a.buf.Write(b)
	if a.stream && a.status == http.StatusOK {
		a.drain()
	}
	return len(b), nil
}

func (a *anthropicWriter) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flush()
}

func (a *anthropicWriter) flush() {
	if f, ok := a.w.(http.Flusher); ok && a.stream {
		f.Flush()
	}
}

// drain translates every complete SSE line of the worker's stream.
func (a *anthropicWriter) drain() {
	for {
		line, err := a.buf.ReadBytes('\n')
		if err != nil {
			a.buf.Write(line) // incomplete: wait for the rest
			return
		}
		t := strings.TrimSpace(string(line))
		if !strings.HasPrefix(t, "data: ") || a.ended {
			continue
		}
		data := t[len("data: "):]
		if data == "[DONE]" {
			a.end()
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if e, ok := ev["error"].(map[string]any); ok {
			msg, _ := e["message"].(string)
			a.streamError(http.StatusInternalServerError, "worker error: "+msg)
			continue
		}
		a.last = ev
		if !a.started {
			a.start()
		}
		text, _ := ev["text"].(string)
		a.split.update(text)
		a.emit(a.split.next(false))
	}
}

func (a *anthropicWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(a.w, "event: %s\ndata: %s\n\n", name, b)
	a.lastOut = time.Now()
	a.flush()
}

// start sends message_start. The prompt's tokens are the router's count
// until the worker's (message_delta carries the worker's at the end).
func (a *anthropicWriter) start() {
	a.started = true
	usage := anthropicUsage(a.last)
	if a.last == nil {
		usage["input_tokens"] = a.estimate
	}
	a.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	a.event("ping", map[string]any{"type": "ping"})
}

// emit sends segments as content blocks (streamed) or keeps them for the
// message (not).
func (a *anthropicWriter) emit(segs []segment) {
	for _, s := range segs {
		if !a.stream {
			a.content = appendBlock(a.content, s)
			continue
		}
		if s.tool {
			a.closeBlock()
			a.event("content_block_start", map[string]any{"type": "content_block_start", "index": a.blocks,
				"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + randHex(12), "name": s.text, "input": map[string]any{}}})
			a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.blocks,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(s.input)}})
			a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": a.blocks})
			a.blocks++
			continue
		}
		if a.open < 0 {
			a.open = a.blocks
			a.blocks++
			a.event("content_block_start", map[string]any{"type": "content_block_start", "index": a.open,
				"content_block": map[string]any{"type": "text", "text": ""}})
		}
		a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.open,
			"delta": map[string]any{"type": "text_delta", "text": s.text}})
	}
}

func appendBlock(content []any, s segment) []any {
	if s.tool {
		return append(content, map[string]any{"type": "tool_use", "id": "toolu_" + randHex(12), "name": s.text, "input": s.input})
	}
	if n := len(content); n > 0 {
		if b, ok := content[n-1].(map[string]any); ok && b["type"] == "text" {
			b["text"] = b["text"].(string) + s.text
			return content
		}
	}
	return append(content, map[string]any{"type": "text", "text": s.text})
}

func (a *anthropicWriter) closeBlock() {
	if a.open >= 0 {
		a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": a.open})
		a.open = -1
	}
}

// stopReason is Anthropic's stop_reason and stop_sequence for the answer.
func (a *anthropicWriter) stopReason() (string, any) {
	switch {
	case a.split.tools > 0:
		return "tool_use", nil
	case a.split.stopped != "":
		return "stop_sequence", a.split.stopped
	}
	mi, _ := a.last["meta_info"].(map[string]any)
	fr, _ := mi["finish_reason"].(map[string]any)
	if fr["type"] == "stop" {
		if m, ok := fr["matched"].(string); ok && m != "" {
			return "stop_sequence", m // the worker matched one itself
		}
		return "end_turn", nil
	}
	return "max_tokens", nil
}

// end closes a stream: the last segments, the open block, the stop reason
// and the final usage (a PD answer's cached tokens arrive with it).
func (a *anthropicWriter) end() {
	if a.ended {
		return
	}
	if !a.started {
		a.start()
	}
	a.emit(a.split.next(true))
	a.closeBlock()
	a.ended = true
	reason, seq := a.stopReason()
	a.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": anthropicUsage(a.last)})
	a.event("message_stop", map[string]any{"type": "message_stop"})
}

func (a *anthropicWriter) streamError(status int, msg string) {
	a.ended = true
	b, _ := anthropicErrorBody(status, msg)
	fmt.Fprintf(a.w, "event: error\ndata: %s\n\n", b)
	a.flush()
}

// finish answers a non-streamed request, or closes a stream cut short.
func (a *anthropicWriter) finish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status == 0 {
		a.status = http.StatusInternalServerError
	}
	if a.stream && a.status == http.StatusOK {
		a.drain()
		if !a.ended {
			a.streamError(http.StatusInternalServerError, "the worker's stream ended before its answer finished")
		}
		return
	}
	var ans map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.buf.Bytes()))
	dec.UseNumber()
	if dec.Decode(&ans) != nil || a.status != http.StatusOK || ans["error"] != nil {
		msg := strings.TrimSpace(a.buf.String())
		if e, ok := ans["error"].(map[string]any); ok {
			if m, ok := e["message"].(string); ok {
				msg = m
			}
		} else if m, ok := ans["message"].(string); ok {
			msg = m
		}
		status := a.status
		if status == http.StatusOK {
			status = http.StatusInternalServerError
		}
		b, code := anthropicErrorBody(status, msg)
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(code)
		a.w.Write(append(b, '\n'))
		return
	}
	a.last = ans
	text, _ := ans["text"].(string)
	a.split.update(text)
	a.emit(a.split.next(true))
	reason, seq := a.stopReason()
	if a.content == nil {
		a.content = []any{}
	}
	out := map[string]any{"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": a.content,
		"stop_reason": reason, "stop_sequence": seq, "usage": anthropicUsage(ans)}
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(http.StatusOK)
	json.NewEncoder(a.w).Encode(out)
}

// anthropicUsage reads SGLang's meta_info as Anthropic counts: the prompt
// split into what the worker found cached (cache_read_input_tokens) and
// the rest (input_tokens).
func anthropicUsage(ans map[string]any) map[string]any {
	u := usageOf(ans)
	p, c := u["prompt_tokens"].(int64), u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(int64)
	return map[string]any{"input_tokens": max(p-c, 0), "output_tokens": u["completion_tokens"],
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": c}
}
