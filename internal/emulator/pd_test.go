package emulator

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// pdBody is the body a gateway sends to both legs.
func pdBody(p *Server, rid string, room uint64, prompt []int, out int) map[string]any {
	return map[string]any{
		"input_ids": prompt, "rid": rid, "sampling_params": map[string]any{"max_new_tokens": out},
		"bootstrap_host": "127.0.0.1", "bootstrap_port": p.BootstrapPort(), "bootstrap_room": room,
	}
}

func copyBody(b map[string]any) map[string]any {
	c := map[string]any{}
	for k, v := range b {
		c[k] = v
	}
	return c
}

// loads reads /v1/loads' first load.
func loads(t *testing.T, s *Server) map[string]any {
	t.Helper()
	st, b := get(t, s.URL()+"/v1/loads")
	if st != 200 {
		t.Fatalf("/v1/loads: %d %s", st, b)
	}
	var v struct {
		Loads []map[string]any `json:"loads"`
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Loads) != 1 {
		t.Fatalf("/v1/loads %s: %v", b, err)
	}
	return v.Loads[0]
}

func disagg(t *testing.T, s *Server) map[string]any {
	return loads(t, s)["disaggregation"].(map[string]any)
}

// waitFor polls cond every 5 ms for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPDTTFT: a prefill and a decode worker pair up by bootstrap room over
// loopback; D's TTFT is P's prefill plus the modelled transfer of the
// prompt's KV (one chunk, fully exposed), within a tolerance for the real
// HTTP hops; D's first token is P's; P answers with the first token and
// finish_reason length 0.
func TestPDTTFT(t *testing.T) {
	prof := testProfile(t)
	p := start(t, Config{Role: engine.RolePrefill, Link: "tcp-loopback"})
	d := start(t, Config{Role: engine.RoleDecode})
	const in, out = 8000, 8
	body := pdBody(p, "pd-1", 77, ids(3, in), out)
	var wg sync.WaitGroup
	var pStatus int
	var pAns []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		pStatus, pAns = post(t, p.URL()+"/generate", copyBody(body))
	}()
	sent := time.Now()
	evs, times, fin := stream(t, d.URL(), copyBody(body))
	wg.Wait()
	if !fin || len(evs) == 0 {
		t.Fatalf("decode stream: %d events, done %v", len(evs), fin)
	}
	if pStatus != 200 {
		t.Fatalf("prefill leg: %d %s", pStatus, pAns)
	}
	po := decodeOut(t, pAns)
	if f := po.MetaInfo.FinishReason; f == nil || f.Type != "length" || *f.Length != 0 || len(po.OutputIDs) != 1 {
		t.Fatalf("prefill answer %s", pAns)
	}
	last := evs[len(evs)-1]
	if last.MetaInfo.CompletionTokens != out || last.OutputIDs[0] != po.OutputIDs[0] {
		t.Fatalf("decode: %d tokens, first %d; P's first %d", last.MetaInfo.CompletionTokens, last.OutputIDs[0], po.OutputIDs[0])
	}
	if from := last.MetaInfo.Emulator.FirstTokenFrom; !strings.HasSuffix(from, ":"+itoa(p.BootstrapPort())) {
		t.Fatalf("first token from %q, want P's bootstrap server", from)
	}
	if last.MetaInfo.CachedTokens != 0 {
		t.Fatalf("decode cached_tokens %d: a plain PD decoder keeps nothing", last.MetaInfo.CachedTokens)
	}
	want := prof.Timing.PrefillS(in, 0) + prof.Links["tcp-loopback"].TransferS(int64(in)*prof.Model.KVBytesPerToken())
	got := *last.MetaInfo.Emulator.TTFT
	t.Logf("decode TTFT %.4f s (model %.4f s), client %.4f s", got, want, times[0].Sub(sent).Seconds())
	if got < want || got > want*1.1+0.05 {
		t.Fatalf("decode TTFT %.4f s, model %.4f s", got, want)
	}
	// The worker paces by the model's time, so the first token cannot come
	// sooner; how much later it comes is the machine's load, not the
	// protocol's (it came 1.10 s after a 0.67 s model TTFT once, at a load
	// average of 20), so only the lower bound is held.
	if wall := times[0].Sub(sent).Seconds(); wall < want*0.9 {
		t.Fatalf("client saw the first token after %.4f s, before the model's %.4f s", wall, want)
	}
	// Both workers are empty again; P keeps the prompt in its prefix cache.
	if l := loads(t, d); l["num_used_tokens"].(float64) != 0 || l["num_running_reqs"].(float64) != 0 {
		t.Fatalf("decode worker not empty: %v", l)
	}
	if dl := disagg(t, p); dl["kv_transfer_latency_ms"].(float64) <= 0 {
		t.Fatalf("prefill transfer stats %v", dl)
	}
	// A second turn hits P's cache: its cached_tokens show on the P leg.
	body2 := pdBody(p, "pd-2", 78, append(ids(3, in), ids(9, 100)...), 2)
	go postQuiet(t, d.URL()+"/generate", copyBody(body2))
	st, b := post(t, p.URL()+"/generate", copyBody(body2))
	if o := decodeOut(t, b); st != 200 || o.MetaInfo.CachedTokens != in/64*64 {
		t.Fatalf("second turn on P: %d cached %d", st, o.MetaInfo.CachedTokens)
	}
}

// registered reports whether a decode worker has registered a room with a
// prefill worker (it then watches that worker's heartbeats).
func registered(d *Server) bool {
	n := 0
	d.d.do(func(float64) { n = len(d.beats) })
	return n > 0
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDecodeRefusesRawGenerate: a decode (or prefill) worker given a
// /generate without bootstrap fields fails as SGLang's scheduler does.
func TestDecodeRefusesRawGenerate(t *testing.T) {
	d := start(t, Config{Role: engine.RoleDecode})
	p := start(t, Config{Role: engine.RolePrefill})
	for _, s := range []*Server{d, p} {
		// The rid is formatted as Python's repr (scheduler.py's {req.rid=}).
		for rid, shown := range map[string]string{"raw-1": `'raw-1'`, "it's": `"it's"`, `a\b`: `'a\\b'`} {
			st, b := post(t, s.URL()+"/generate", map[string]any{"text": "hello there", "rid": rid})
			want := "Invalid request: Disaggregated request received without bootstrap room id. req.rid=" + shown
			var e errorBody
			if json.Unmarshal(b, &e); st != 400 || e.Error.Message != want {
				t.Fatalf("%s: %d %s, want %q", s.engineType(), st, b, want)
			}
		}
		evs, _, fin := stream(t, s.URL(), map[string]any{"text": "hello there", "rid": "raw-2"})
		if !fin || len(evs) != 1 {
			t.Fatalf("streamed: %d events", len(evs))
		}
		f := evs[0].MetaInfo.FinishReason
		if f == nil || f.Type != "abort" || f.StatusCode == nil || *f.StatusCode != 400 || !strings.Contains(*f.Message, "without bootstrap room id") {
			t.Fatalf("streamed refusal %+v", f)
		}
	}
	// The fake bootstrap host (SGLang's health probe) needs no peer.
	st, b := post(t, d.URL()+"/generate", map[string]any{"input_ids": []int{0}, "sampling_params": map[string]any{"max_new_tokens": 1}, "bootstrap_host": FakeBootstrapHost, "bootstrap_room": 0})
	if st != 200 || decodeOut(t, b).MetaInfo.CompletionTokens != 1 {
		t.Fatalf("fake bootstrap on D: %d %s", st, b)
	}
	st, b = post(t, p.URL()+"/generate", map[string]any{"input_ids": []int{0}, "sampling_params": map[string]any{"max_new_tokens": 1}, "bootstrap_host": FakeBootstrapHost, "bootstrap_room": 0})
	if st != 200 {
		t.Fatalf("fake bootstrap on P: %d %s", st, b)
	}
}

// TestAbortFreesWaitingDecode: D pre-allocated a room whose prefill never
// comes; /abort_request ends the request and frees the reservation.
func TestAbortFreesWaitingDecode(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill})
	d := start(t, Config{Role: engine.RoleDecode})
	done := make(chan []byte)
	go func() {
		_, b := post(t, d.URL()+"/generate", pdBody(p, "wait-1", 5, ids(1, 4000), 100))
		done <- b
	}()
	waitFor(t, 5*time.Second, "D to pre-allocate", func() bool { return disagg(t, d)["decode_transfer_queue_reqs"].(float64) == 1 })
	if l := loads(t, d); l["num_used_tokens"].(float64) != 4000 {
		t.Fatalf("reserved %v tokens, want the prompt's 4000", l["num_used_tokens"])
	}
	if st, b := post(t, d.URL()+"/abort_request", map[string]any{"rid": "wait-1"}); st != 200 {
		t.Fatalf("abort: %d %s", st, b)
	}
	b := <-done
	o := decodeOut(t, b)
	if f := o.MetaInfo.FinishReason; f == nil || f.Type != "abort" {
		t.Fatalf("aborted request answered %s", b)
	}
	l := loads(t, d)
	if l["num_used_tokens"].(float64) != 0 || l["num_running_reqs"].(float64) != 0 || disagg(t, d)["decode_transfer_queue_reqs"].(float64) != 0 {
		t.Fatalf("after abort: %v", l)
	}
	// abort_all empties a worker.
	go postQuiet(t, d.URL()+"/generate", pdBody(p, "wait-2", 6, ids(1, 100), 10))
	go postQuiet(t, d.URL()+"/generate", pdBody(p, "wait-3", 7, ids(2, 100), 10))
	waitFor(t, 5*time.Second, "two reservations", func() bool { return disagg(t, d)["decode_transfer_queue_reqs"].(float64) == 2 })
	post(t, d.URL()+"/abort_request", map[string]any{"abort_all": true})
	waitFor(t, 5*time.Second, "abort_all", func() bool { return loads(t, d)["num_used_tokens"].(float64) == 0 })
}

// TestPDTimeouts: D gives up on a room after the waiting timeout, P on a
// leg whose D never pre-allocated after the bootstrap timeout (500, in
// SGLang's words), each counted in /metrics' failure counters.
func TestPDTimeouts(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill, BootstrapTimeout: 0.2})
	d := start(t, Config{Role: engine.RoleDecode, WaitingTimeout: 0.2})
	st, b := post(t, d.URL()+"/generate", pdBody(p, "dto", 9, ids(1, 100), 10))
	var e errorResponse
	if json.Unmarshal(b, &e); st != 500 || !strings.Contains(e.Message, "timed out after 0.2s in KVPoll.WaitingForInput") || !strings.HasPrefix(e.Message, "Decode transfer failed for request rank=0 decode_req.req.rid='dto'") {
		t.Fatalf("decode timeout: %d %s", st, b)
	}
	st, b = post(t, p.URL()+"/generate", pdBody(p, "pto", 10, ids(1, 100), 10))
	if json.Unmarshal(b, &e); st != 500 || !strings.Contains(e.Message, "in KVPoll.Bootstrapping") {
		t.Fatalf("prefill timeout: %d %s", st, b)
	}
	if l := loads(t, d); l["num_used_tokens"].(float64) != 0 {
		t.Fatalf("decode still holds %v tokens", l["num_used_tokens"])
	}
	if v := scrape(t, d)["sglang:num_transfer_failed_reqs_total"]; v != 1 {
		t.Fatalf("transfer failures %v", v)
	}
	if v := scrape(t, p)["sglang:num_bootstrap_failed_reqs_total"]; v != 1 {
		t.Fatalf("bootstrap failures %v", v)
	}
}

// TestPDDeadPeers: D notices a P that is not there (registration fails) or
// that dies while D waits (heartbeats); P notices a dead D when its KV
// delivery fails.
func TestPDDeadPeers(t *testing.T) {
	d := start(t, Config{Role: engine.RoleDecode, HeartbeatInterval: 0.05, HeartbeatMaxFailures: 2})
	// Nothing listens on the bootstrap port.
	gone := httptest.NewServer(http.NotFoundHandler())
	port := gone.Listener.Addr().(*net.TCPAddr).Port
	gone.Close()
	body := map[string]any{"input_ids": ids(1, 100), "rid": "dead-p", "bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 1}
	st, b := post(t, d.URL()+"/generate", body)
	if !strings.Contains(string(b), "Failed to get kvcache from prefill instance, it might be dead") || st != 500 {
		t.Fatalf("unreachable P: %d %s", st, b)
	}
	// P registers D's room, then dies.
	p := start(t, Config{Role: engine.RolePrefill})
	done := make(chan []byte)
	go func() {
		_, b := post(t, d.URL()+"/generate", pdBody(p, "dying-p", 2, ids(1, 100), 10))
		done <- b
	}()
	waitFor(t, 5*time.Second, "D to register", func() bool { return registered(d) })
	p.Kill()
	select {
	case b := <-done:
		if !strings.Contains(string(b), "heartbeat") {
			t.Fatalf("P died: %s", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("D still waits on a dead P")
	}
	// D dies after registering: P's first delivery fails, P answers 500.
	// (P runs slower than real time with small chunks, so D is dead well
	// before the first chunk's KV lands.)
	p2 := start(t, Config{Role: engine.RolePrefill, ChunkTokens: 1024, TimeScale: 0.25})
	d2 := start(t, Config{Role: engine.RoleDecode})
	body2 := pdBody(p2, "dying-d", 3, ids(1, 6000), 10)
	go postQuiet(t, d2.URL()+"/generate", copyBody(body2))
	waitFor(t, 5*time.Second, "D to register", func() bool { return registered(d2) })
	d2.Kill()
	st, b = post(t, p2.URL()+"/generate", copyBody(body2))
	if st != 500 || !strings.Contains(string(b), "Decode instance could be dead, remote session "+strings.TrimPrefix(d2.URL(), "http://")+" is not alive") {
		t.Fatalf("D died: %d %s", st, b)
	}
	if l := loads(t, p2); l["num_used_tokens"].(float64) != 0 {
		t.Fatalf("P holds %v tokens after the failure", l["num_used_tokens"])
	}
}

// TestFirstTokenFromP: D's first token is whatever P delivered with the
// KV, not one D makes up.
func TestFirstTokenFromP(t *testing.T) {
	d := start(t, Config{Role: engine.RoleDecode})
	port, regs := fakePrefill(t)
	done := make(chan []byte)
	go func() {
		_, b := post(t, d.URL()+"/generate", map[string]any{"input_ids": ids(1, 300), "rid": "ft", "sampling_params": map[string]any{"max_new_tokens": 3},
			"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 42})
		done <- b
	}()
	reg := <-regs
	if reg.Room != 42 || reg.RID != "ft" || reg.PromptTokens != 300 || !strings.HasSuffix(reg.KVURL, "/_pd/kv") {
		t.Fatalf("registration %+v", reg)
	}
	if st, b := post(t, reg.KVURL, delivery{Room: 43, RID: "ft", Done: true}); st != 404 {
		t.Fatalf("delivery to an unknown room: %d %s", st, b)
	}
	if st, b := post(t, reg.KVURL, delivery{Room: 42, RID: "ft", Tokens: 300, Done: true, FirstToken: 424242 % VocabSize, Prefill: "test"}); st != 200 {
		t.Fatalf("delivery: %d %s", st, b)
	}
	o := decodeOut(t, <-done)
	if o.OutputIDs[0] != 424242%VocabSize || o.OutputIDs[1] != OutputToken("ft", 1) || o.MetaInfo.Emulator.FirstTokenFrom != "test" {
		t.Fatalf("decode output %v from %q", o.OutputIDs, o.MetaInfo.Emulator.FirstTokenFrom)
	}
}

// fakePrefill is a bootstrap server that records registrations, so a test
// can deliver KV itself.
func fakePrefill(t *testing.T) (port int, regs chan registration) {
	regs = make(chan registration, 8)
	boot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		var reg registration
		json.NewDecoder(r.Body).Decode(&reg)
		regs <- reg
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(boot.Close)
	return boot.Listener.Addr().(*net.TCPAddr).Port, regs
}

// TestTrimStallHoldsDelivery: while a trim stalls a session-aware
// decoder's scheduler loop, a landing KV transfer is handled only when the
// stall ends (the seed's F6).
func TestTrimStallHoldsDelivery(t *testing.T) {
	d := start(t, Config{Role: engine.RoleDecode, PoolTokens: 2000, Session: engine.SessionConfig{Enabled: true, TrimStallS: 0.4}})
	port, regs := fakePrefill(t)
	pd := func(rid string, room int, n int, sess string) map[string]any {
		b := map[string]any{"input_ids": ids(room, n), "rid": rid, "sampling_params": map[string]any{"max_new_tokens": 2},
			"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": room}
		if sess != "" {
			b["session_id"] = sess
		}
		return b
	}
	deliverDone := func(reg registration) {
		if st, b := post(t, reg.KVURL, delivery{Room: reg.Room, RID: reg.RID, Tokens: reg.PromptTokens, Done: true, FirstToken: 1}); st != 200 {
			t.Fatalf("delivery: %d %s", st, b)
		}
	}
	// Seed session A: 1500 tokens resident.
	done := make(chan []byte, 2)
	go func() { _, b := post(t, d.URL()+"/generate", pd("a", 1, 1500, "A")); done <- b }()
	deliverDone(<-regs)
	<-done
	if n := loads(t, d)["num_resident_sessions"]; n != 1.0 {
		t.Fatalf("/v1/loads num_resident_sessions after A's seed: %v, want 1", n)
	}
	// Request C waits for its KV; an admission for a new session B trims A.
	go func() { _, b := post(t, d.URL()+"/generate", pd("c", 2, 300, "")); done <- b }()
	regC := <-regs
	st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "B", "input_ids": ids(3, 1200)})
	var a AdmitResponse
	if json.Unmarshal(b, &a); st != 200 || !a.CanAdmit || a.TrimmedSessions != 1 {
		t.Fatalf("admission of B: %d %s", st, b)
	}
	sent := time.Now()
	deliverDone(regC)
	if waited := time.Since(sent); waited < 300*time.Millisecond {
		t.Fatalf("delivery acknowledged after %v, inside the 0.4 s trim stall", waited)
	}
	o := decodeOut(t, <-done)
	if o.MetaInfo.CompletionTokens != 2 {
		t.Fatalf("request c: %+v", o.MetaInfo)
	}
	// A was trimmed and B never came: the decoder holds no session.
	if n := loads(t, d)["num_resident_sessions"]; n != 0.0 {
		t.Fatalf("/v1/loads num_resident_sessions after A's trim: %v, want 0", n)
	}
}

// TestPrefillServesWhole: with the whole-request extension a prefill worker
// serves a request without a bootstrap room prefill and decode, and keeps
// its prompt and output in its prefix cache for the session's next turn;
// PD legs with a room still go the PD way (the stock refusal is above).
func TestPrefillServesWhole(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill, ServeWhole: true})
	ids := make([]int, 640)
	for i := range ids {
		ids[i] = 7 + i
	}
	st, b := post(t, p.URL()+"/generate", map[string]any{"input_ids": ids, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 70}})
	out := decodeOut(t, b)
	if st != 200 || out.MetaInfo.CompletionTokens != 70 || out.MetaInfo.CachedTokens != 0 {
		t.Fatalf("whole on P: %d %s", st, b)
	}
	// The next turn: the prompt, the output, 100 new tokens.
	next := append(append(append([]int{}, ids...), out.OutputIDs...), make([]int, 100)...)
	st, b = post(t, p.URL()+"/generate", map[string]any{"input_ids": next, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 4}})
	if out := decodeOut(t, b); st != 200 || out.MetaInfo.CachedTokens < 640 {
		t.Fatalf("next turn on P: %d cached %d, want at least the first prompt's 640 from P's cache; %s", st, out.MetaInfo.CachedTokens, b)
	}
}
