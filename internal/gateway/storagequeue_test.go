package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// storageFront is a proxy before decoder d that turns its direct-append
// admission answers into storage answers naming every cached token
// storage's, with storage_queue_ms set to the raw JSON in queue ("": left
// out): a decoder on a shared pool whose link is booked by others.
func storageFront(t *testing.T, d *emulator.Server, queue *atomic.Value) *httptest.Server {
	t.Helper()
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path != "/session_cache/admit_direct_append" {
			return nil
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		var rep map[string]any
		if json.Unmarshal(b, &rep) == nil && rep["mode"] == "direct_append" {
			rep["tier"], rep["storage_tokens"], rep["host_tokens"] = "storage", rep["cached_tokens"], 0
			if q := queue.Load().(string); q != "" {
				rep["storage_queue_ms"] = json.RawMessage(q)
			}
			b, _ = json.Marshal(rep)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	return front
}

// A shared storage pool's booked time moves a placement live, as in the
// simulator (kvc TestStorageQueuesMovePlacement): the gateway's v3 with
// hand-set tier costs (100,000 B a token, 50 layers, 10 µs a token of
// prefill, a 50 GB/s host link, a 50 GB/s storage link of 1 ms setup, a
// 10 GB/s P→D link). Session a's second turn (1,708 tokens) is answered
// direct from storage for its 1,500 cached tokens. Over the decoder's own
// link the prefetch takes 0.001 + 0.15 GB ÷ 50 GB/s = 4 ms, the step
// 3.04 ms (the 3 ms load beside the 208-token chunk): 7.04 ms, under the
// reseed's 17.08 ms transfer alone, so it loads back. Booked 150 ms ahead
// on a pool of 100 GB/s aggregate, the prefetch ends at 0.15 + 0.0015 +
// 0.001 s: 155.5 ms in all, over the reseed's at most 34.2 ms (every token
// computed on P): reseeded through P to the same decoder. A queue the
// gateway cannot price (no pool bandwidth given) or cannot read ("soon":
// read as absent, counted and logged) leaves the load-back.
func TestStorageQueueMovesPlacementLive(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	var queue atomic.Value
	front := storageFront(t, d, &queue)
	for i, c := range []struct {
		name   string
		poolBW float64
		queue  string
		want   string
		bad    float64
	}{
		{"pool booked 150 ms ahead", 100e9, "150", kvc.ModeHostReseed, 0},
		{"nothing booked", 100e9, "", "kvcache-direct-to-d-session", 0},
		{"pool bandwidth unknown", 0, "150", "kvcache-direct-to-d-session", 0},
		{"queue unreadable", 100e9, `"soon"`, "kvcache-direct-to-d-session", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			queue.Store(c.queue)
			var log syncBuffer
			gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(cfg *Config) {
				cfg.Decode = []string{front.URL}
				cfg.Log = &log
				cfg.Dispatch.V3 = kvc.V3Config{TypedRejects: true,
					Isolation: kvc.DecodeIsolation{Cost: kvc.StallCost{PerTokenS: 1e-5, ChunkTokens: 8192}},
					Tiers: kvc.TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: 50e9, XferBandwidth: 10e9,
						StorageBandwidth: 50e9, StorageSetupS: 0.001, StoragePoolBandwidth: c.poolBW}}
			})
			got := turns(t, gw.URL, fmt.Sprint("a", i), 2)
			if len(got) != 2 || got[1].status != http.StatusOK {
				t.Fatalf("turns: %+v", got)
			}
			if got[1].mode != c.want || got[1].worker != front.URL {
				t.Fatalf("turn 2 in mode %q on %s, want %s on the decoder %s", got[1].mode, got[1].worker, c.want, front.URL)
			}
			if n := metricOf(g.badFields.total.WithLabelValues(front.URL, fieldStorageQueue)); n != c.bad {
				t.Fatalf("bad storage_queue_ms counted %v, want %v", n, c.bad)
			}
			if logged := strings.Contains(log.String(), `"field":"storage_queue_ms"`); logged != (c.bad > 0) {
				t.Fatalf("the bad field logged %v, want %v:\n%s", logged, c.bad > 0, log.String())
			}
		})
	}
}
