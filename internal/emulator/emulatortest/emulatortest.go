// Package emulatortest starts emulated SGLang workers for live-stack tests
// in other packages (the gateway's, the replay's): on loopback, 20× faster
// than real time, stopped when the test ends.
package emulatortest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// TimeScale is the speed-up the workers run at.
const TimeScale = 20

// Start runs one Qwen3-30B-A3B/H200 worker of role; session makes a decoder
// keep sessions (the KVC decoder).
func Start(t testing.TB, role engine.Role, session bool, faults emulator.Faults) *emulator.Server {
	t.Helper()
	return StartAt(t, "127.0.0.1:0", role, session, faults)
}

// StartAt is Start listening on addr: a worker restarted where one was.
func StartAt(t testing.TB, addr string, role engine.Role, session bool, faults emulator.Faults) *emulator.Server {
	t.Helper()
	return StartWith(t, addr, role, func(cfg *emulator.Config) {
		cfg.Faults = faults
		if session {
			cfg.Session = engine.SessionConfig{Enabled: true}
		}
	})
}

// StartWith is StartAt with edit applied to the worker's configuration
// first (a prefill worker's --serve-whole, say).
func StartWith(t testing.TB, addr string, role engine.Role, edit func(*emulator.Config)) *emulator.Server {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	// A prefill worker answers the D→P snapshot RPCs unless edit turns
	// them off (Stock: exactly stock SGLang).
	cfg := emulator.Config{Role: role, Profile: p, TimeScale: TimeScale, SnapshotSync: role == engine.RolePrefill}
	if edit != nil {
		edit(&cfg)
	}
	s, err := emulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(addr, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			s.Kill()
		}
	})
	return s
}

// WaitHealthy waits up to 10 s for every url's /health to answer 200.
func WaitHealthy(t testing.TB, urls ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, u := range urls {
		for !healthy(u) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never became healthy", u)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func healthy(u string) bool {
	resp, err := http.Get(u + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stock is an edit for StartWith: the worker offers nothing of the KVC
// extension (no snapshot RPCs, no session cache), as stock SGLang.
func Stock(c *emulator.Config) {
	c.SnapshotSync, c.ServeWhole, c.Session = false, false, engine.SessionConfig{}
}
