package emulator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// TestSGLangSessions: a request with session_params continues the
// session's context (previous prompt and output, then its own tokens), and
// the worker's cache holds that context.
func TestSGLangSessions(t *testing.T) {
	s := start(t, Config{TimeScale: 1000})
	st, b := post(t, s.URL()+"/open_session", map[string]any{"capacity_of_str_len": 1000, "session_id": "conv"})
	var id string
	if json.Unmarshal(b, &id); st != 200 || id != "conv" {
		t.Fatalf("open: %d %s", st, b)
	}
	if st, b := post(t, s.URL()+"/open_session", map[string]any{"capacity_of_str_len": 1000, "session_id": "conv"}); st != 400 || !strings.Contains(string(b), "Failed to open the session") {
		t.Fatalf("reopen: %d %s", st, b)
	}
	turn := func(rid string, n, out int, extra map[string]any) GenerateOut {
		sp := map[string]any{"id": "conv"}
		for k, v := range extra {
			sp[k] = v
		}
		st, b := post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(n, n), "rid": rid, "session_params": sp, "sampling_params": map[string]any{"max_new_tokens": out}})
		if st != 200 {
			t.Fatalf("%s: %d %s", rid, st, b)
		}
		return decodeOut(t, b)
	}
	o1 := turn("t1", 500, 100, nil)
	if o1.MetaInfo.PromptTokens != 500 {
		t.Fatalf("turn 1 prompt %d", o1.MetaInfo.PromptTokens)
	}
	o2 := turn("t2", 40, 10, nil)
	if o2.MetaInfo.PromptTokens != 500+100+40 {
		t.Fatalf("turn 2 prompt %d, want 640", o2.MetaInfo.PromptTokens)
	}
	// Its cache holds turn 1's prompt and output: whole blocks of 599 KV tokens.
	if o2.MetaInfo.CachedTokens != 599/64*64 {
		t.Fatalf("turn 2 cached %d", o2.MetaInfo.CachedTokens)
	}
	o3 := turn("t3", 7, 1, map[string]any{"rid": "t1", "drop_previous_output": true})
	if o3.MetaInfo.PromptTokens != 507 {
		t.Fatalf("branch from t1's prompt: %d", o3.MetaInfo.PromptTokens)
	}
	o4 := turn("t4", 3, 1, map[string]any{"rid": "t2", "offset": 100})
	if o4.MetaInfo.PromptTokens != 103 {
		t.Fatalf("offset 100: %d", o4.MetaInfo.PromptTokens)
	}
	if st, _ := post(t, s.URL()+"/close_session", map[string]any{"session_id": "conv"}); st != 200 {
		t.Fatalf("close: %d", st)
	}
	st, b = post(t, s.URL()+"/generate", map[string]any{"input_ids": []int{1}, "session_params": map[string]any{"id": "conv"}})
	o := decodeOut(t, b)
	if f := o.MetaInfo.FinishReason; st != 200 || f == nil || f.Type != "abort" || *f.Message != "Invalid request: session id conv does not exist" {
		t.Fatalf("closed session: %d %s", st, b)
	}
	// Without an id, /open_session makes one.
	if st, b := post(t, s.URL()+"/open_session", map[string]any{"capacity_of_str_len": 10}); st != 200 || len(b) < 10 {
		t.Fatalf("open without id: %d %s", st, b)
	}
	if st, _ := post(t, s.URL()+"/open_session", map[string]any{}); st != 400 {
		t.Fatalf("open without capacity: %d", st)
	}
}

// TestKVCSessionDecoder: a session-aware decoder keeps a seeded session's
// KV (received from P), admits the next turn as a direct append, and runs
// it without P, reusing the session's prompt and output.
func TestKVCSessionDecoder(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: engine.SessionConfig{Enabled: true}})
	admit := func(prompt []int) AdmitResponse {
		st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "S", "input_ids": prompt, "max_new_tokens": 8})
		var a AdmitResponse
		if err := json.Unmarshal(b, &a); st != 200 || err != nil {
			t.Fatalf("admission: %d %s", st, b)
		}
		return a
	}
	lookup := func(session string, prompt []int) LookupResponse {
		st, b := post(t, d.URL()+"/session_cache/lookup", map[string]any{"session_id": session, "input_ids": prompt})
		var l LookupResponse
		if err := json.Unmarshal(b, &l); st != 200 || err != nil {
			t.Fatalf("lookup: %d %s", st, b)
		}
		return l
	}
	resident := func() any { return loads(t, d)["num_resident_sessions"] }
	turn1 := ids(1, 3000)
	if l := lookup("S", turn1); l.Resident || l.CachedTokens != 0 {
		t.Fatalf("lookup before any turn: %+v", l)
	}
	if n := resident(); n != 0.0 {
		t.Fatalf("/v1/loads num_resident_sessions before any turn: %v, want 0", n)
	}
	if a := admit(turn1); !a.CanAdmit || a.Mode != "seed" || a.Reason != engine.ReasonNotResident {
		t.Fatalf("first turn: %+v", a)
	}
	o := seed(t, p, d, "S", turn1, 50)
	turn2 := append(append(append([]int{}, turn1...), o.OutputIDs...), ids(7, 200)...)
	// The residency probe sees the session here; another session with the
	// same prefix is not resident, though its prefix is cached.
	if l := lookup("S", turn2); !l.Resident || l.CachedTokens != (3000+49)/64*64 {
		t.Fatalf("lookup after the seed: %+v", l)
	}
	if l := lookup("other", turn2); l.Resident || l.CachedTokens == 0 {
		t.Fatalf("lookup of another session over the same prefix: %+v", l)
	}
	if n := resident(); n != 1.0 {
		t.Fatalf("/v1/loads num_resident_sessions after the seed: %v, want 1", n)
	}
	a := admit(turn2)
	// The seed's prompt and output are resident: whole blocks up to
	// 3000 + 49 tokens with KV.
	if !a.CanAdmit || a.Mode != "direct_append" || a.CachedTokens != (3000+49)/64*64 {
		t.Fatalf("second turn: %+v", a)
	}
	// The direct append: no bootstrap fields, the session named.
	st, b := post(t, d.URL()+"/generate", map[string]any{"input_ids": turn2, "rid": "direct-2", "session_id": "S", "sampling_params": map[string]any{"max_new_tokens": 8}})
	if st != 200 {
		t.Fatalf("direct append: %d %s", st, b)
	}
	o2 := decodeOut(t, b)
	if o2.MetaInfo.CachedTokens != a.CachedTokens || o2.MetaInfo.CompletionTokens != 8 || o2.OutputIDs[0] != OutputToken("direct-2", 0) {
		t.Fatalf("direct append answer %+v", o2.MetaInfo)
	}
	if n := resident(); n != 1.0 {
		t.Fatalf("/v1/loads num_resident_sessions after the direct append: %v, want the one session", n)
	}
	// A direct append costs only the append's prefill, far less than a cold prompt.
	if ttft := *o2.MetaInfo.Emulator.TTFT; ttft > testProfile(t).Timing.PrefillS(len(turn2), 0)/2 {
		t.Fatalf("direct append TTFT %.4f s", ttft)
	}
}

// TestHealthWhileStarting: /health and /health_generate answer 503 until
// the startup delay has passed (fake clock), then 200; /generate is
// refused meanwhile.
func TestHealthWhileStarting(t *testing.T) {
	clk := NewFakeClock()
	s := start(t, Config{Clock: clk, StartupDelay: 30})
	for _, p := range []string{"/health", "/health_generate"} {
		if st, _ := get(t, s.URL()+p); st != 503 {
			t.Fatalf("%s while starting: %d", p, st)
		}
	}
	if st, _ := post(t, s.URL()+"/generate", small(1)); st != 503 {
		t.Fatalf("/generate while starting: %d", st)
	}
	if !clk.WaitForTimers(1, time.Second) {
		t.Fatal("no startup timer")
	}
	clk.Advance(29 * time.Second)
	if st, _ := get(t, s.URL()+"/health"); st != 503 {
		t.Fatalf("after 29 s: %d", st)
	}
	clk.Advance(time.Second)
	waitFor(t, 2*time.Second, "healthy", func() bool { st, _ := get(t, s.URL()+"/health"); return st == 200 })
	if st, _ := get(t, s.URL()+"/health_generate"); st != 200 {
		t.Fatalf("/health_generate: %d", st)
	}
}

// TestFlushCache: /flush_cache empties the prefix cache when idle and is
// refused (400) while a request runs.
func TestFlushCache(t *testing.T) {
	clk := NewFakeClock()
	s := start(t, Config{Clock: clk})
	run := func(rid string) GenerateOut {
		done := make(chan struct{})
		var b []byte
		go func() {
			defer close(done)
			_, b = post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, 1000), "rid": rid, "sampling_params": map[string]any{"max_new_tokens": 1}})
		}()
		driveFake(t, clk, done, 5*time.Second)
		return decodeOut(t, b)
	}
	run("a")
	if o := run("b"); o.MetaInfo.CachedTokens != 999 {
		t.Fatalf("before the flush: cached %d", o.MetaInfo.CachedTokens)
	}
	if st, b := post(t, s.URL()+"/flush_cache", ""); st != 200 || !strings.HasPrefix(string(b), "Cache flushed.") {
		t.Fatalf("flush: %d %s", st, b)
	}
	if o := run("c"); o.MetaInfo.CachedTokens != 0 {
		t.Fatalf("after the flush: cached %d", o.MetaInfo.CachedTokens)
	}
	go postQuiet(t, s.URL()+"/generate", small(3))
	waitFor(t, 2*time.Second, "a running request", func() bool { return clk.Pending() > 0 })
	if st, _ := post(t, s.URL()+"/flush_cache", ""); st != 400 {
		t.Fatalf("flush while busy: %d", st)
	}
	if v := scrape(t, s)["sglang:num_requests_total"]; v != 3 {
		t.Fatalf("requests counted across the flush: %v", v)
	}
}

// seed runs a KVC seed over the PD protocol (the same body to P and D, the
// session named, so D keeps it) and returns D's answer.
func seed(t *testing.T, p, d *Server, session string, prompt []int, out int) GenerateOut {
	t.Helper()
	body := pdBody(p, "seed-"+session, 1, prompt, out)
	body["session_id"] = session
	go postQuiet(t, p.URL()+"/generate", copyBody(body))
	st, b := post(t, d.URL()+"/generate", copyBody(body))
	if st != 200 {
		t.Fatalf("seed: %d %s", st, b)
	}
	return decodeOut(t, b)
}

// The decoder's admission reply carries recommended_pause_ms once the KV it
// holds reaches the high-water share of its pool; with backpressure off
// (the seed's default) it never does.
func TestAdmissionPauseHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   engine.SessionConfig
		want int
	}{
		{"on", engine.SessionConfig{Enabled: true, HighWater: 0.001}, 10},
		{"high water not reached", engine.SessionConfig{Enabled: true}, 0},
		{"off", engine.SessionConfig{Enabled: true, HighWater: 0.001, NoPauseHint: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
			d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: tc.sc})
			prompt := ids(1, 3000)
			seed(t, p, d, "S", prompt, 4)
			st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "T", "input_ids": ids(2, 100), "max_new_tokens": 8})
			var a AdmitResponse
			if err := json.Unmarshal(b, &a); st != 200 || err != nil {
				t.Fatalf("admission: %d %s", st, b)
			}
			if !a.CanAdmit || a.RecommendedPauseMs != tc.want {
				t.Fatalf("admission %+v, want admitted with a pause of %d ms", a, tc.want)
			}
		})
	}
}
