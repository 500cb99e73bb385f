package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// BenchmarkGatewayOverhead measures what the gateway adds to TTFT: 500
// concurrent streaming clients, each sending one request straight to an
// emulated worker and one through the gateway in front of it, in the same
// run, against a worker whose model time is nil (time scale 10⁹), so what
// is measured is HTTP, JSON and the control plane. An iteration is one
// such round; it reports TTFT p50 and p99 of both paths and the p99 gap,
// at 1, 50 and 500 concurrent streams. Clients, gateway and worker share
// this process and its cores: at 500 streams on 2 cores what is measured
// is mostly the run queue (docs/gateway.md).
func BenchmarkGatewayOverhead(b *testing.B) {
	for _, n := range []int{1, 50, 500} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { gatewayOverhead(b, n) })
	}
}

func gatewayOverhead(b *testing.B, streams int) {
	prof, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		b.Fatal(err)
	}
	w, err := emulator.New(emulator.Config{Role: engine.RoleColocated, Profile: prof, TimeScale: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer w.Kill()
	g, err := New(Config{Colo: []string{w.URL()}, Health: HealthConfig{Interval: -1},
		Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	gw := serveGateway(g)
	defer gw.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * streams}}
	ttft := func(base string, i int) time.Duration { return firstToken(b, client, base, i) }
	var direct, via []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, c := ttft(w.URL(), i), ttft(gw.URL, i)
				if i%2 == 1 {
					c, a = ttft(gw.URL, i), ttft(w.URL(), i) // half the clients go through the gateway first
				}
				mu.Lock()
				direct, via = append(direct, a), append(via, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	reportTTFT(b, direct, via)
}

// reportTTFT reports both paths' TTFT p50 and p99 and what the gateway
// adds at each.
func reportTTFT(b *testing.B, direct, via []time.Duration) {
	slices.Sort(direct)
	slices.Sort(via)
	q := func(x []time.Duration, p int) float64 { return float64(x[len(x)*p/100].Microseconds()) / 1e3 }
	b.ReportMetric(q(direct, 50), "direct-p50-ms")
	b.ReportMetric(q(direct, 99), "direct-p99-ms")
	b.ReportMetric(q(via, 50), "gateway-p50-ms")
	b.ReportMetric(q(via, 99), "gateway-p99-ms")
	b.ReportMetric(q(via, 50)-q(direct, 50), "added-p50-ms")
	b.ReportMetric(q(via, 99)-q(direct, 99), "added-p99-ms")
}

// firstToken streams one 500-token request of 4 tokens to base and returns
// the time to its first token event.
func firstToken(b testing.TB, client *http.Client, base string, i int) time.Duration {
	body, _ := json.Marshal(map[string]any{"input_ids": ids(i*1000, 500), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 4}})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/generate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var first time.Duration
	for {
		line, err := r.ReadString('\n')
		if first == 0 && strings.HasPrefix(line, "data: {") {
			first = time.Since(t0)
		}
		if err != nil {
			break
		}
	}
	io.Copy(io.Discard, resp.Body)
	if first == 0 {
		b.Errorf("%s: no token", base)
	}
	return first
}
