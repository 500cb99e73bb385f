package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/front"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Two gateway replicas over the same workers share no state: a session
// seeded through replica A on decoder d1 continues through replica B,
// which never saw it, direct to d1 — B's residency probe asks the decoders
// where the session lives. Without the probe, B's blind choice (d0, the
// tie break) seeds the session a second time.
func TestReplicaWithoutStateRoutesBySession(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	pool := []*emulator.Server{d0, d1}
	a := gateway(t, kvc.MechKVC, []*emulator.Server{p}, pool)
	probing := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, pool, nil)
	blind := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, pool, func(c *Config) { c.NoResidencyProbe = true })

	body := func(session string, prompt []int) map[string]any {
		return map[string]any{"input_ids": prompt, "session_id": session, "sampling_params": map[string]any{"max_new_tokens": 8}}
	}
	// Replica A puts one session on d0, then ours on d1.
	if r := generate(t, a.URL, body("other", ids(90000, 1500))); r.status != http.StatusOK || r.worker != d0.URL() {
		t.Fatalf("first session: %+v, want it on %s", r, d0.URL())
	}
	prompt := ids(1000, 2000)
	r := generate(t, a.URL, body("s", prompt))
	if r.status != http.StatusOK || r.mode != "pd-router-turn1-seed" || r.worker != d1.URL() {
		t.Fatalf("turn 1 through A: %+v, want a seed on %s", r, d1.URL())
	}
	next := func(prev []int, out []int, n int) []int {
		return append(append(append([]int{}, prev...), out...), ids(50000+n, 300)...)
	}
	prompt = next(prompt, r.outputIDs, 2)
	r2 := generate(t, probing.URL, body("s", prompt))
	if r2.status != http.StatusOK || r2.mode != "kvcache-direct-to-d-session" || r2.worker != d1.URL() {
		t.Fatalf("turn 2 through a fresh replica: %+v, want a direct append on %s", r2, d1.URL())
	}
	if r2.cached < len(prompt)-300-64 {
		t.Fatalf("turn 2 found %d of %d tokens on the decoder", r2.cached, len(prompt))
	}
	// The blind replica, for contrast: it asks d0, which does not hold
	// the session, and seeds it there again.
	prompt = next(prompt, r2.outputIDs, 3)
	if r3 := generate(t, blind.URL, body("s", prompt)); r3.mode == "kvcache-direct-to-d-session" {
		t.Fatalf("turn 3 through a replica without the probe went direct (%+v): the probe test shows nothing", r3)
	}
}

// Sessions idle beyond SessionIdle are forgotten (the gateway's memory
// follows its live sessions); a live one is kept.
func TestIdleSessionsExpire(t *testing.T) {
	g, err := New(Config{Colo: []string{"http://127.0.0.1:1"}, Health: HealthConfig{Interval: -1}, SessionIdle: time.Minute,
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	now := time.Now()
	g.locked(func() {
		for _, id := range []string{"old", "live"} {
			g.turns[id] = 3
			d := g.disp.Begin(0, kvc.Request{Session: id, Turn: 1, Blocks: []uint64{1}, Input: 64, Output: 1})
			d.Accepted()
			d.Finished(true)
		}
		g.seen["old"], g.seen["live"] = now.Add(-2*time.Minute), now
		g.expireSessions(now)
	})
	if _, ok := g.turns["old"]; ok || g.disp.Sessions() != 1 {
		t.Fatalf("after expiry: turns %v, %d dispatcher sessions; want only the live one", g.turns, g.disp.Sessions())
	}
	if _, ok := g.turns["live"]; !ok {
		t.Fatal("the live session was forgotten")
	}
}

// The expiry runs from countTurn every 1024th dispatch, not only when
// called: the 1023rd leaves an idle session, the 1024th forgets it.
func TestIdleSessionsExpireEvery1024Dispatches(t *testing.T) {
	g, err := New(Config{Colo: []string{"http://127.0.0.1:1"}, Health: HealthConfig{Interval: -1}, SessionIdle: time.Minute,
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.locked(func() {
		g.turns["old"] = 3
		g.seen["old"] = time.Now().Add(-2 * time.Minute)
		g.dispatched.Store(1022)
	})
	for _, step := range []struct {
		n    int
		kept bool
	}{{1023, true}, {1024, false}} {
		g.countTurn("live")
		var kept bool
		g.locked(func() { _, kept = g.turns["old"] })
		if kept != step.kept {
			t.Fatalf("after dispatch %d: the idle session kept %v, want %v", step.n, kept, step.kept)
		}
	}
}

// Behind a front (internal/front, as `up --gateways N` runs it) each
// request reaches one replica, /admin/ and /metrics included, so a drain
// sent through the front drains one replica only. The per-client limit is
// each replica's own, and every client reaches a replica from the front's
// address: without a client header, clients behind the front share one
// limit per replica; with one, each client has its own, per replica.
func TestReplicasBehindFront(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	stack := func(header string) (*httptest.Server, [2]string) {
		var reps [2]string
		for i := range reps {
			cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
			cfg.AdminToken, cfg.LoadPoll, cfg.MaxClientConcurrency, cfg.ClientHeader = token, -1, 1, header
			gw, _ := start(t, cfg)
			reps[i] = gw.URL
		}
		f, err := front.New(front.RoundRobin, reps[:])
		if err != nil {
			t.Fatal(err)
		}
		fr := httptest.NewServer(f)
		t.Cleanup(fr.Close)
		return fr, reps
	}
	short := map[string]any{"input_ids": ids(1, 50), "sampling_params": map[string]any{"max_new_tokens": 2}}
	long := map[string]any{"input_ids": ids(1, 50), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 3000}}
	// send posts through the front as client key and checks which replica
	// answered and how; a stream is left open for the caller to close.
	send := func(fr string, reps [2]string, body map[string]any, key string, rep, want int) *http.Response {
		t.Helper()
		resp := post(t, fr+"/generate", body, map[string]string{"X-Api-Key": key})
		if got := resp.Header.Get("X-PDHybrid-Replica"); resp.StatusCode != want || got != reps[rep] {
			t.Fatalf("client %s: %d from %s, want %d from replica %d (%s)", key, resp.StatusCode, got, want, rep, reps[rep])
		}
		if body["stream"] == true {
			firstLine(t, resp)
			return resp
		}
		resp.Body.Close()
		return nil
	}

	// No client header: alice's stream on replica 0 fills the one slot
	// every client behind the front shares there.
	fr, reps := stack("")
	a := send(fr.URL, reps, long, "alice", 0, http.StatusOK)
	send(fr.URL, reps, short, "bob", 1, http.StatusOK)
	send(fr.URL, reps, short, "carol", 0, http.StatusTooManyRequests)
	a.Body.Close()

	// --client-header X-Api-Key: each client its own slot on each replica.
	fr, reps = stack("X-Api-Key")
	a = send(fr.URL, reps, long, "alice", 0, http.StatusOK)
	send(fr.URL, reps, short, "alice", 1, http.StatusOK) // replica 1 does not count replica 0's
	send(fr.URL, reps, short, "carol", 0, http.StatusOK)
	send(fr.URL, reps, short, "bob", 1, http.StatusOK)
	send(fr.URL, reps, short, "alice", 0, http.StatusTooManyRequests)
	defer a.Body.Close()

	// /metrics and /admin/ through the front: one replica per request.
	var seen []string
	for range 2 {
		resp, err := http.Get(fr.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		seen = append(seen, resp.Header.Get("X-PDHybrid-Replica"))
	}
	if seen[0] == seen[1] {
		t.Errorf("two scrapes through the front both reached %s, want one replica each", seen[0])
	}
	if st, b := admin(t, http.MethodPost, fr.URL+"/admin/workers/drain", token, map[string]any{"url": c.URL()}, nil); st != http.StatusOK {
		t.Fatalf("drain through the front: %d %s", st, b)
	}
	draining := 0
	for _, r := range reps {
		if w, _ := workerState(t, r, c.URL()); w.State == "draining" {
			draining++
		}
	}
	if draining != 1 {
		t.Errorf("a drain through the front drained the worker on %d replicas, want 1", draining)
	}
}
