package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// BenchmarkGatewayOverheadSteady measures what the gateway adds to a new
// request's TTFT while it relays 500 streams that stay open: the steady
// state of "500 concurrent streams", where BenchmarkGatewayOverhead starts
// them all at once. Two emulated workers sit behind one gateway (sticky
// routing): a slow one, in model time at the sub-benchmark's time scale,
// holds the 500 background streams (each a 50-token prompt generating
// 1,000 tokens, re-sent when it ends: 500 × 1,050 tokens fit the KV pool,
// which the engine reserves for prompt and output); a fast one (time scale 10⁹, no
// model time) answers the probes (500-token prompts, 4 tokens). An iteration is one probe straight to the
// fast worker and one through the gateway, one after the other, so the
// difference is the gateway's work plus its share of the CPU it takes from
// everything else on the machine. It reports both paths' TTFT p50 and p99,
// the p50 and p99 gaps, and the token events per second the background
// readers received (the relay load). Run with -benchtime 2000x or more (a few seconds of steady load).
func BenchmarkGatewayOverheadSteady(b *testing.B) {
	for _, c := range []struct {
		streams int
		ts      float64
	}{{20, 1}, {500, 0.1}, {500, 1}} {
		b.Run(fmt.Sprintf("streams=%d/time-scale=%g", c.streams, c.ts), func(b *testing.B) { steadyOverhead(b, c.streams, c.ts) })
	}
}

// The external form: the same measurement against a gateway and two
// workers started outside the test, so each can run on cores of its own
// (docs/gateway.md runs the gateway on one core with taskset and the
// workers and this client on the other):
//
//	go test -run X -bench GatewayOverheadExternal -benchtime 2000x ./internal/gateway/ \
//	  -args -steady.gateway URL -steady.slow URL -steady.fast URL -steady.streams 500
//
// The gateway must route colocated workers with sticky sessions, the slow
// worker listed first.
var (
	steadyGateway = flag.String("steady.gateway", "", "BenchmarkGatewayOverheadExternal: the gateway's URL")
	steadySlow    = flag.String("steady.slow", "", "BenchmarkGatewayOverheadExternal: the slow worker's URL (background streams)")
	steadyFast    = flag.String("steady.fast", "", "BenchmarkGatewayOverheadExternal: the fast worker's URL (probes)")
	steadyStreams = flag.Int("steady.streams", 500, "BenchmarkGatewayOverheadExternal: background streams")
)

func BenchmarkGatewayOverheadExternal(b *testing.B) {
	if *steadyGateway == "" || *steadySlow == "" || *steadyFast == "" {
		b.Skip("give -steady.gateway, -steady.slow and -steady.fast (after -args) to measure processes started outside the test")
	}
	measureSteady(b, *steadyGateway, *steadySlow, *steadyFast, *steadyStreams)
}

func steadyOverhead(b *testing.B, streams int, timeScale float64) {
	start := func(ts float64) *emulator.Server {
		return emulatortest.StartWith(b, "127.0.0.1:0", engine.RoleColocated, func(c *emulator.Config) { c.TimeScale = ts })
	}
	slow, fast := start(timeScale), start(1e9)
	g, err := New(Config{Colo: []string{slow.URL(), fast.URL()}, Health: HealthConfig{Interval: -1},
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicySticky}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	gw := serveGateway(g)
	defer gw.Close()
	measureSteady(b, gw.URL, slow.URL(), fast.URL(), streams)
}

// measureSteady runs the background streams through gw onto the slow
// worker and the probes, straight to the fast worker and through gw.
func measureSteady(b *testing.B, gwURL, slowURL, fastURL string, streams int) {
	gw := struct{ URL string }{gwURL}
	slow, fast := urlOnly(slowURL), urlOnly(fastURL)

	// Sticky routing pins a session to the worker its first request went
	// to, round-robin: session "bg" to the slow worker, "probe" to the fast.
	probeClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, w := range []struct{ session, want string }{{"bg", slow.URL()}, {"probe", fast.URL()}} {
		j, _ := json.Marshal(map[string]any{"input_ids": ids(7, 50), "session_id": w.session, "sampling_params": map[string]any{"max_new_tokens": 1}})
		resp, err := probeClient.Post(gw.URL+"/generate", "application/json", bytes.NewReader(j))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("X-PDHybrid-Worker"); resp.StatusCode != http.StatusOK || got != w.want {
			b.Fatalf("session %s went to %q (status %d), want %s: the gateway must route colocated workers with sticky sessions, the slow one first",
				w.session, got, resp.StatusCode, w.want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var events atomic.Int64
	var wg sync.WaitGroup
	bgClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * streams}}
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				streamOnce(ctx, bgClient, gw.URL, "bg", 10+i, 50, 1000, &events)
			}
		}()
	}
	defer func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			b.Error("background streams did not stop within 20 s of their cancellation")
		}
	}()
	for deadline := time.Now().Add(60 * time.Second); metric(b, slow.URL(), "sglang:num_running_reqs") < float64(streams)*0.95; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("only %v of %d background streams running after 60 s", metric(b, slow.URL(), "sglang:num_running_reqs"), streams)
		}
	}

	// Decoding, not still prefilling: every stream has had a token.
	for e, deadline := events.Load(), time.Now().Add(60*time.Second); events.Load()-e < int64(streams); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the background streams got %d token events in 60 s", events.Load()-e)
		}
	}
	var direct, via []time.Duration
	e0, t0 := events.Load(), time.Now()
	b.ResetTimer()
	for i := range b.N {
		a, err := streamOnce(ctx, probeClient, fast.URL(), "", 100000+i, 500, 4, nil)
		if err != nil {
			b.Fatal(err)
		}
		c, err := streamOnce(ctx, probeClient, gw.URL, "probe", 100000+i, 500, 4, nil)
		if err != nil {
			b.Fatal(err)
		}
		direct, via = append(direct, a), append(via, c)
	}
	b.StopTimer()
	rate := float64(events.Load()-e0) / time.Since(t0).Seconds()
	running := metric(b, slow.URL(), "sglang:num_running_reqs")
	reportTTFT(b, direct, via)
	b.ReportMetric(rate, "relayed-events/s")
	b.ReportMetric(running, "streams-running")
}

// streamOnce streams one request of a prompt of that many tokens (ids
// from i·1000) for max tokens to base/generate, in session (none when empty), and returns
// the time to its first token event; events, when given, counts the token
// events read.
func streamOnce(ctx context.Context, client *http.Client, base, session string, i, prompt, max int, events *atomic.Int64) (time.Duration, error) {
	body := map[string]any{"input_ids": ids(i*1000, prompt), "stream": true, "sampling_params": map[string]any{"max_new_tokens": max}}
	if session != "" {
		body["session_id"] = session
	}
	j, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/generate", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: status %d", base, resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	var first time.Duration
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "data: {") {
			if first == 0 {
				first = time.Since(t0)
			}
			if events != nil {
				events.Add(1)
			}
		}
		if err != nil {
			break
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("%s: no token event", base)
	}
	return first, nil
}

// urlOnly is a worker known by its URL.
type urlOnly string

func (u urlOnly) URL() string { return string(u) }
