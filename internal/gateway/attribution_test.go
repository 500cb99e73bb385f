package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Clients that leave before their answer are no worker's fault: twelve
// requests cut by their clients while the decoders work open no breaker.
func TestClientDisconnectIsNotAWorkerFailure(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	ds := []*emulator.Server{worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)}
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, ds, nil)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			j, _ := json.Marshal(map[string]any{"input_ids": ids(1000*i, 300), "sampling_params": map[string]any{"max_new_tokens": 4000}})
			req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/generate", bytes.NewReader(j))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the handlers see their clients gone
	g.locked(func() {
		for d := range ds {
			if g.disp.BreakerOpen(g.now(), d) {
				t.Errorf("decoder %d's breaker opened on clients that left", d)
			}
		}
	})
}

// A decoder that cannot be reached, with nothing sent to the client yet,
// is retried on another: with one of two decoders killed every request is
// served, and the retries are counted against the dead one.
func TestDeadDecoderRetriedElsewhere(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, false), worker(t, engine.RoleDecode, false)
	cfg := testConfig(kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	d0.Kill()
	for i := range 8 {
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(500*i, 200), "sampling_params": map[string]any{"max_new_tokens": 3}}); a.status != http.StatusOK || a.worker != d1.URL() {
			t.Fatalf("request %d with a decoder dead: %+v", i, a)
		}
	}
	if got := value(scrape(t, gw.URL), "pdhybrid_retries_total", map[string]string{"worker": d0.URL()}); got < 1 {
		t.Errorf("retries counted against the dead decoder: %v, want ≥ 1", got)
	}
}

// A dead colocated worker is retried elsewhere too (single(): worker
// index 0 included), and the retry is counted against it.
func TestDeadColocatedWorkerRetriedElsewhere(t *testing.T) {
	c0, c1 := worker(t, engine.RoleColocated, false), worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c0, c1})
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	c0.Kill()
	for i := range 8 {
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(500*i, 200), "sampling_params": map[string]any{"max_new_tokens": 3}}); a.status != http.StatusOK || a.worker != c1.URL() {
			t.Fatalf("request %d with a colocated worker dead: %+v", i, a)
		}
	}
	if got := value(scrape(t, gw.URL), "pdhybrid_retries_total", map[string]string{"worker": c0.URL()}); got < 1 {
		t.Errorf("retries counted against the dead worker: %v, want ≥ 1", got)
	}
}

// With every worker dead, --retries 1 is one retry, not two, whichever
// path found them dead (single()'s worker, pd()'s decoder).
func TestRetriesStopAtTheBudgetWhenAllDead(t *testing.T) {
	for _, mech := range []kvc.Mechanism{kvc.MechColo, kvc.MechPD} {
		role := engine.RoleColocated
		var prefill []*emulator.Server
		if mech == kvc.MechPD {
			role = engine.RoleDecode
			prefill = []*emulator.Server{worker(t, engine.RolePrefill, false)}
		}
		ws := []*emulator.Server{worker(t, role, false), worker(t, role, false), worker(t, role, false)}
		cfg := testConfig(mech, prefill, ws)
		cfg.LoadPoll, cfg.Retries, cfg.Health = -1, 1, HealthConfig{Interval: -1}
		gw, _ := start(t, cfg)
		for _, w := range ws {
			w.Kill()
		}
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 3}}); a.status == http.StatusOK {
			t.Fatalf("%s: every worker dead, answered %+v", mech, a)
		}
		m := scrape(t, gw.URL)
		var retries float64
		for _, w := range ws {
			retries += value(m, "pdhybrid_retries_total", map[string]string{"worker": w.URL()})
		}
		if retries != 1 {
			t.Errorf("%s: %v retries with --retries 1, want 1", mech, retries)
		}
	}
}

// A colocated worker whose JSON answer breaks off before any of it reached
// the client (worker index 0 included) is retried on another worker, and
// the retry counted against it: the client never hears the cut.
func TestCutAnswerRetriedElsewhere(t *testing.T) {
	cut := rawWorker(t, false, `{"text": "part`, true)
	good := worker(t, engine.RoleColocated, false)
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechColo), Colo: []string{cut, good.URL()}, Health: HealthConfig{Interval: -1}}
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	for i := range 8 {
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(500*i, 200), "sampling_params": map[string]any{"max_new_tokens": 3}}); a.status != http.StatusOK || a.worker != good.URL() {
			t.Fatalf("request %d with a worker cutting its answers: %+v", i, a)
		}
	}
	if got := value(scrape(t, gw.URL), "pdhybrid_retries_total", map[string]string{"worker": cut}); got < 1 {
		t.Errorf("retries counted against the cutting worker: %v, want ≥ 1", got)
	}
}

// With every worker cutting its answer, --retries 1 is one retry too.
func TestRetriesStopAtTheBudgetWhenAllCut(t *testing.T) {
	var urls []string
	for range 3 {
		urls = append(urls, rawWorker(t, false, `{"text": "part`, true))
	}
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechColo), Colo: urls, Retries: 1, Health: HealthConfig{Interval: -1}}
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	if a := generate(t, gw.URL, map[string]any{"input_ids": ids(0, 200), "sampling_params": map[string]any{"max_new_tokens": 3}}); a.status == http.StatusOK {
		t.Fatalf("every answer cut, answered %+v", a)
	}
	m := scrape(t, gw.URL)
	var retries float64
	for _, u := range urls {
		retries += value(m, "pdhybrid_retries_total", map[string]string{"worker": u})
	}
	if retries != 1 {
		t.Errorf("%v retries with --retries 1, want 1", retries)
	}
}
