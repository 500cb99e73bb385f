package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// KVC v3 over HTTP, on one prefill worker with the whole-request extension
// and one KVC decoder, with the same dispatcher the simulator runs:
//
//	a, turn 1, nothing in flight: a decoder; D's seed answer with an empty
//	  queue on both sides places the prefill on D (kvcache-local-seed-on-d)
//	b, turn 1, a's long stream in flight on D: P serves fewer requests
//	  whole (0) than D has in flight (1), so P hosts b (kvcache-whole-on-p)
//	b, turn 2: stays on P, whose cache holds turn 1
//	a, turn 2: a direct append on D, which holds a
//
// and once every request has ended the dispatcher's v3 queues are empty.
func TestGatewayKVCv3(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true })
	d := worker(t, engine.RoleDecode, true)
	gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Dispatch.V3 = kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true, ColdInflightTokens: 6144,
			LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true}
	})

	b1, stop := v3SessionOnP(t, gw.URL, p, d)
	b2 := generate(t, gw.URL, map[string]any{"input_ids": append(append(ids(50000, 2000), b1.outputIDs...), ids(700000, 300)...),
		"session_id": "b", "sampling_params": map[string]any{"max_new_tokens": 8}})
	if b2.status != http.StatusOK || b2.mode != kvc.ModeWholeOnP || b2.worker != p.URL() || b2.cached < 1984 {
		t.Fatalf("b turn 2: %+v, want it whole on P again with turn 1's 1,984 whole-block tokens cached there", b2)
	}
	stop()
	settled(t, d.URL())
	settled(t, p.URL())
	deadline := time.Now().Add(5 * time.Second)
	for idle := false; !idle; time.Sleep(20 * time.Millisecond) {
		srv.locked(func() { idle = srv.disp.V3Idle() })
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher's v3 queues are not empty after every request ended")
		}
	}
}

// v3SessionOnP runs TestGatewayKVCv3's first steps: session a seeded on
// decoder d, a's long second request streaming there, and so session b's
// first turn hosted whole on prefill worker p. It returns b's answer and a
// stop that ends a's stream.
func v3SessionOnP(t *testing.T, gw string, p, d *emulator.Server) (answer, func()) {
	t.Helper()
	a1 := generate(t, gw, map[string]any{"input_ids": ids(1000, 3000), "session_id": "a", "sampling_params": map[string]any{"max_new_tokens": 8}})
	if a1.status != http.StatusOK || a1.mode != kvc.ModeLocalSeed || a1.worker != d.URL() {
		t.Fatalf("a turn 1: %+v, want %s on the decoder", a1, kvc.ModeLocalSeed)
	}
	// a's second request streams long on D while b arrives.
	ctx, cancel := context.WithCancel(context.Background())
	long := streamStart(t, ctx, gw, map[string]any{"input_ids": append(ids(1000, 3000), ids(900000, 200)...), "session_id": "a",
		"stream": true, "sampling_params": map[string]any{"max_new_tokens": 3000}})
	stop := func() { cancel(); long.Body.Close() }
	t.Cleanup(stop)
	b1 := generate(t, gw, map[string]any{"input_ids": ids(50000, 2000), "session_id": "b", "sampling_params": map[string]any{"max_new_tokens": 8}})
	if b1.status != http.StatusOK || b1.mode != kvc.ModeWholeOnP || b1.worker != p.URL() {
		t.Fatalf("b turn 1: %+v, want %s on the prefill worker", b1, kvc.ModeWholeOnP)
	}
	return b1, stop
}

// streamStart sends a streamed /generate and returns once its headers are
// in; the caller reads or closes the body.
func streamStart(t *testing.T, ctx context.Context, url string, body map[string]any) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/generate", jsonReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}
