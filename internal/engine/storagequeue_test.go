package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// An answer naming storage tokens says how long the shared pool's
// aggregate link is booked ahead (AdmitReply.StorageQueueS), so the router
// can add it to the prefetch. a's 1,280 tokens are in the shared pool only
// (d1 seeded, trimmed and dropped them from host); d1 runs a's 1,344-token
// turn arriving at t₀ = now + 1, whose prefetch of 1,280 tokens (125.8 MB)
// is booked on the pool's 12.5 GB/s from t₀: booked until t₀ + 10.066 ms.
// d2, which never held a, answers a seed naming the pool's tokens of a; at
// t₀ + 4 ms the pool is booked 6.066 ms ahead, at t₀ + 20 ms nothing. With
// unlimited aggregate bandwidth nothing is ever booked: 0.
func TestStorageAnswerNamesThePoolsQueue(t *testing.T) {
	for _, bw := range []float64{12.5e9, 0} {
		pool := NewStoragePool()
		pool.BandwidthBytes = bw
		d1, d2 := sharedDecoders(t, pool, model.Link{})
		a := chain(1, 30)
		now := seedOn(t, d1, 0, "a", a[:20], 1280, 1)
		var trim AdmitReply
		if !d1.trimOne(now, "", &trim) {
			t.Fatal("precondition: a not trimmed")
		}
		d1.host.tree.Evict(d1.host.tree.Tokens())
		t0 := now + 1
		turn(t, d1, t0, 7, "a", a[:21], 1344, 1)
		if d1.stats.StoragePrefetchedTokens != 1280 {
			t.Fatalf("precondition: d1 prefetched %d tokens, want 1280", d1.stats.StoragePrefetchedTokens)
		}
		q := AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 4}
		booked := float64(1280*98304) / 12.5e9
		for _, c := range []struct{ at, want float64 }{{0.004, booked - 0.004}, {0.020, 0}} {
			if bw == 0 {
				c.want = 0
			}
			rep := d2.AdmitSession(t0+c.at, q)
			if rep.Tier != TierStorage || rep.StorageTokens == 0 || !near(rep.StorageQueueS, c.want) {
				t.Fatalf("aggregate %g B/s, asked at t₀ + %g s: %+v; want tier storage, its pool booked %.6f s ahead", bw, c.at, rep, c.want)
			}
		}
	}
}
