package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// lockedBuffer is a log the gateway's goroutines write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// syncs is the gateway's D→P sync count of outcome.
func syncs(t *testing.T, gw, outcome string) float64 {
	t.Helper()
	return value(scrape(t, gw), "pdhybrid_dp_syncs_total", map[string]string{"outcome": outcome})
}

// syncsReach waits (bounded) until outcome was counted n times.
func syncsReach(t *testing.T, gw, outcome string, n float64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := syncs(t, gw, outcome)
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("D→P syncs %q: %v, want %v", outcome, got, n)
		}
	}
}

// dtopRun is one session through a KVC gateway over 1 P and 2 session-
// keeping D with D→P sync in mode: turn 1 (2,000 tokens) is seeded on
// its decoder, turns 2–4 (1,500 new tokens each) go direct there, each
// followed, with active sync, by one ok sync. Then lose makes the decoder
// lose the session ("flush": /flush_cache on it) or the session leave it
// ("drain": the admin API drains it, so it still holds the session), and
// turn 5 is reseeded through P. It returns turn 5's answer, the length of
// turn 4's prompt (the session's KV on D at its last sync), the gateway's
// URL and the prefill worker's.
func dtopRun(t *testing.T, mode, lose string, pEdit func(*emulator.Config), gEdit func(*Config)) (answer, int, string, string) {
	t.Helper()
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, pEdit)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1}, func(c *Config) {
		c.DToP = DToPConfig{Mode: mode}
		c.AdminToken = token
		c.LoadPoll = -1
		if gEdit != nil {
			gEdit(c)
		}
	})
	body := func(prompt []int) map[string]any {
		return map[string]any{"input_ids": prompt, "session_id": "s", "sampling_params": map[string]any{"max_new_tokens": 16}}
	}
	prompt := ids(1000, 2000)
	a := generate(t, gw.URL, body(prompt))
	if a.status != http.StatusOK || a.mode != "pd-router-turn1-seed" {
		t.Fatalf("turn 1: %+v", a)
	}
	home := a.worker
	for turn := 2; turn <= 4; turn++ {
		prompt = append(append(prompt, a.outputIDs...), ids(50000*turn, 1500)...)
		a = generate(t, gw.URL, body(prompt))
		if a.status != http.StatusOK || a.mode != "kvcache-direct-to-d-session" || a.worker != home {
			t.Fatalf("turn %d: %+v, want a direct append on %s", turn, a, home)
		}
		if mode == DToPActive && pEdit == nil {
			syncsReach(t, gw.URL, "ok: finalize", float64(turn-1))
		}
	}
	synced := len(prompt)
	switch lose {
	case "flush":
		settled(t, home)
		resp, err := http.Post(home+"/flush_cache", "", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("flush %s: %v %v", home, err, resp)
		}
		resp.Body.Close()
	case "drain":
		if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": home}, nil); st != http.StatusOK {
			t.Fatalf("drain %s: %d %s", home, st, b)
		}
	}
	prompt = append(append(prompt, a.outputIDs...), ids(900000, 300)...)
	a = generate(t, gw.URL, body(prompt))
	if a.status != http.StatusOK || !strings.Contains(a.mode, "reseed") {
		t.Fatalf("turn 5 after %s: %+v, want a reseed through P", lose, a)
	}
	return a, synced, gw.URL, p.URL()
}

// Active sync: after each direct append the session's KV on its decoder
// is copied into P's snapshot buffer and P's cache (three ok syncs); when
// the decoder then loses the session, the reseed finds the whole of the
// last synced prompt in P's cache. Without sync P has only turn 1's prompt.
func TestDToPActiveReseedHitsSyncedPrefix(t *testing.T) {
	var log lockedBuffer
	on, synced, gw, _ := dtopRun(t, DToPActive, "flush", nil, func(c *Config) { c.Log, c.LogDebug = &log, true })
	if want := synced / 64 * 64; on.cached < want {
		t.Errorf("active sync: the reseed found %d tokens in P's cache, want the %d synced", on.cached, want)
	}
	if n := syncs(t, gw, "ok: finalize"); n != 3 {
		t.Errorf("%v ok syncs, want 3 (one per direct append)", n)
	}
	// One debug line per sync, with its stages and sizes and nothing of the
	// prompt.
	waitFor(t, func() bool { return strings.Count(log.String(), "\n") >= 3 }, "debug line per sync")
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] != "d-to-p-sync" || m["event"] != "ok" || m["session"] != "s" ||
			m["inserted_prefix_len"].(float64) <= 0 || m["bytes_pushed"].(float64) <= 0 || m["prompt"] != nil || strings.Contains(line, "[") {
			t.Errorf("debug line %s (%v)", line, err)
		}
	}
	t.Logf("a debug line: %s", strings.SplitN(log.String(), "\n", 2)[0])
	off, _, gwOff, _ := dtopRun(t, DToPOff, "flush", nil, nil)
	if off.cached > 2000 {
		t.Errorf("sync off: the reseed found %d tokens in P's cache, want at most turn 1's 2,000", off.cached)
	}
	if n := sum(scrape(t, gwOff), "pdhybrid_dp_syncs_total"); n != 0 {
		t.Errorf("sync off counted %v syncs", n)
	}
	t.Logf("reseed (%s) after a flushed decoder: %d cached tokens with active sync (%d synced), %d without", on.mode, on.cached, synced, off.cached)
}

// Passive sync runs on the reseed, from the decoder that last held the
// session: it pays when that decoder still holds it (drained, here) and
// is skipped session-not-resident when it lost it (flushed), the seed's
// F28; the request goes on either way.
func TestDToPPassive(t *testing.T) {
	a, synced, gw, _ := dtopRun(t, DToPPassive, "drain", nil, nil)
	if want := synced / 64 * 64; a.cached < want {
		t.Errorf("passive sync from the drained decoder: %d tokens cached, want %d", a.cached, want)
	}
	if n := syncs(t, gw, "ok: finalize"); n != 1 {
		t.Errorf("%v ok syncs, want 1 (the reseed's)", n)
	}
	t.Logf("passive, drained decoder: the reseed (%s) found %d tokens in P's cache (%d synced)", a.mode, a.cached, synced)
	a, _, gw, pURL := dtopRun(t, DToPPassive, "flush", nil, nil)
	t.Logf("passive, flushed decoder: the reseed (%s) found %d tokens in P's cache", a.mode, a.cached)
	if a.cached > 2000 {
		t.Errorf("passive sync from a flushed decoder: %d tokens cached, want at most turn 1's", a.cached)
	}
	if n := syncs(t, gw, "skipped: dump: session-not-resident"); n != 1 {
		t.Errorf("%v session-not-resident dumps, want 1", n)
	}
	// The sync reserved space on P before the dump found nothing: the
	// gateway gave it back, so P holds no reservation for the session.
	resp, err := http.Post(pURL+"/_snapshot/release", "application/json", strings.NewReader(`{"session_id":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rel struct {
		OK     bool   `json:"ok"`
		Reason string `json:"reason"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rel)
	resp.Body.Close()
	if err != nil || rel.OK || rel.Reason != engine.ReasonNoPendingIngest {
		t.Errorf("P still held the failed sync's reservation: %+v %v", rel, err)
	}
}

// A stage that fails is counted with the worker's reason and the requests
// are not touched: a prefill worker with a 1-byte snapshot buffer refuses
// every prepare_receive (snapshot-buf-full); the direct appends answer as
// always and the reseed finds only what P prefilled itself.
func TestDToPSnapshotBufFull(t *testing.T) {
	a, _, gw, _ := dtopRun(t, DToPActive, "flush", func(c *emulator.Config) { c.SnapshotBufBytes = 1 }, nil)
	syncsReach(t, gw, "failed: prepare: snapshot-buf-full", 3)
	if n := syncs(t, gw, "ok: finalize"); n != 0 {
		t.Errorf("%v ok syncs into a full buffer", n)
	}
	if a.cached > 2000 {
		t.Errorf("%d tokens cached after failed syncs, want at most turn 1's", a.cached)
	}
}

// D→P sync is kvcache-centric's, in the modes the gateway runs. Background
// syncs are bounded and end with the gateway: one per session
// and MaxInflight in all (more are skipped busy), and Close cancels a sync
// stuck on a prefill worker that never answers and waits for it.
func TestDToPCloseCancelsSyncs(t *testing.T) {
	hung := make(chan struct{}, 4)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read whole: the server then sees the client leave
		hung <- struct{}{}
		<-r.Context().Done()
	}))
	defer stuck.Close()
	for _, c := range []Config{
		{Dispatch: kvc.Defaults(kvc.MechPD), Prefill: []Prefill{{URL: stuck.URL}}, Decode: []string{stuck.URL}, DToP: DToPConfig{Mode: DToPActive}},
		{Dispatch: kvc.Defaults(kvc.MechKVC), Prefill: []Prefill{{URL: stuck.URL}}, Decode: []string{stuck.URL}, DToP: DToPConfig{Mode: "on-evict"}},
	} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "D→P") {
			t.Errorf("%s with D→P sync %s: %v, want an error", c.Dispatch.Mechanism, c.DToP.Mode, err)
		}
	}
	g, err := New(Config{Dispatch: kvc.Defaults(kvc.MechKVC), Prefill: []Prefill{{URL: stuck.URL}}, Decode: []string{stuck.URL},
		DToP: DToPConfig{Mode: DToPActive, MaxInflight: 1}, Ops: Ops{LoadPoll: -1}, Health: HealthConfig{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveGateway(g)
	defer ts.Close()
	done := func() *recorder {
		return &recorder{status: http.StatusOK, last: []byte(`{"meta_info":{"completion_tokens":16,"finish_reason":{"type":"length"}}}`)}
	}
	g.afterDirect(done(), &request{session: "a", tokens: 5000}, 0)
	<-hung // a's prepare_receive is on the wire
	g.afterDirect(done(), &request{session: "a", tokens: 9000}, 0)
	g.afterDirect(done(), &request{session: "b", tokens: 5000}, 0)
	g.afterDirect(done(), &request{session: "c", tokens: 100}, 0) // below the delta: no sync
	t0 := time.Now()
	g.Close()
	if dt := time.Since(t0); dt > 2*time.Second {
		t.Errorf("Close took %v with a sync stuck", dt)
	}
	if n := syncs(t, ts.URL, "skipped: entry: busy"); n != 2 {
		t.Errorf("%v busy skips, want 2 (a's second, b over MaxInflight 1)", n)
	}
	if n := syncs(t, ts.URL, "failed: prepare: cancelled"); n != 1 {
		t.Errorf("%v cancelled syncs, want 1", n)
	}
	g.afterDirect(done(), &request{session: "d", tokens: 5000}, 0) // after Close: nothing starts
	if n := sum(scrape(t, ts.URL), "pdhybrid_dp_syncs_total"); n != 3 {
		t.Errorf("%v syncs counted in all, want 3", n)
	}
}
