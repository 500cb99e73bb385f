package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// serve --kvc-preset v4 prices a decoder's host-tier answer live: a KVC
// decoder with a write_through host tier (40,000-token HBM pool, host 2×)
// takes session z's 3,000-token first turn as a local seed (it is idle),
// then, holding z, session a's 30,000-token first turn seeded through P
// (over its stall budget) and session b's, whose admission trims a from
// HBM; a stays on the decoder's host tier. a's second turn (a 50-token append) is a direct append there, and
// the decoder's answer says so: tier host, 29,952 host tokens of the
// cached ones. Loaded back over the H200 profile's 55.2 GB/s host link
// (2.9 GB, 53 ms) beside the first chunk, the append would stall the
// decode batch about 70 ms, over the decoder's budget of at most
// (12 ms − a 4.9 ms step) × (8 − 1) tokens ≈ 50 ms, so the gateway
// reseeds a through P (pd-router-host-tier-reseed) — P's cached prefix
// plus the transfer to the same decoder. With the tier ignored (the same
// workers, a profile without a host link: the host tokens count as
// cached, tier costing off) the same answer is a plain direct append.
// The verdict rests on modes, the worker that answered and the
// gateway's metrics, not timing.
func TestServeKVCv4CostsHostTierAnswer(t *testing.T) {
	noHost := profileWithoutHostLink(t)
	for _, tc := range []struct {
		name   string
		args   []string
		wantA2 string
	}{
		{"host tier costed", nil, kvc.ModeHostReseed},
		{"host tier ignored", []string{"--profile", noHost}, "kvcache-direct-to-d-session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.SliceTPOTS = 0.012 })
			d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
				c.Session = engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}
				c.PoolTokens = 40000
				c.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 2, WritePolicy: engine.WriteThrough}
				c.SliceTPOTS = 0.012
			})
			emulatortest.WaitHealthy(t, p.URL(), d.URL())
			gw := serveOn(t, p, d, append([]string{"--kvc-preset", "v4", "--whole-on-p=false"}, tc.args...)...)
			if m, _ := post(t, gw, "z", seq(1, 3000)); m != kvc.ModeLocalSeed {
				t.Fatalf("z turn 1 in mode %q, want %s on the idle decoder", m, kvc.ModeLocalSeed)
			}
			a1 := seq(100000, 30000)
			m, out := post(t, gw, "a", a1)
			if m != "pd-router-turn1-seed" {
				t.Fatalf("a turn 1 in mode %q, want pd-router-turn1-seed (over the decoder's stall budget)", m)
			}
			if m, _ := post(t, gw, "b", seq(200000, 30000)); m != "pd-router-turn1-seed" {
				t.Fatalf("b turn 1 in mode %q, want pd-router-turn1-seed", m)
			}
			prompt := append(append(a1, out...), seq(400000, 50)...)
			// P prefilled a's and b's first turns, and a's second only
			// when it was reseeded.
			checkTierTurn(t, gw, p.URL(), d.URL(), prompt, tc.wantA2, "on the decoder's host tier", 2)
		})
	}
}

// profileWithoutHostLink writes the H200 profile the workers run with its
// host link removed: a gateway given it has no tier costing.
func profileWithoutHostLink(t *testing.T) string {
	t.Helper()
	prof, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	delete(prof.Links, model.HostLinkName)
	b, err := json.Marshal(prof)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "no-host-link.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitMetric waits up to 15 s for the gateway's /metrics to carry line
// want (a request is counted once its relay ends, just after the client
// has its answer); it fails showing the family's lines.
func waitMetric(t *testing.T, gw, want, family string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(gw + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s:\n%s", want, grepLines(string(b), family))
		}
	}
}

// metricSum adds up the samples of Prometheus text family name.
func metricSum(body, name string) float64 {
	var sum float64
	for _, l := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// serve --kvc-preset v4 prices a decoder's storage-tier answer live, with
// the decoders' storage link given (--hicache-storage-backend mooncake,
// wait_complete): TestServeKVCv4CostsHostTierAnswer's decoder with a
// Mooncake storage tier below its host tier (host 80,000 tokens, storage
// 4 × that). z's 3,000-token first turn is a local seed; a's, b's and c's
// 30,000-token first turns are seeded through P, each new one trimming the
// one before from HBM; the host pool, full at c, drops its oldest (z, then
// a), so only storage holds a. a's 50-token append is a direct append
// there, tier storage, 29,952 storage tokens. Priced over the Mooncake link
// (2.94 GB ÷ 37.5 GB/s + 0.1 ms = 78.6 ms of prefetch), then the 53 ms
// load-back beside the chunk, it would stall the decode batch ~130 ms,
// over the decoder's ~50 ms budget: the gateway reseeds a through P. With
// no storage link (the flag left out) the storage tokens count as cached:
// the same answer is a plain direct append. The verdict rests on modes,
// the worker that answered and P's request count, not timing.
func TestServeKVCv4CostsStorageTierAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		wantA2 string
	}{
		{"storage link given", []string{"--hicache-storage-backend", "mooncake", "--hicache-storage-prefetch-policy", "wait_complete"}, kvc.ModeHostReseed},
		{"storage link unknown", nil, "kvcache-direct-to-d-session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.SliceTPOTS = 0.012 })
			d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
				c.Session = engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}
				c.PoolTokens = 40000
				c.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 2, WritePolicy: engine.WriteThrough,
					Storage: engine.StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: engine.PrefetchWaitComplete}}
				c.SliceTPOTS = 0.012
			})
			emulatortest.WaitHealthy(t, p.URL(), d.URL())
			gw := serveOn(t, p, d, append([]string{"--kvc-preset", "v4", "--whole-on-p=false"}, tc.args...)...)
			if m, _ := post(t, gw, "z", seq(1, 3000)); m != kvc.ModeLocalSeed {
				t.Fatalf("z turn 1 in mode %q, want %s on the idle decoder", m, kvc.ModeLocalSeed)
			}
			a1 := seq(100000, 30000)
			m, out := post(t, gw, "a", a1)
			if m != "pd-router-turn1-seed" {
				t.Fatalf("a turn 1 in mode %q, want pd-router-turn1-seed (over the decoder's stall budget)", m)
			}
			for i, s := range []string{"b", "c"} {
				if m, _ := post(t, gw, s, seq(200000+100000*i, 30000)); m != "pd-router-turn1-seed" {
					t.Fatalf("%s turn 1 in mode %q, want pd-router-turn1-seed", s, m)
				}
			}
			prompt := append(append(a1, out...), seq(900000, 50)...)
			// P prefilled a's, b's and c's first turns, and a's second
			// only when it was reseeded.
			checkTierTurn(t, gw, p.URL(), d.URL(), prompt, tc.wantA2, "in the decoder's storage tier only", 3)
		})
	}
}

// checkTierTurn sends session a's second turn, whose prefix sits where
// where says, and checks it ran in mode wantMode on decoder dURL and that
// the prefill worker pURL served firstTurns requests, one more when the
// turn was reseeded through it.
func checkTierTurn(t *testing.T, gw, pURL, dURL string, prompt []int, wantMode, where string, firstTurns float64) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": "a", "sampling_params": map[string]any{"max_new_tokens": 8}})
	resp, err := http.Post(gw+"/generate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a turn 2: %d %s", resp.StatusCode, b)
	}
	if m := resp.Header.Get("X-PDHybrid-Mode"); m != wantMode {
		t.Fatalf("a turn 2 (its prefix %s) in mode %q, want %s", where, m, wantMode)
	}
	if w := resp.Header.Get("X-PDHybrid-Worker"); w != dURL {
		t.Fatalf("a turn 2 answered by %q, want the decoder that holds a, %s", w, dURL)
	}
	want := `pdhybrid_requests_total{mechanism="kvcache-centric",mode="` + wantMode + `",outcome="ok"} 1`
	waitMetric(t, gw, want, "pdhybrid_requests_total")
	wantP := firstTurns
	if wantMode == kvc.ModeHostReseed {
		wantP++
	}
	if n := metricSum(getBody(t, pURL+"/metrics"), "sglang:num_requests_total"); n != wantP {
		t.Fatalf("the prefill worker served %v requests, want %v", n, wantP)
	}
}
