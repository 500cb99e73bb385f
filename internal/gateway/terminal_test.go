package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// rawWorker answers /generate with raw HTTP it writes itself (so it can
// cut its connection mid-answer): the response head for a stream or a
// JSON answer, then body, then (cut) the connection closed with no end.
func rawWorker(t *testing.T, stream bool, body string, cut bool) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			w.WriteHeader(http.StatusOK)
			return
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		// Connection: close: the connection ends with the answer, so the
		// gateway must not reuse it for its next request.
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", ct, len(body), body)
		if !cut {
			fmt.Fprint(bw, "0\r\n\r\n")
		}
		bw.Flush()
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func sglEvent(text, finish string) string {
	return fmt.Sprintf(`data: {"text": %q, "output_ids": [1], "meta_info": {"id": "x", "prompt_tokens": 3, "completion_tokens": 1, "cached_tokens": 0, "finish_reason": %s}}`+"\n\n", text, finish)
}

// The three APIs' streaming requests, and how each marks its stream's end:
// its success terminal and its error terminal.
var streamAPIs = []struct {
	name, path, body, done, failed string
}{
	{"generate", "/generate", `{"text": "hi", "stream": true}`, "data: [DONE]", `data: {"error"`},
	{"openai", "/v1/chat/completions", `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`, "data: [DONE]", `data: {"error"`},
	{"anthropic", "/v1/messages", `{"model": "m", "max_tokens": 8, "stream": true, "messages": [{"role": "user", "content": "hi"}]}`, "event: message_stop", "event: error"},
}

// terminals counts a stream's success and error terminal events.
func terminals(t *testing.T, u, body, done, failed string) (status, ok, errs int, text string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		b.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, done):
			ok++
		case strings.HasPrefix(line, failed):
			errs++
		}
	}
	return resp.StatusCode, ok, errs, b.String()
}

// A worker whose stream ends in [DONE] and whose connection is then cut
// (P died after D's last token, say) gives the client one terminal event,
// the success one, on every API: never [DONE] and then an error frame.
func TestStreamEndsOnceAfterDoneThenCut(t *testing.T) {
	gw := coloGateway(t, rawWorker(t, true, sglEvent("a", "null")+sglEvent("ab", `{"type": "length", "length": 2}`)+"data: [DONE]\n\n", true))
	for _, api := range streamAPIs {
		status, ok, errs, text := terminals(t, gw+api.path, api.body, api.done, api.failed)
		if status != http.StatusOK || ok != 1 || errs != 0 {
			t.Errorf("%s: status %d, %d success and %d error terminals, want 200 and one success terminal only:\n%s", api.name, status, ok, errs, text)
		}
	}
}

// A stream the worker aborts after its first token (SGLang's finish_reason
// abort, then [DONE]) ends in one error terminal on every API: no success
// terminal after it, no finish that looks like an answer.
func TestStreamAbortEndsInOneError(t *testing.T) {
	gw := coloGateway(t, rawWorker(t, true, sglEvent("a", "null")+sglEvent("a", `{"type": "abort", "message": "KV transfer failed"}`)+"data: [DONE]\n\n", false))
	for _, api := range streamAPIs {
		status, ok, errs, text := terminals(t, gw+api.path, api.body, api.done, api.failed)
		if status != http.StatusOK || ok != 0 || errs != 1 {
			t.Errorf("%s: status %d, %d success and %d error terminals, want one error terminal only:\n%s", api.name, status, ok, errs, text)
		}
		if strings.Contains(text, `"abort"`) || strings.Contains(text, "end_turn") {
			t.Errorf("%s: the abort reached the client as a finish:\n%s", api.name, text)
		}
	}
}

// A stream the worker ends without [DONE] (its stream closed cleanly but
// unfinished) ends in an error terminal, not silently.
func TestStreamWithoutDoneEndsInError(t *testing.T) {
	gw := coloGateway(t, rawWorker(t, true, sglEvent("a", "null"), false))
	status, ok, errs, text := terminals(t, gw+"/generate", streamAPIs[0].body, "data: [DONE]", `data: {"error"`)
	if status != http.StatusOK || ok != 0 || errs != 1 {
		t.Errorf("status %d, %d success and %d error terminals, want one error terminal:\n%s", status, ok, errs, text)
	}
}

// A non-streamed answer the worker aborted is a failure in each API's
// shape, never HTTP 200 with finish_reason abort.
func TestAbortedAnswerIsNeverOK(t *testing.T) {
	ans := `{"text": "", "output_ids": [], "meta_info": {"id": "x", "prompt_tokens": 3, "completion_tokens": 0, "cached_tokens": 0, "finish_reason": {"type": "abort", "message": "KV transfer failed"}}}`
	gw := coloGateway(t, rawWorker(t, false, ans, false))
	for _, c := range []struct {
		path, body string
		status     int
		shape      string
	}{
		{"/generate", `{"text": "hi"}`, http.StatusBadGateway, `"code":502`},
		{"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`, http.StatusBadGateway, `"type":"server_error"`},
		// Anthropic's API has no 502: its server errors are 500 api_error.
		{"/v1/messages", `{"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}`, http.StatusInternalServerError, `"type":"api_error"`},
	} {
		status, b, _ := postRaw(t, gw+c.path, "application/json", c.body)
		if status != c.status || !strings.Contains(string(b), c.shape) || strings.Contains(string(b), `"abort"`) {
			t.Errorf("%s: %d %s, want %d with %s", c.path, status, b, c.status, c.shape)
		}
	}
}

// The relay passes a stream through byte for byte however the worker's
// reads split it (one byte at a time, or all at once), and the recorder
// finds the last data event in a write of several.
func TestRelayEventsSplitReads(t *testing.T) {
	stream := sglEvent("a", "null") + ": a comment\n\n" + sglEvent("ab", `{"type": "length", "length": 2}`) + "data: [DONE]\n\n"
	for _, split := range []bool{true, false} {
		var r io.Reader = strings.NewReader(stream)
		if split {
			r = iotest.OneByteReader(r)
		}
		rec := httptest.NewRecorder()
		ok := relayEvents(rec, &http.Response{Body: io.NopCloser(r)}, nil)
		if !ok || rec.Body.String() != stream {
			t.Errorf("split %v: ok %v, relayed %q, want the stream as sent", split, ok, rec.Body.String())
		}
	}
	if got := string(lastDataEvent([]byte(stream))); !strings.Contains(got, `"ab"`) {
		t.Errorf("lastDataEvent = %q, want the second event's object", got)
	}
	if got := lastDataEvent([]byte("data: [DONE]\n\n")); got != nil {
		t.Errorf("lastDataEvent of [DONE] = %q, want none", got)
	}
}
