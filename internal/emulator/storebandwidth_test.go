package emulator

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// bwWorker is a prefix-cache worker (4,096-token HBM pool, host 1.5 ×
// it, 16-token blocks, Mooncake storage of 20,000 tokens, wait_complete)
// whose storage pool is the service's at url, its bookings made on a
// clock whose model time 0 is epoch (time scale 1).
func bwWorker(t *testing.T, name, url string, epoch time.Time) *engine.Worker {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	c := NewStoreClient(url)
	c.SetClock(epoch, 1)
	w, err := engine.New(engine.Config{Name: name, Profile: p, BlockSize: 16, PoolTokens: 4096, ChunkTokens: 8192, PrefixCache: true,
		HiCache: engine.HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: engine.StorageConfig{Enabled: true, Backend: "mooncake",
			SizeBytes: 20000 * p.Model.KVBytesPerToken(), Prefetch: engine.PrefetchWaitComplete, Index: c}}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// run submits a request at now and advances w until it is done; it
// returns the time it ended.
func run(t *testing.T, w *engine.Worker, now float64, id int64, blocks []uint64, input int) float64 {
	t.Helper()
	r := &engine.Request{ID: id, Kind: engine.Full, Blocks: blocks, Input: input, Output: 1}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	for i := 0; r.Stage != engine.StageDone && i < 1000; i++ {
		next, ok := w.NextTime()
		if !ok {
			break
		}
		now = max(now, next)
		w.Advance(now)
	}
	if r.Stage != engine.StageDone {
		t.Fatalf("request %d did not finish (stage %d)", id, r.Stage)
	}
	return now
}

// Two worker processes' concurrent prefetches share the shared pool's
// aggregate bandwidth, booked at the loopback service first booked first
// served, as the simulator's shared pool books them
// (engine TestSharedStorageAggregateBandwidth, by the same hand figures).
// w1 writes a's 2,048 tokens (128 blocks of 16) and pushes them out of
// its HBM and host with b's and c's 3,000; then w1 and w2 prefetch a's
// next turn (2,064 tokens: w1 reads 2,048 from storage, x1 = 201.3 MB;
// w2, which never held a, 2,063 of the path w1 wrote, x2 = 202.8 MB).
// At 12.5 GB/s aggregate, at the same instant, w1 waits x1 ÷ 12.5 GB/s +
// the link's 0.1 ms = 16.206 ms and w2 (x1 + x2) ÷ 12.5 GB/s + 0.1 ms =
// 32.430 ms; w2 alone (a second later, the link free again) waits
// x2 ÷ 12.5 GB/s + 0.1 ms = 16.324 ms, so together it waits x1 ÷ 12.5
// GB/s = 16.106 ms longer. Unlimited, each waits its own Mooncake link's
// x ÷ 37.5 GB/s + 0.1 ms. The same instant on two clocks whose model time
// 0 is half a second apart (w2 started later, so its turn is at start −
// 0.5 s of its own) is the same booking order.
func TestStoreServiceAggregateBandwidth(t *testing.T) {
	x1, x2 := float64(2048*98304), float64(2063*98304)
	epoch := time.Unix(1_800_000_000, 0)
	chain := func(ns uint64, n int) []uint64 { return blocks(ns, n) }
	for _, c := range []struct {
		name     string
		bw       float64
		w2Later  float64       // w2's turn this long after w1's
		w2Epoch  time.Duration // w2's model time 0 after w1's
		w1S, w2S float64
	}{
		{"unlimited", 0, 0, 0, 1e-4 + x1/37.5e9, 1e-4 + x2/37.5e9},
		{"12.5 GB/s together", 12.5e9, 0, 0, x1/12.5e9 + 1e-4, (x1+x2)/12.5e9 + 1e-4},
		{"12.5 GB/s alone", 12.5e9, 1, 0, x1/12.5e9 + 1e-4, x2/12.5e9 + 1e-4},
		{"12.5 GB/s together, clocks apart", 12.5e9, 0, 500 * time.Millisecond, x1/12.5e9 + 1e-4, (x1+x2)/12.5e9 + 1e-4},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := NewStoreServer()
			store.BandwidthBytes = c.bw
			srv := httptest.NewServer(store)
			defer srv.Close()
			w1, w2 := bwWorker(t, "w1", srv.URL, epoch), bwWorker(t, "w2", srv.URL, epoch.Add(c.w2Epoch))
			a := chain(1, 129)
			now := run(t, w1, 0, 1, a[:128], 2048)
			now = run(t, w1, now+1, 2, chain(2, 188), 3000)
			now = run(t, w1, now+1, 3, chain(3, 188), 3000)
			if w1.PrefixMatch(a[:128], 2048) != 0 || w1.HostPrefixMatch(a[:128], 2048) != 0 {
				t.Fatal("precondition: a still in w1's HBM or host")
			}
			start := now + 1
			run(t, w1, start, 5, a, 2064)
			run(t, w2, start+c.w2Later-c.w2Epoch.Seconds(), 5, a, 2064)
			s1, s2 := w1.Stats(), w2.Stats()
			if s1.StoragePrefetchedTokens != 2048 || s2.StoragePrefetchedTokens != 2064 {
				t.Fatalf("prefetched %d and %d tokens, want 2048 and 2064 (whole pages)", s1.StoragePrefetchedTokens, s2.StoragePrefetchedTokens)
			}
			if math.Abs(s1.StorageWaitS-c.w1S) > 1e-9 || math.Abs(s2.StorageWaitS-c.w2S) > 1e-9 {
				t.Fatalf("w1 waited %.6f s, w2 %.6f s; want %.6f and %.6f", s1.StorageWaitS, s2.StorageWaitS, c.w1S, c.w2S)
			}
		})
	}
}

// A booking the service cannot take is refused 400 naming its fields; a
// client whose worker's clock is not set books nothing, and one whose
// service is gone books nothing and counts the failure.
func TestStoreServiceBookingEdges(t *testing.T) {
	store := NewStoreServer()
	store.BandwidthBytes = 1e9
	srv := httptest.NewServer(store)
	c := NewStoreClient(srv.URL)
	if _, err := c.Open(16, 1000); err != nil {
		t.Fatal(err)
	}
	for _, q := range []storeReq{{Start: -1, Bytes: 1, Scale: 1, EpochNS: 1}, {Start: 0, Bytes: -1, Scale: 1, EpochNS: 1},
		{Start: 0, Bytes: 1, Scale: 0, EpochNS: 1}, {Start: 0, Bytes: 1, Scale: 1}, {Start: math.NaN(), Bytes: 1, Scale: 1, EpochNS: 1}} {
		if rep, code := store.do("/storage/book", q); code != 400 || rep.Booked {
			t.Errorf("booking %+v: %d %+v, want 400", q, code, rep)
		}
	}
	if _, ok := c.Book(0, 1e9); ok {
		t.Fatal("a client without its worker's clock booked")
	}
	c.SetClock(time.Unix(1_800_000_000, 0), 20)
	// 1 GB at 1 GB/s of model time: 1 s, at any time scale.
	if free, ok := c.Book(2, 1e9); !ok || math.Abs(free-3) > 1e-9 {
		t.Fatalf("booked free at %v (%v), want 3 s", free, ok)
	}
	srv.Close()
	if _, ok := c.Book(2, 1); ok || c.Failures() != 1 {
		t.Fatalf("a gone service booked (%v), %d failures; want none, 1", ok, c.Failures())
	}
}
