package emulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

func testProfile(t testing.TB) *model.Profile {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start serves a worker on loopback and stops it when the test ends.
func start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Profile == nil {
		cfg.Profile = testProfile(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			s.Kill()
		}
	})
	return s
}

var client = &http.Client{Timeout: 30 * time.Second}

// post sends a JSON body and returns the status and body.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	resp, err := client.Post(url, "application/json", rd)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// postQuiet posts from a goroutine of the test's own, which may outlive
// the test: it reports nothing.
func postQuiet(_ testing.TB, url string, body any) {
	j, _ := json.Marshal(body)
	resp, err := client.Post(url, "application/json", bytes.NewReader(j))
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func decodeOut(t testing.TB, b []byte) GenerateOut {
	t.Helper()
	var o GenerateOut
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return o
}

// sseEvent is one event read off the wire, with when it arrived.
type sseEvent struct {
	data string
	at   time.Time
}

// readSSE parses text/event-stream from r: events end at a blank line;
// only data fields are kept (several data lines join with \n).
func readSSE(r io.Reader, each func(sseEvent)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				each(sseEvent{data: strings.Join(data, "\n"), at: time.Now()})
				data = nil
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}

// stream posts a streamed /generate and collects its events up to [DONE].
func stream(t testing.TB, url string, body map[string]any) (events []GenerateOut, times []time.Time, done bool) {
	t.Helper()
	return streamEach(t, url, body, nil)
}

// streamEach is stream calling each after every event.
func streamEach(t testing.TB, url string, body map[string]any, each func()) (events []GenerateOut, times []time.Time, done bool) {
	t.Helper()
	body["stream"] = true
	j, _ := json.Marshal(body)
	resp, err := client.Post(url+"/generate", "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s: %s", resp.StatusCode, ct, b)
	}
	err = readSSE(resp.Body, func(e sseEvent) {
		if e.data == "[DONE]" {
			done = true
			return
		}
		if done {
			t.Errorf("event after [DONE]: %s", e.data)
		}
		events = append(events, decodeOut(t, []byte(e.data)))
		times = append(times, e.at)
		if each != nil {
			each()
		}
	})
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return events, times, done
}

// ids is n token ids starting at base.
func ids(base, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (base + i*7919) % VocabSize
	}
	return out
}

// driveFake moves the fake clock from deadline to deadline until done is
// closed (at most limit of real time); settle, if given, runs after each
// move (to let a client read what the move produced).
func driveFake(t testing.TB, clk *FakeClock, done <-chan struct{}, limit time.Duration, settle ...func()) {
	t.Helper()
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		select {
		case <-done:
			return
		default:
		}
		if clk.WaitForTimers(1, 5*time.Millisecond) {
			clk.AdvanceToNext()
			for _, f := range settle {
				f()
			}
		}
	}
	t.Fatal("timed out driving the fake clock")
}

func colo() Config { return Config{Role: engine.RoleColocated} }
