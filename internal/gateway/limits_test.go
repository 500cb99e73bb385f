package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// errorOf reads a JSON error answer's message.
func errorOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("%d answer %q is not a JSON error", resp.StatusCode, b)
	}
	return e.Error.Message
}

// A body over the cap is 413 with a JSON error naming the limit, whether
// its length is declared or it comes chunked, on every serving endpoint;
// headers over the cap are 431 (the HTTP server's); a body within the
// cap is served.
func TestLimitsBodyAndHeaders(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.MaxBodyBytes, cfg.MaxHeaderBytes, cfg.LoadPoll = 4096, 4096, -1
	gw, _ := start(t, cfg)
	big, _ := json.Marshal(map[string]any{"input_ids": ids(1, 2000)})
	for _, tc := range []struct {
		path    string
		chunked bool
	}{{"/generate", false}, {"/generate", true}, {"/v1/completions", false}, {"/v1/chat/completions", true}} {
		var body io.Reader = bytes.NewReader(big)
		if tc.chunked {
			body = io.MultiReader(bytes.NewReader(big)) // no length known: sent chunked
		}
		resp, err := http.Post(gw.URL+tc.path, "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		msg := errorOf(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "4096 bytes") {
			t.Errorf("%s (chunked %v) with %d bytes: %d %q, want 413 naming the limit", tc.path, tc.chunked, len(big), resp.StatusCode, msg)
		}
	}
	if a := generate(t, gw.URL, map[string]any{"input_ids": ids(1, 100), "sampling_params": map[string]any{"max_new_tokens": 2}}); a.status != http.StatusOK {
		t.Errorf("a small body: %+v", a)
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/generate", strings.NewReader(`{"text":"x"}`))
	req.Header.Set("X-Padding", strings.Repeat("a", 16<<10)) // Go allows the cap plus 4 KiB of slack
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers over a 4 KiB cap: %d, want 431", resp.StatusCode)
	}
	fams := scrape(t, gw.URL)
	if got := value(fams, "pdhybrid_rejected_requests_total", map[string]string{"reason": "body_too_large"}); got != 4 {
		t.Errorf("body_too_large rejections %v, want 4", got)
	}
}

// A client at its cap of requests in flight is answered 429 with
// Retry-After; another client (by the configured header) is not, and the
// first is served again once its request ends.
func TestLimitsPerClient(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.MaxClientConcurrency, cfg.ClientHeader, cfg.LoadPoll = 1, "X-Api-Key", -1
	gw, _ := start(t, cfg)
	short := map[string]any{"input_ids": ids(1, 50), "sampling_params": map[string]any{"max_new_tokens": 2}}
	// Long enough to outlast the checks below on a loaded machine (at the
	// emulator's speed-up, 3,000 tokens ended within them once); it is
	// cut short by closing it, not read to the end.
	long := post(t, gw.URL+"/generate", map[string]any{"input_ids": ids(1, 50), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 30000}}, map[string]string{"X-Api-Key": "alice"})
	defer long.Body.Close()
	firstLine(t, long)
	for _, tc := range []struct {
		key  string
		want int
	}{{"alice", http.StatusTooManyRequests}, {"bob", http.StatusOK}, {"", http.StatusOK}} {
		resp := post(t, gw.URL+"/generate", short, map[string]string{"X-Api-Key": tc.key})
		if resp.StatusCode != tc.want {
			t.Errorf("client %q while alice streams: %d, want %d", tc.key, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusTooManyRequests {
			if ra := resp.Header.Get("Retry-After"); ra != "1" {
				t.Errorf("429 Retry-After %q, want 1", ra)
			}
			if msg := errorOf(t, resp); !strings.Contains(msg, "at most 1") {
				t.Errorf("429 message %q does not name the limit", msg)
			}
		}
		resp.Body.Close()
	}
	long.Body.Close() // alice leaves: her slot is given back when the gateway sees it
	refused := 1.0    // the check above; and each poll that came before the slot was back
	waitFor(t, func() bool {
		resp := post(t, gw.URL+"/generate", short, map[string]string{"X-Api-Key": "alice"})
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
		return resp.StatusCode == http.StatusOK
	}, "alice served after her stream ended")
	if got := value(scrape(t, gw.URL), "pdhybrid_rejected_requests_total", map[string]string{"reason": "client_concurrency"}); got != refused {
		t.Errorf("client_concurrency rejections %v, want %v", got, refused)
	}
}

// Prompts are logged only when asked, on every serving endpoint: with
// LogPrompts each request is one JSON line carrying its prompt; without,
// the gateway writes nothing at all — so a distinctive prompt never
// reaches the log by default, whichever API it came through.
func TestLogPrompts(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	const secret = "the-secret-prompt-7f3a"
	user := []map[string]any{{"role": "user", "content": "please " + secret + " now"}}
	for _, tc := range []struct {
		name, path string
		body       map[string]any
	}{
		{"generate", "/generate", map[string]any{"text": secret, "sampling_params": map[string]any{"max_new_tokens": 2}}},
		{"messages", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": user}},
		{"messages streamed", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "messages": user, "stream": true}},
		{"messages system", "/v1/messages", map[string]any{"model": "m", "max_tokens": 2, "system": secret,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}}},
		{"chat", "/v1/chat/completions", map[string]any{"model": "m", "max_tokens": 2, "messages": user}},
		{"chat streamed", "/v1/chat/completions", map[string]any{"model": "m", "max_tokens": 2, "messages": user, "stream": true}},
		{"completions", "/v1/completions", map[string]any{"model": "m", "max_tokens": 2, "prompt": secret}},
		{"completions streamed", "/v1/completions", map[string]any{"model": "m", "max_tokens": 2, "prompt": secret, "stream": true}},
	} {
		for _, on := range []bool{false, true} {
			var buf bytes.Buffer
			cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
			cfg.LoadPoll, cfg.LogPrompts, cfg.Log = -1, on, &buf
			gw, g := start(t, cfg)
			resp := post(t, gw.URL+tc.path, tc.body, nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || len(b) == 0 {
				t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, b)
			}
			gw.Close() // waits for the handler: buf is complete
			g.Close()
			out := buf.String()
			var line struct {
				Msg    string `json:"msg"`
				Status int    `json:"status"`
				Prompt any    `json:"prompt"`
			}
			if on && (strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &line) != nil || line.Msg != "request" ||
				line.Status != http.StatusOK || !strings.Contains(fmt.Sprint(line.Prompt), secret)) {
				t.Errorf("%s, LogPrompts on: %q, want one JSON line whose prompt holds %q", tc.name, out, secret)
			}
			if !on && out != "" {
				t.Errorf("%s, LogPrompts off: the gateway wrote %q", tc.name, out)
			}
			t.Logf("%s, LogPrompts %v: %d bytes logged", tc.name, on, len(out))
		}
	}
}
