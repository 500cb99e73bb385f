package kvc

import "testing"

// v4's decode isolation is asked with the tokens a prefill computes and
// the ones it finds cached (v3.go, v3wholep.go): the attention term makes
// the cached ones count. Every figure by hand: a prefill of n new tokens
// after p cached costs 1e-9·a·n·(p + n/2) s (no overhead, no per-token
// term), and every bucket holds (0.01 − 0)·(101 − 1) = 1 s.
func isoV3(a float64, v3 V3Config) V3Config {
	v3.Isolation = DecodeIsolation{TPOTSLOS: 0.01, OutputTokens: 101, Cost: StallCost{AttnS: a * 1e-9}}
	return v3
}

func TestV3IsolationCountsCachedTokens(t *testing.T) {
	refuse := func(t *testing.T, d *Dispatch, reason string) {
		t.Helper()
		for i := 0; d.Action().Kind == ActAdmit; i++ {
			if i > 4 {
				t.Fatal("admission loop")
			}
			d.Reply(AdmitReply{Reason: reason})
		}
	}
	// A local seed on d0 (decoding: one session there) of a 2,000-token
	// prompt d0 holds 1,000 of: 500·1,000·(1,000+500) = 0.75 s fits
	// (counted with 3,000 cached it would be 1.75 s).
	t.Run("local seed", func(t *testing.T) {
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			BlockSize: 1000, V3: isoV3(500, V3Config{DBudgetTokens: 10000})},
			[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		x.onD[0] = 1
		d := x.Begin(0, Request{Session: "n", Turn: 1, Blocks: []uint64{7, 8}, Input: 2000, Output: 101})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident", CachedTokens: 1000})
		if d.Mode() != ModeLocalSeed {
			t.Errorf("%s, want %s; path %v", d.Mode(), ModeLocalSeed, d.Path())
		}
	})
	// The space fallback whole on p0 (decoding: it hosts a session) of a
	// 2,000-token prompt it caches none of: 250·2,000·(0+1,000) = 0.5 s
	// fits (with 4,000 cached, 2.5 s).
	t.Run("space fallback whole on P", func(t *testing.T) {
		x := v3Dispatcher(isoV3(250, V3Config{DBudgetTokens: 10000, LocalFallback: true, WholeOnP: true}))
		x.ensureLoad()
		x.load.hosted[0] = 1
		x.load.d[0], x.load.d[1] = 1000, 1000
		d := x.Begin(0, Request{Session: "n", Turn: 1, Blocks: []uint64{7, 8}, Input: 2000, Output: 101})
		refuse(t, d, "no-space")
		if d.Mode() != ModeWholeOnP {
			t.Errorf("%s, want %s; path %v", d.Mode(), ModeWholeOnP, d.Path())
		}
	})
	// A new session P starts (BalanceStarts, two started elsewhere: p0's
	// share): 250·2,000·1,000 = 0.5 s fits.
	t.Run("balanced start on P", func(t *testing.T) {
		x := v3Dispatcher(isoV3(250, V3Config{DBudgetTokens: 10000, LocalFallback: true, WholeOnP: true, PHosts: true, BalanceStarts: true}))
		x.ensureLoad()
		x.load.hosted[0] = 1
		x.load.started.all = 2
		d := x.Begin(0, Request{Session: "n", Turn: 1, Blocks: []uint64{7, 8}, Input: 2000, Output: 101})
		if d.Action().Kind != ActWholeP {
			t.Errorf("%+v (%s), want whole on p0; path %v", d.Action(), d.Mode(), d.Path())
		}
	})
	// The warm fallback: turn 2 adds 500 tokens to the 20,000 P caches:
	// 96·500·(20,000+250) = 0.972 s fits (with 21,000 cached, 1.02 s).
	t.Run("warm fallback whole on P", func(t *testing.T) {
		x := v3Dispatcher(isoV3(96, V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true}))
		blocks := turnOneThroughP(x, 101)
		x.load.hosted[0] = 1
		b := x.Begin(0, Request{Session: "a", Turn: 2, Blocks: append(blocks, 900), Input: 20500, Output: 101})
		refuse(t, b, "real-large-append")
		if b.Mode() != ModeWholeOnP {
			t.Errorf("%s, want %s; path %v", b.Mode(), ModeWholeOnP, b.Path())
		}
	})
}
