package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// postAt is post that also returns the worker that answered.
func postAt(t *testing.T, gw, session string, prompt []int) (mode, worker string, out []int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": session, "sampling_params": map[string]any{"max_new_tokens": 8}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		OutputIDs []int `json:"output_ids"`
	}
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusOK || len(a.OutputIDs) != 8 {
		t.Fatalf("session %s: %d %s", session, resp.StatusCode, b)
	}
	return resp.Header.Get("X-PDHybrid-Mode"), resp.Header.Get("X-PDHybrid-Worker"), a.OutputIDs
}

// serve --kv-events: a decoder's eviction reaches the live gateway and
// moves the next placement. Two KVC decoders of 40,000-token pools; a's
// 30,000-token first turn goes to d0 (Algorithm 1's tie falls to the lowest
// index), b's to d1 (d0 has had one more request), c's to d0 again (tied),
// and c's admission trims a from d0's HBM (no host tier: a is gone). With
// reports, d0's stream says so (SessionEvicted a, tier none; the gateway's
// pdhybrid_kv_events_received_total counts it), the gateway forgets a's pin
// and d0's blocks of it, and a's second turn is placed as a session no
// decoder holds: on d1, which has had fewer requests. Without reports the
// gateway still believes d0 holds a and asks it first: d0 answers a seed
// (session-was-evicted) and a's turn is rebuilt on d0. With --kv-events
// but decoders that do not offer the stream (404), the gateway counts the
// refusals and places as without reports. The verdict rests on the worker
// that answered and the gateway's counters, not timing.
func TestServeKVEventsMovePlacement(t *testing.T) {
	for _, tc := range []struct {
		name      string
		publish   bool
		args      []string
		wantOnD1  bool
		wantCount string // a /metrics line that must appear before a's second turn
	}{
		{"reports", true, []string{"--kv-events"}, true, `pdhybrid_kv_events_received_total{type="SessionEvicted",worker="D0"} 1`},
		{"no reports", true, nil, false, ""},
		{"stream not offered", false, []string{"--kv-events"}, false, `pdhybrid_kv_events_stream_errors_total{reason="status",worker="D0"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, nil)
			dec := func() *emulator.Server {
				return emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
					c.Session = engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}
					c.PoolTokens = 40000
					c.KVEvents = tc.publish
				})
			}
			d0, d1 := dec(), dec()
			emulatortest.WaitHealthy(t, p.URL(), d0.URL(), d1.URL())
			gw := serveOn(t, p, d0, append([]string{"--decode", d1.URL()}, tc.args...)...)
			a1 := seq(100000, 30000)
			_, w, out := postAt(t, gw, "a", a1)
			if w != d0.URL() {
				t.Fatalf("a turn 1 on %s, want d0 %s", w, d0.URL())
			}
			if _, w, _ := postAt(t, gw, "b", seq(200000, 30000)); w != d1.URL() {
				t.Fatalf("b turn 1 on %s, want d1 %s", w, d1.URL())
			}
			if _, w, _ := postAt(t, gw, "c", seq(300000, 30000)); w != d0.URL() {
				t.Fatalf("c turn 1 on %s, want d0 %s", w, d0.URL())
			}
			if tc.wantCount != "" {
				want := bytes.ReplaceAll([]byte(tc.wantCount), []byte("D0"), []byte(d0.URL()))
				waitMetric(t, gw, string(want), "pdhybrid_kv_events")
			}
			mode, w, _ := postAt(t, gw, "a", append(append(a1, out...), seq(900000, 50)...))
			want := d0.URL()
			if tc.wantOnD1 {
				want = d1.URL()
			}
			if w != want {
				t.Fatalf("a turn 2 (mode %s) on %s, want %s", mode, w, want)
			}
			t.Logf("a turn 2: mode %s on %s", mode, w)
		})
	}
}

// up --kv-events starts the decoders with --kv-events (they advertise
// the stream) and the gateway with --kv-events (it reads it: its
// pdhybrid_kv_events_connected gauge is 1 for the decoder). The prefill
// worker advertises no stream.
func TestUpKVEvents(t *testing.T) {
	gw, children, _, _, stderr := startUp(t, "--decode", "1", "--port", "0", "--time-scale", "20", "--kv-events")
	if len(children) != 2 {
		t.Fatalf("up named workers %v, want 2\n%s", children, stderr.String())
	}
	var decoder string
	for _, u := range children {
		info := getBody(t, u+"/server_info")
		isDecode := strings.Contains(info, `"disaggregation_mode":"decode"`)
		if offers := strings.Contains(info, `"kv_events"`); offers != isDecode {
			t.Errorf("%s: advertises kv_events %v, decode %v; want the decoder only", u, offers, isDecode)
		}
		if isDecode {
			decoder = u
		}
	}
	waitMetric(t, gw, `pdhybrid_kv_events_connected{worker="`+decoder+`"} 1`, "pdhybrid_kv_events")
}
