package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Scripted PD legs: stand-in prefill and decode workers whose /generate
// answers come in an order the test sets, for the exit paths of pd.go that
// the emulated workers reach only by chance.

// standIn serves gen on /generate and 200 on every other path (health,
// discovery, /abort_request).
func standIn(t *testing.T, gen http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			w.WriteHeader(http.StatusOK)
			return
		}
		io.Copy(io.Discard, r.Body)
		gen(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// pdStandIns runs a plain-PD gateway over one stand-in prefill worker and
// the given decoders, health checks and load polls off.
func pdStandIns(t *testing.T, retries int, edit func(*Config), p http.HandlerFunc, ds ...http.HandlerFunc) (string, *Server, []string) {
	t.Helper()
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechPD), Prefill: []Prefill{{URL: standIn(t, p), BootstrapPort: 8998}},
		Health: HealthConfig{Interval: -1}, Retries: retries}
	cfg.LoadPoll = -1
	var urls []string
	for _, d := range ds {
		urls = append(urls, standIn(t, d))
	}
	cfg.Decode = urls
	if edit != nil {
		edit(&cfg)
	}
	gw, g := serve(t, cfg)
	return gw.URL, g, urls
}

// longGrace lets a decoder's error wait for the prefill leg however loaded
// the machine: the verdict's order is what these tests hold, not its bound.
func longGrace(t *testing.T) {
	old := prefillVerdictGrace
	prefillVerdictGrace = time.Minute
	t.Cleanup(func() { prefillVerdictGrace = old })
}

func sglAnswer(cached int) string {
	return fmt.Sprintf(`{"text": "ok", "output_ids": [7, 8], "meta_info": {"id": "x", "prompt_tokens": 200, "completion_tokens": 2, "cached_tokens": %d, "finish_reason": {"type": "length", "length": 2}}}`, cached)
}

func jsonAnswer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// postGenerate sends a /generate and returns the status and whole body.
func postGenerate(t *testing.T, gw string, body map[string]any) (int, string) {
	t.Helper()
	j, _ := json.Marshal(body)
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer (status %d) cut: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, string(b)
}

// A decoder's error waits for the prefill leg's verdict (pd.go's
// prefillVerdict): when P failed too, P's failure is the cause the client
// hears (D saw only its KV never coming); when P answered ok, D's own error
// is relayed.
func TestDecoderErrorTakesPrefillVerdict(t *testing.T) {
	longGrace(t)
	t.Run("prefill failed too", func(t *testing.T) {
		// P answers once the client has an answer, or after a second: an
		// executor that relays D's error without waiting for P's verdict
		// gives the client D's 500.
		answered := make(chan struct{})
		p := func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-answered:
			case <-time.After(time.Second):
			}
			jsonAnswer(w, http.StatusInternalServerError, `{"error": {"message": "prefill out of memory"}}`)
		}
		d := func(w http.ResponseWriter, r *http.Request) {
			jsonAnswer(w, http.StatusInternalServerError, `{"error": {"message": "decode waited for KV in vain"}}`)
		}
		gw, _, _ := pdStandIns(t, -1, nil, p, d)
		status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 2}})
		close(answered)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "prefill-failed") || !strings.Contains(body, "prefill out of memory") {
			t.Errorf("answered %d %s; want 503 naming the prefill's failure", status, body)
		}
	})
	t.Run("prefill ok", func(t *testing.T) {
		pDone := make(chan struct{})
		p := func(w http.ResponseWriter, r *http.Request) {
			jsonAnswer(w, http.StatusOK, sglAnswer(0))
			w.(http.Flusher).Flush()
			close(pDone)
		}
		d := func(w http.ResponseWriter, r *http.Request) {
			<-pDone
			jsonAnswer(w, http.StatusInternalServerError, `{"error": {"message": "decode failed on its own"}}`)
		}
		gw, _, _ := pdStandIns(t, -1, nil, p, d)
		status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 2}})
		if status != http.StatusInternalServerError || !strings.Contains(body, "decode failed on its own") {
			t.Errorf("answered %d %s; want the decoder's own 500", status, body)
		}
	})
}

// A decoder answering exactly 500 is retried and counted against its
// breaker (a 5xx: the KV had nowhere to go), like a 503: with the breaker
// opening on one failure, the first decoder tried is held back after one
// request, the retry's decoder (whose 500 reaches the client) is not.
func TestDecoder500CountsAgainstItsBreaker(t *testing.T) {
	for _, status := range []int{500, 503} {
		p := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
		d := func(w http.ResponseWriter, r *http.Request) {
			jsonAnswer(w, status, `{"error": {"message": "decode down"}}`)
		}
		gw, g, _ := pdStandIns(t, 1, func(c *Config) {
			c.Dispatch.Breaker = kvc.BreakerConfig{Failures: 1, WindowS: 600, CooldownS: 600}
		}, p, d, d)
		if got, _ := postGenerate(t, gw, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 2}}); got != status {
			t.Errorf("%d: the last attempt's answer relayed as %d", status, got)
		}
		open := 0
		g.locked(func() {
			for d := range 2 {
				if g.disp.BreakerOpen(g.now(), d) {
					open++
				}
			}
		})
		if open != 1 {
			t.Errorf("decoders answering %d: %d breakers open after one request and one retry, want 1", status, open)
		}
	}
}

// The final event of D's stream carries P's cached_tokens even when P's
// answer trails D's last token (the relay waits for it), and no earlier
// event waits for P: the first token is not held back for the prefill
// leg's answer. P answers once the client has the event the row names, or
// after a second.
func TestFinalEventWaitsForPrefillCached(t *testing.T) {
	for _, row := range []struct {
		name   string
		pAfter int // the client's event after which P answers: 0 the first, 1 the final
	}{
		{"prefill answers after the last token", 1},
		{"prefill answers after the first token", 0},
	} {
		t.Run(row.name, func(t *testing.T) {
			seen := []chan struct{}{make(chan struct{}), make(chan struct{})}
			within := func(c chan struct{}) {
				select {
				case <-c:
				case <-time.After(time.Second):
				}
			}
			p := func(w http.ResponseWriter, r *http.Request) {
				within(seen[row.pAfter])
				jsonAnswer(w, http.StatusOK, sglAnswer(77))
			}
			d := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, sglEvent("a", "null"))
				w.(http.Flusher).Flush()
				within(seen[0]) // the last token once the client has the first
				io.WriteString(w, sglEvent("b", `{"type": "length", "length": 2}`))
				io.WriteString(w, "data: [DONE]\n\n")
			}
			gw, _, _ := pdStandIns(t, -1, nil, p, d)
			cached := streamCached(t, gw, map[string]any{"input_ids": ids(0, 200), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 2}},
				func(i int) { close(seen[i]) })
			if len(cached) != 2 || cached[0] != 0 || cached[1] != 77 {
				t.Errorf("events' cached_tokens %v, want [0 77]: the first D's own, the final the prefill's", cached)
			}
		})
	}
}

// streamCached reads a streamed /generate's data events and returns each
// one's cached_tokens, calling seen(i) as event i arrives.
func streamCached(t *testing.T, gw string, body map[string]any, seen func(i int)) []int {
	t.Helper()
	j, _ := json.Marshal(body)
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var out []int
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var ev struct {
			MetaInfo struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"meta_info"`
		}
		if err := json.Unmarshal([]byte(line[len("data: "):]), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, ev.MetaInfo.CachedTokens)
		seen(len(out) - 1)
	}
	return out
}

// cutJSON is a decoder whose JSON answer breaks off before its end.
func cutJSON(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		body := `{"text": "part`
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
		bw.Flush()
	}
}

// A decoder whose JSON answer breaks off before any of it reached the
// client is retried on another decoder (the prefill leg was fine), and
// the retry is counted against it; with every decoder cutting, --retries 1
// is one retry and the client hears 502, never a 200.
func TestPDCutAnswerRetriedElsewhere(t *testing.T) {
	p := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
	good := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
	gw, _, ds := pdStandIns(t, 0, nil, p, cutJSON(t), good)
	for i := range 6 {
		if status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(500*i, 200), "sampling_params": map[string]any{"max_new_tokens": 2}}); status != http.StatusOK || !strings.Contains(body, `"ok"`) {
			t.Fatalf("request %d with a decoder cutting its answers: %d %s", i, status, body)
		}
	}
	if got := value(scrape(t, gw), "pdhybrid_retries_total", map[string]string{"worker": ds[0]}); got < 1 {
		t.Errorf("retries counted against the cutting decoder: %v, want ≥ 1", got)
	}

	gw, _, ds = pdStandIns(t, 1, nil, p, cutJSON(t), cutJSON(t), cutJSON(t))
	if status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 2}}); status != http.StatusBadGateway {
		t.Errorf("every decoder cutting: answered %d %s, want 502", status, body)
	}
	m := scrape(t, gw)
	var retries float64
	for _, u := range ds {
		retries += value(m, "pdhybrid_retries_total", map[string]string{"worker": u})
	}
	if retries != 1 {
		t.Errorf("%v retries with --retries 1, want 1", retries)
	}
}

// A decoder's JSON answer cut because the prefill leg failed (P's failure
// cuts D's leg) ends as P's failure, not as the decoder's: the client
// hears the prefill's cause.
func TestPDCutByPrefillFailure(t *testing.T) {
	dHead := make(chan struct{})
	p := func(w http.ResponseWriter, r *http.Request) {
		<-dHead
		jsonAnswer(w, http.StatusInternalServerError, `{"error": {"message": "prefill out of memory"}}`)
	}
	d := func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		body := `{"text": "part`
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
		bw.Flush()
		close(dHead)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound only: the gateway closes the connection
		io.Copy(io.Discard, conn)
	}
	gw, _, _ := pdStandIns(t, -1, nil, p, d)
	status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 2}})
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "prefill out of memory") {
		t.Errorf("answered %d %s; want 503 naming the prefill's failure", status, body)
	}
}

// A PD request whose two legs succeed aborts neither: no abort_request
// reaches the decoder or the prefill worker.
func TestPDSuccessAbortsNothing(t *testing.T) {
	p := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
	d := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
	gw, _, _ := pdStandIns(t, -1, nil, p, d)
	for i := range 3 {
		if status, body := postGenerate(t, gw, map[string]any{"input_ids": ids(500*i, 200), "sampling_params": map[string]any{"max_new_tokens": 2}}); status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	if n := sum(scrape(t, gw), "pdhybrid_aborts_total"); n != 0 {
		t.Errorf("%v aborts after three PD successes, want 0", n)
	}
}

// A client leaving mid-stream gets both legs aborted as a disconnect: the
// decoder is told (not left to notice), and so is the prefill worker.
func TestPDClientLeavingAbortsTheDecoder(t *testing.T) {
	p := func(w http.ResponseWriter, r *http.Request) { jsonAnswer(w, http.StatusOK, sglAnswer(0)) }
	d := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, sglEvent("a", "null"))
		w.(http.Flusher).Flush()
		select { // the rest never comes: the client leaves first
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	gw, g, ds := pdStandIns(t, -1, nil, p, d)
	j, _ := json.Marshal(map[string]any{"input_ids": ids(0, 200), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 8}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first event %q: %v", line, err)
	}
	resp.Body.Close() // the client leaves
	for _, u := range []string{ds[0], g.cfg.Prefill[0].URL} {
		waitFor(t, func() bool {
			return value(scrape(t, gw), "pdhybrid_aborts_total", map[string]string{"reason": abortDisconnect, "worker": u}) == 1
		}, "disconnect abort sent to "+u)
	}
}
