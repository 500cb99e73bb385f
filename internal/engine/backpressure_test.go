package engine

import "testing"

// The pause a decoder's admission reply carries (recommended_pause_ms):
// the high-water share of the pool says from which occupancy pauses start,
// backpressure off never pauses, and the queue the pause grows with counts
// the KV transfers still landing only when asked to.
func TestPauseHint(t *testing.T) {
	const pool = 10000
	for _, tc := range []struct {
		name      string
		sc        SessionConfig
		held      int // prompt tokens of the session resident before the query
		reserved  int // DecodeOnly requests reserved here, their KV still in transfer
		maxRun    int
		wantPause float64
	}{
		{"empty pool, low high water", SessionConfig{HighWater: 0.01}, 0, 0, 0, 0},
		{"80% held, default high water 0.95", SessionConfig{}, 8000, 0, 0, 0},
		{"80% held, high water 0.9", SessionConfig{HighWater: 0.9}, 8000, 0, 0, 0},
		{"80% held, high water 0.8", SessionConfig{HighWater: 0.8}, 8000, 0, 0, 10},
		{"80% held, high water 0.5", SessionConfig{HighWater: 0.5}, 8000, 0, 0, 10},
		{"96% held, default high water 0.95", SessionConfig{}, 9600, 0, 0, 10},
		{"96% held, high water 1", SessionConfig{HighWater: 1}, 9600, 0, 0, 0},
		{"96% held, backpressure off", SessionConfig{NoPauseHint: true, HighWater: 0.5}, 9600, 0, 0, 0},
		// With 4 running at most, a queue of 1 (a quarter) pauses too.
		{"2 transfers landing, not counted", SessionConfig{HighWater: 1}, 0, 2, 4, 0},
		{"2 transfers landing, counted", SessionConfig{HighWater: 1, PauseCountsTransfers: true}, 0, 2, 4, 30},
		{"80% held and 2 transfers counted", SessionConfig{HighWater: 0.5, PauseCountsTransfers: true}, 8000, 2, 0, 30},
		{"2 transfers counted, backpressure off", SessionConfig{NoPauseHint: true, PauseCountsTransfers: true}, 0, 2, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.sc
			sc.Enabled = true
			w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool,
				MaxRunning: tc.maxRun, Session: sc})
			if err != nil {
				t.Fatal(err)
			}
			now := 0.0
			if tc.held > 0 {
				// Output 1: the prefill worker's first token, nothing more held.
				now = seedOn(t, w, now, "a", chain(1, tc.held/64), tc.held, 1)
			}
			for i := range tc.reserved {
				r := &Request{ID: int64(10 + i), Kind: DecodeOnly, Session: "x", Blocks: chain(uint64(2+i), 1), Input: 64, Output: 1}
				if err := w.Reserve(now, r); err != nil {
					t.Fatal(err)
				}
			}
			if w.Transferring() != tc.reserved {
				t.Fatalf("%d transfers landing, want %d", w.Transferring(), tc.reserved)
			}
			rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: chain(9, 1), Input: 64, Output: 1})
			if !rep.CanAdmit || rep.PauseMs != tc.wantPause {
				t.Fatalf("KV held %d of %d, reply %+v; want admitted with a pause of %v ms", w.Used()-w.CachedTokens()+w.Reserved(), pool, rep, tc.wantPause)
			}
		})
	}
	// A transfer that never lands (its request aborted) leaves the count.
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool,
		Session: SessionConfig{Enabled: true}})
	r := &Request{ID: 1, Kind: DecodeOnly, Session: "x", Blocks: chain(1, 1), Input: 64, Output: 1}
	if err := w.Reserve(0, r); err != nil {
		t.Fatal(err)
	}
	w.Abort(0, r)
	if w.Transferring() != 0 {
		t.Fatalf("%d transfers landing after the only one was aborted", w.Transferring())
	}
}
