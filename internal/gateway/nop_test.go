package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// KVC v3 with its only prefill worker dead: the worker is taken out of
// service (at its first refused connection, before the health checks have
// counted their failures) and every request, a new session's first turn, a
// later turn and a long append, is prefilled on a decoder instead of
// failing on P. The health checks bring P back when it answers again.
func TestGatewayKVCv3ServesWithoutP(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1}, func(c *Config) {
		// v3 with the local-prefill budget off: only P's absence puts a
		// seed on a decoder.
		c.Dispatch.V3 = kvc.V3Config{ColdRoute: true, TypedRejects: true, LocalFallback: true}
		c.Health = HealthConfig{Interval: time.Hour, Failures: 3} // no check runs within the test
	})
	first := generate(t, gw.URL, map[string]any{"input_ids": ids(1, 600), "session_id": "warm", "sampling_params": map[string]any{"max_new_tokens": 4}})
	if first.status != http.StatusOK || first.mode != "pd-router-turn1-seed" {
		t.Fatalf("with P up: %+v, want a seed through P", first)
	}
	p.Kill()
	for i := range 6 {
		sess := string(rune('a' + i))
		a := generate(t, gw.URL, map[string]any{"input_ids": ids(1000*(i+2), 600), "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 4}})
		if a.status != http.StatusOK {
			t.Fatalf("session %s turn 1 with P dead: %+v, want it served", sess, a)
		}
		b := generate(t, gw.URL, map[string]any{"input_ids": append(append(ids(1000*(i+2), 600), a.outputIDs...), ids(900000+i*20000, 9000)...), "session_id": sess,
			"sampling_params": map[string]any{"max_new_tokens": 4}})
		if b.status != http.StatusOK {
			t.Fatalf("session %s turn 2 (an append over τ_append) with P dead: %+v, want it served on a decoder", sess, b)
		}
		for _, x := range []answer{a, b} {
			if x.worker == p.URL() {
				t.Fatalf("session %s: %+v went to the dead prefill worker", sess, x)
			}
		}
	}
	var down bool
	srv.locked(func() { down = srv.disp.Down(kvc.RolePrefill, 0) })
	if !down {
		t.Fatal("the dead prefill worker is still in service")
	}
	settled(t, d0.URL())
	settled(t, d1.URL())
}

// TestGatewayKVCv3SessionOnDeadP: a session v3 hosts whole on the prefill
// worker, whose process is then gone: its next turn is not answered 503
// (the fault run's two losses under v3 before the fix) but served on the
// decoder, as the turns that P would have prefilled are; P is out of
// service at once.
func TestGatewayKVCv3SessionOnDeadP(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true })
	d := worker(t, engine.RoleDecode, true)
	gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Dispatch.V3 = kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true, ColdInflightTokens: 6144,
			LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true}
		c.Health = HealthConfig{Interval: time.Hour, Failures: 3} // no check runs within the test
	})
	b1, stop := v3SessionOnP(t, gw.URL, p, d)
	stop()
	p.Kill()
	b2 := generate(t, gw.URL, map[string]any{"input_ids": append(append(ids(50000, 2000), b1.outputIDs...), ids(700000, 300)...),
		"session_id": "b", "sampling_params": map[string]any{"max_new_tokens": 8}})
	if b2.status != http.StatusOK || b2.worker != d.URL() {
		t.Fatalf("b turn 2 with its host P dead: %+v, want it served on the decoder", b2)
	}
	var down bool
	srv.locked(func() { down = srv.disp.Down(kvc.RolePrefill, 0) })
	if !down {
		t.Fatal("the dead prefill worker is still in service")
	}
	settled(t, d.URL())
}
