package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// fakeWorker streams SGLang events whose text is the cumulative output:
// texts in order, then (unless failAt ≥ 0 cuts it with an error frame
// there) data: [DONE].
func fakeWorker(t *testing.T, texts []string, failAt int) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, text := range texts {
			if i == failAt {
				fmt.Fprint(w, `data: {"error": {"message": "worker exploded", "code": 500}}`+"\n\n")
				return
			}
			fin := "null"
			if i == len(texts)-1 {
				fin = `{"type": "length", "length": 2}`
			}
			b := fmt.Sprintf(`{"text": %q, "output_ids": [1], "meta_info": {"id": "x", "prompt_tokens": 3, "completion_tokens": %d, "cached_tokens": 0, "finish_reason": %s}}`, text, i+1, fin)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func coloGateway(t *testing.T, worker string) string {
	t.Helper()
	g, err := New(Config{Colo: []string{worker}, Health: HealthConfig{Interval: -1}, Retries: -1,
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts := serveGateway(g)
	t.Cleanup(ts.Close)
	return ts.URL
}

// The text "data: [DONE]" inside the generated content is content: the
// stream goes on past it, on /generate and through the OpenAI SDK.
func TestSSEDoneInsideContent(t *testing.T) {
	tricky := "a data: [DONE]\n\nb"
	gw := coloGateway(t, fakeWorker(t, []string{"a ", tricky}, -1))
	a := generate(t, gw, map[string]any{"text": "hi", "stream": true})
	if a.status != http.StatusOK || a.events != 2 || !a.done {
		t.Fatalf("/generate: %+v, want both events and the real [DONE]", a)
	}
	client := openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey("unused"))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.String() != tricky {
		t.Fatalf("SDK stream: %q, %v; want %q", text.String(), err, tricky)
	}
}

// A worker's error frame mid-stream reaches the client as an error: on
// /generate the frame itself and no [DONE]; through the OpenAI SDK a
// stream error naming it, not a normal end.
func TestSSEErrorFrame(t *testing.T) {
	gw := coloGateway(t, fakeWorker(t, []string{"a", "ab", "abc"}, 2))
	a := generate(t, gw, map[string]any{"text": "hi", "stream": true})
	if a.done {
		t.Fatalf("/generate: a stream cut by an error frame ended with [DONE] (%+v)", a)
	}
	client := openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "worker exploded") || text.String() != "ab" {
		t.Fatalf("SDK stream: %q, err %v; want the two deltas and then the worker's error", text.String(), err)
	}
}

// A streamed Messages answer that stays silent (a long prefill) gets
// keep-alive pings between message_start and its first content.
func TestAnthropicKeepAlivePings(t *testing.T) {
	defer func(d time.Duration) { keepAliveEvery = d }(keepAliveEvery)
	keepAliveEvery = 40 * time.Millisecond
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // the prefill
		fmt.Fprint(w, `data: {"text": "hi", "output_ids": [1], "meta_info": {"id": "x", "prompt_tokens": 3, "completion_tokens": 1, "cached_tokens": 0, "finish_reason": {"type": "length", "length": 1}}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer slow.Close()
	gw := coloGateway(t, slow.URL)
	body := `{"model":"m","max_tokens":1,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(gw+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	events := regexp.MustCompile(`(?m)^event: (\S+)`).FindAllStringSubmatch(string(b), -1)
	var names []string
	for _, e := range events {
		names = append(names, e[1])
	}
	pings := 0
	for _, n := range names {
		if n == "content_block_start" {
			break
		}
		if n == "ping" {
			pings++
		}
	}
	if pings < 3 || names[len(names)-1] != "message_stop" {
		t.Fatalf("events %v: want keep-alive pings before the content and a message_stop", names)
	}
}

// TestRelayCopiesHeadersAsAdd: relay's copy of a worker's headers is
// Header.Add's of each value — values appended to a header the gateway set
// already, every value kept, and the client's copy not the worker's slice
// (an Add to it leaves the worker's header as it was).
func TestRelayCopiesHeadersAsAdd(t *testing.T) {
	wh := http.Header{"Content-Type": {"application/json"}, "Vary": {"a", "b"}, "X-Worker": append(make([]string, 0, 4), "w")}
	resp := &http.Response{StatusCode: http.StatusOK, Header: wh, Body: io.NopCloser(strings.NewReader(`{"text": "x"}`))}
	rec := httptest.NewRecorder()
	rec.Header().Set("Vary", "gateway")
	if ok, _ := relay(rec, resp, "colo", "http://w", nil, nil); !ok {
		t.Fatal("relay failed")
	}
	h := rec.Result().Header
	if got := h.Values("Vary"); strings.Join(got, ",") != "gateway,a,b" {
		t.Fatalf("Vary %q, want gateway,a,b", got)
	}
	if h.Get("X-Worker") != "w" || h.Get("Content-Type") != "application/json" || h.Get("X-PDHybrid-Mode") != "colo" || h.Get("X-PDHybrid-Worker") != "http://w" {
		t.Fatalf("headers %v", h)
	}
	rec.Header().Add("X-Worker", "more")
	wh.Add("X-Worker", "other")
	if got := rec.Header().Values("X-Worker"); strings.Join(got, ",") != "w,more" {
		t.Fatalf("the client's header shares the worker's values: %q", got)
	}
}
