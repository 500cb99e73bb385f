package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// serve prices a shared storage pool's booked time live (worker contract
// 1.4), end to end: the real serve (--kvc-preset v3, Mooncake storage
// link, wait_complete, a 1.5 GB/s P→D link priced: tcp-loopback) before an
// emulated prefill worker and TestServeKVCv4CostsStorageTierAnswer's
// decoder, whose storage pool is a shared one (the pool's loopback
// service, 10 GB/s aggregate). The same first turns leave a's prefix in
// the pool only, and a's 50-token append is answered direct from storage
// (29,952 tokens, 2.94 GB). Just before it another worker of the pool
// books 30 model-seconds of prefetch on its aggregate link (a booking at
// the service, as a worker's prefetch makes), so the decoder's answer
// says storage_queue_ms ≈ 30,000. Priced with the pool's bandwidth
// (--hicache-storage-shared-bandwidth 10): ~30 s + 2.94 GB ÷ 10 GB/s,
// over the reseed's ~2 s transfer plus what P lacks, so a is reseeded
// through P to the same decoder. Nothing booked: ~0.35 s of load-back,
// kept. Booked, but serve not told the pool's bandwidth: the queue is
// not priced, the load-back kept (its prefetch waits ~1.5 s of wall time
// behind the booking at time scale 20). The verdict rests on modes, not
// timing: the booking holds for 1.5 s of wall time, the admission comes
// within milliseconds of it.
func TestServePricesSharedPoolQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		book   bool
		poolBW bool
		want   string
	}{
		{"pool booked ahead", true, true, kvc.ModeHostReseed},
		{"nothing booked", false, true, "kvcache-direct-to-d-session"},
		{"booked, pool bandwidth not given", true, false, "kvcache-direct-to-d-session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := emulator.NewStoreServer()
			store.BandwidthBytes = 10e9
			srv := httptest.NewServer(store)
			t.Cleanup(srv.Close)
			p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { c.SliceTPOTS = 0.012 })
			d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
				c.Session = engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}
				c.PoolTokens = 40000
				c.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 2, WritePolicy: engine.WriteThrough,
					Storage: engine.StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: engine.PrefetchWaitComplete,
						Index: emulator.NewStoreClient(srv.URL)}}
				c.SliceTPOTS = 0.012
			})
			emulatortest.WaitHealthy(t, p.URL(), d.URL())
			args := []string{"--kvc-preset", "v3", "--whole-on-p=false", "--link", "tcp-loopback",
				"--hicache-storage-backend", "mooncake", "--hicache-storage-prefetch-policy", "wait_complete"}
			if tc.poolBW {
				args = append(args, "--hicache-storage-shared-bandwidth", "10")
			}
			gw := serveOn(t, p, d, args...)
			post(t, gw, "z", seq(1, 3000))
			a1 := seq(100000, 30000)
			_, out := post(t, gw, "a", a1)
			for i, s := range []string{"b", "c"} {
				post(t, gw, s, seq(200000+100000*i, 30000))
			}
			if tc.book {
				other := emulator.NewStoreClient(srv.URL)
				other.SetClock(time.Now(), emulatortest.TimeScale)
				if _, ok := other.Book(0, 30*10e9); !ok {
					t.Fatal("the other worker's booking was refused")
				}
			}
			m, _ := post(t, gw, "a", append(append(a1, out...), seq(900000, 50)...))
			if m != tc.want {
				t.Fatalf("a turn 2 (its prefix in the shared pool only) in mode %q, want %s", m, tc.want)
			}
		})
	}
}
