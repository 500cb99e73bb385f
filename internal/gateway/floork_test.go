package gateway

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// New sessions sharing a system prompt, one after the other, on KVC v2:
// with the seed's defaults (load floor K = 0) every one goes to the decoder
// that holds the prompt (Algorithm 1's overlap comes first); with K = 200
// (serve --floor-k) they spread over the three (docs/kvc.md).
func TestGatewayFloorKSpreadsSharedPrompt(t *testing.T) {
	for _, k := range []float64{0, 200} {
		p := worker(t, engine.RolePrefill, false)
		ds := []*emulator.Server{worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)}
		gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, ds, func(c *Config) { c.Dispatch.Options.FloorK = k })
		on := map[string]int{}
		for i := range 6 {
			a := generate(t, gw.URL, map[string]any{"input_ids": append(ids(1, 640), ids(10000*(i+1), 128)...), "session_id": fmt.Sprint("s", i),
				"sampling_params": map[string]any{"max_new_tokens": 2}})
			if a.status != http.StatusOK {
				t.Fatalf("K %v, session %d: %+v", k, i, a)
			}
			on[a.worker]++
		}
		switch {
		case k == 0 && len(on) != 1:
			t.Errorf("K 0: new sessions on %v, want all on one decoder (the seed's v2)", on)
		case k > 0 && len(on) != 3:
			t.Errorf("K %v: new sessions on %v, want them on all three decoders", k, on)
		}
	}
}
