package gateway

import (
	"net/http"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/kvc/kvctest"
)

// TestExecutorConformance runs the conformance suite's scripted sessions
// (kvc/kvctest) through the gateway's executor, over HTTP to emulated
// workers on loopback: the dispatcher calls in order and the belief
// afterwards must be the row's, as the simulator's executor must
// (internal/sim/conformance_test.go).
func TestExecutorConformance(t *testing.T) {
	for _, row := range kvctest.Rows {
		t.Run("gateway/"+row.Name, func(t *testing.T) {
			if row.Only != "" && row.Only != "gateway" {
				t.Skip(row.Why)
			}
			calls, snap, decoders := gatewayConformance(t, row)
			if err := row.Check(calls, snap, nil); err != nil {
				t.Fatal(err)
			}
			if row.MaxResident > 0 {
				for _, d := range decoders {
					if n := residentSessions(t, d); n > float64(row.MaxResident) {
						t.Fatalf("%s holds %g sessions, at most %d allowed", d.URL(), n, row.MaxResident)
					}
				}
			}
		})
	}
}

// gatewayConformance runs a row's turns one after another through a
// gateway in front of one emulated prefill worker and row.Decoders
// emulated KVC decoders, and returns the dispatcher's calls and final
// belief.
func gatewayConformance(t *testing.T, row kvctest.Row) ([]string, kvc.Snapshot, []*emulator.Server) {
	t.Helper()
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true })
	var decoders []*emulator.Server
	for range max(row.Decoders, 1) {
		decoders = append(decoders, emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
			c.Session = engine.SessionConfig{Enabled: true, Cap: row.SessionCap}
		}))
	}
	gw, srv := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, decoders, func(c *Config) {
		c.Dispatch = row.Config()
		c.Health.Interval = -1
	})
	var calls []string
	srv.locked(func() { srv.disp.SetTrace(func(c string) { calls = append(calls, c) }) })
	prompts := kvctest.NewPrompts()
	outs := map[string][]int{}
	for i, turn := range row.Turns {
		toks := prompts.Next(turn, outs[turn.Session])
		a := generate(t, gw.URL, map[string]any{"input_ids": toks, "session_id": turn.Session,
			"sampling_params": map[string]any{"max_new_tokens": turn.Output}})
		if a.status != http.StatusOK || len(a.outputIDs) != turn.Output {
			t.Fatalf("turn %d (%s): %+v", i+1, turn.Session, a)
		}
		outs[turn.Session] = a.outputIDs
	}
	var snap kvc.Snapshot
	var got []string
	srv.locked(func() {
		snap = srv.disp.Snapshot()
		got = append(got, calls...)
		if err := srv.disp.LifecycleErr(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("calls %q", got)
	return got, snap, decoders
}
