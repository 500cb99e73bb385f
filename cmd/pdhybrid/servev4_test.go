package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// serveOn starts `pdhybrid serve` in front of prefill worker p and decoder
// d with args and returns its URL; the process ends with the test.
func serveOn(t *testing.T, p, d *emulator.Server, args ...string) string {
	t.Helper()
	c := pdhybrid(t, append([]string{"serve", "--prefill", fmt.Sprintf("%s@%d", p.URL(), p.BootstrapPort()), "--decode", d.URL(),
		"--port", "0", "--load-poll-interval", "0"}, args...)...)
	out, _ := c.StdoutPipe()
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.Fields(line + " x x")[1], "url=")
	if err != nil || !ok {
		c.Wait()
		t.Fatalf("serve printed %q (%v)\n%s", line, err, stderr.String())
	}
	return url
}

// generateMode sends one /generate of n prompt tokens from first in
// session s and returns the execution mode the gateway answered with.
func generateMode(t *testing.T, gw, s string, first, n int) string {
	t.Helper()
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = first + i
	}
	body, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": s, "sampling_params": map[string]any{"max_new_tokens": 8}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session %s: %d %s", s, resp.StatusCode, b)
	}
	return resp.Header.Get("X-PDHybrid-Mode")
}

// serve --kvc-preset v4 runs v4's cost model, not v3's placement: on one
// prefill worker and one KVC decoder (whole-on-P off, so every cold
// session is the decoder's), session a's 3,000-token first turn is a
// local seed on the idle decoder under both presets; then session c's
// 30,000-token first turn, with a pinned on that decoder, is a local seed
// under v3 (30,000 queued tokens are within its 262,144-token budget and
// no more than P's) but goes through P under v4: c's prefill (0.99 s
// from the H200 profile) is over the decoder's stall budget, at most
// (12 ms − a 4.9 ms step) × (8 − 1) tokens ≈ 50 ms whatever the clock,
// and neither escape applies (P's queue is empty, and P and the decoder
// would take the same time). The decoder slices at 12 ms as
// `worker --tpot-slo-ms 12` does; the verdict rests on modes, not timing.
func TestServeKVCv4PlacesByStallBudget(t *testing.T) {
	for _, tc := range []struct {
		preset, wantC string
	}{
		{"v3", kvc.ModeLocalSeed},
		{"v4", "pd-router-turn1-seed"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.ServeWhole = true; c.SliceTPOTS = 0.012 })
			d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
				c.Session = engine.SessionConfig{Enabled: true}
				c.SliceTPOTS = 0.012
			})
			emulatortest.WaitHealthy(t, p.URL(), d.URL())
			gw := serveOn(t, p, d, "--kvc-preset", tc.preset, "--whole-on-p=false")
			if m := generateMode(t, gw, "a", 1000, 3000); m != kvc.ModeLocalSeed {
				t.Fatalf("a turn 1 in mode %q, want %s on the idle decoder", m, kvc.ModeLocalSeed)
			}
			if m := generateMode(t, gw, "c", 100000, 30000); m != tc.wantC {
				t.Fatalf("c turn 1 in mode %q, want %s", m, tc.wantC)
			}
		})
	}
}

// serve's cost model is the simulator's: the H200 profile's prefill terms
// at its 8,192-token chunks, and tier costing from its host link and the
// RDMA P→D link (a decoder's host-tier answer is priced live as in the
// simulator), through the same kvc functions; --chunk-tokens and --link
// reach it, and a profile without the link is refused.
func TestServeCostModel(t *testing.T) {
	prof, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	f := serveCostFlags{model: "qwen3-30b-a3b", hardware: "h200-141g", link: "rdma-400g"}
	sc, tc, err := f.costs()
	if err != nil {
		t.Fatal(err)
	}
	wantTC, err := kvc.TierCostOf(prof, "rdma-400g")
	if err != nil {
		t.Fatal(err)
	}
	if sc != kvc.StallCostOf(prof, 8192) || tc != wantTC || !tc.On() || sc.PerTokenS <= 0 {
		t.Fatalf("costs %+v, %+v; want %+v, %+v", sc, tc, kvc.StallCostOf(prof, 8192), wantTC)
	}
	f.chunk, f.link = 4096, "tcp-loopback"
	sc, tc, _ = f.costs()
	if sc.ChunkTokens != 4096 || tc.XferBandwidth != prof.Links["tcp-loopback"].BandwidthBytes {
		t.Fatalf("--chunk-tokens 4096 --link tcp-loopback: %+v, %+v", sc, tc)
	}
	f.link = "no-such-link"
	if _, _, err := f.costs(); err == nil || !strings.Contains(err.Error(), "--link") {
		t.Fatalf("--link no-such-link: %v, want an error naming --link", err)
	}
}
