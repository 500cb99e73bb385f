package emulator

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// The admission reply's storage_queue_ms (revision 1.4) is how long the
// shared pool's aggregate link is booked past the answer, the figure the
// simulator's engine puts in AdmitReply.StorageQueueS (engine
// TestStorageAnswerNamesThePoolsQueue, by the same hand figures). d, an
// emulated decoder on a fake clock, shares the pool's service with another
// worker, which wrote session a's 1,280 tokens (20 blocks of 64) and, at
// model time 0 on d's timeline, booked their prefetch: 1,280 × 98,304 B
// = 125.8 MB over 12.5 GB/s aggregate, the link busy until 10.066 ms. d
// never held a; its seed answer for a's 1,344-token turn names the pool's
// 1,280 tokens and, asked at 4 ms, the link booked 6.066 ms ahead; at
// 20 ms nothing is booked and the field is left out. An unlimited pool
// books nothing: left out too.
func TestAdmitReplyNamesThePoolsQueue(t *testing.T) {
	booked := float64(1280*98304) / 12.5e9
	for _, bw := range []float64{12.5e9, 0} {
		store := NewStoreServer()
		store.BandwidthBytes = bw
		srv := httptest.NewServer(store)
		defer srv.Close()
		clk := NewFakeClock()
		d := start(t, Config{Role: engine.RoleDecode, TimeScale: 1, PoolTokens: 4000, Clock: clk,
			Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession},
			HiCache: engine.HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: engine.WriteThrough,
				Storage: engine.StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: engine.PrefetchWaitComplete, Index: NewStoreClient(srv.URL)}}})
		prompt := ids(1, 1344)
		other := NewStoreClient(srv.URL)
		if _, err := other.Open(64, 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := other.Write(0, BlockHashes(prompt[:1280], 64), 64); !ok {
			t.Fatal("precondition: the other worker's write of a was refused")
		}
		other.SetClock(d.d.start, 1)
		if free, ok := other.Book(0, 1280*98304); ok != (bw > 0) || ok && math.Abs(free-booked) > 1e-12 {
			t.Fatalf("aggregate %g B/s: the other worker's prefetch booked until %v (%v), want %v", bw, free, ok, booked)
		}
		for _, c := range []struct {
			at, wantMs float64
		}{{0.004, (booked - 0.004) * 1000}, {0.020, 0}} {
			clk.Advance(time.Duration(c.at*1e9) - clk.Now().Sub(d.d.start))
			if bw == 0 {
				c.wantMs = 0
			}
			st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "a", "input_ids": prompt, "max_new_tokens": 4})
			var a AdmitResponse
			if err := json.Unmarshal(b, &a); st != 200 || err != nil {
				t.Fatalf("admission: %d %s", st, b)
			}
			if a.Mode != "seed" || a.Tier != engine.TierStorage || a.StorageTokens != 1280 || math.Abs(a.StorageQueueMs-c.wantMs) > 1e-9 {
				t.Fatalf("aggregate %g B/s, asked at %g s: %s; want a seed naming the pool's 1,280 tokens, booked %.6f ms ahead", bw, c.at, b, c.wantMs)
			}
			if has := strings.Contains(string(b), `"storage_queue_ms"`); has != (c.wantMs > 0) {
				t.Fatalf("aggregate %g B/s, asked at %g s: %s; storage_queue_ms on the wire %v, want %v", bw, c.at, b, has, c.wantMs > 0)
			}
			// A prompt the pool does not hold names no storage tokens,
			// and so no queue, however booked the pool is.
			if st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "x", "input_ids": ids(5, 1344), "max_new_tokens": 4}); st != 200 || strings.Contains(string(b), "storage") {
				t.Fatalf("aggregate %g B/s, asked at %g s for a prompt the pool lacks: %d %s; want no storage tokens and no queue", bw, c.at, st, b)
			}
		}
	}
}

// The service's queue answer books nothing, is in the asking worker's
// seconds on the shared timeline (a worker whose model time 0 came 2 ms
// after the booker's asks at its 1 ms: the booker's 3 ms; workers of other
// time scales), and refuses what it cannot place.
func TestStoreServiceQueue(t *testing.T) {
	store := NewStoreServer()
	store.BandwidthBytes = 1e9
	epoch := time.Unix(1_800_000_000, 0)
	if _, code := store.do("/storage/open", storeReq{BlockSize: 16, Capacity: 100}); code != 200 {
		t.Fatal("open refused")
	}
	at := func(q storeReq) float64 {
		t.Helper()
		rep, code := store.do("/storage/queue", q)
		if code != 200 || !rep.Booked {
			t.Fatalf("queue %+v: %d %+v", q, code, rep)
		}
		return rep.Free
	}
	if q := at(storeReq{Start: 1, EpochNS: epoch.UnixNano(), Scale: 1}); q != 0 {
		t.Fatalf("nothing booked: queue %v s, want 0", q)
	}
	// 10 MB at 1 GB/s from the booker's 0: busy until its 10 ms.
	if rep, _ := store.do("/storage/book", storeReq{Start: 0, Bytes: 10e6, EpochNS: epoch.UnixNano(), Scale: 1}); !rep.Booked {
		t.Fatal("booking refused")
	}
	later := epoch.Add(2 * time.Millisecond).UnixNano()
	for range 2 { // asked twice: the queue books nothing
		if q := at(storeReq{Start: 0.001, EpochNS: later, Scale: 1}); math.Abs(q-0.007) > 1e-12 {
			t.Fatalf("asked at the booker's 3 ms: queue %v s, want 0.007", q)
		}
	}
	// Time scales: a booker running 20 model seconds a wall second books
	// 1 GB of model time at 1 GB/s, busy 1 model s = 0.05 wall s past its
	// start; a worker of scale 2 whose model time 0 is that start asks at
	// its 0.02 s (0.01 wall s): booked 0.04 wall s = 0.08 of its seconds.
	scaled := NewStoreServer()
	scaled.BandwidthBytes = 1e9
	scaled.do("/storage/open", storeReq{BlockSize: 16, Capacity: 100})
	scaled.do("/storage/book", storeReq{Start: 0, Bytes: 1e9, EpochNS: epoch.UnixNano(), Scale: 20})
	if rep, _ := scaled.do("/storage/queue", storeReq{Start: 0.02, EpochNS: epoch.UnixNano(), Scale: 2}); math.Abs(rep.Free-0.08) > 1e-12 {
		t.Fatalf("time scales 20 and 2: queue %v s, want 0.08", rep.Free)
	}
	if q := at(storeReq{Start: 0.5, EpochNS: epoch.UnixNano(), Scale: 1}); q != 0 {
		t.Fatalf("asked past the bookings: %v s, want 0", q)
	}
	for _, q := range []storeReq{{Start: -1, EpochNS: 1, Scale: 1}, {Start: 0, EpochNS: 0, Scale: 1}, {Start: 0, EpochNS: 1}, {Start: math.NaN(), EpochNS: 1, Scale: 1}} {
		if rep, code := store.do("/storage/queue", q); code != 400 || rep.Booked {
			t.Errorf("queue %+v: %d %+v, want 400", q, code, rep)
		}
	}
	unlimited := NewStoreServer()
	unlimited.do("/storage/open", storeReq{BlockSize: 16, Capacity: 100})
	if rep, code := unlimited.do("/storage/queue", storeReq{Start: 0, EpochNS: 1, Scale: 1}); code != 200 || rep.Booked {
		t.Fatalf("unlimited pool: %d %+v, want not booked", code, rep)
	}
}
