package engine

import "testing"

// coloSessions is a colocated session-aware worker with a prefix cache, so
// that a plain prompt stays as evictable cache beside pinned sessions.
// Block size 64, no trim stall.
func coloSessions(t *testing.T, pool int64, sc SessionConfig) *Worker {
	t.Helper()
	sc.Enabled = true
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 64, ChunkTokens: 4096, PoolTokens: pool,
		PrefixCache: true, Session: sc})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fullOn runs one Full request to its end: a session's (kept) or, with
// sess "", a plain prompt left in the cache.
func fullOn(t *testing.T, w *Worker, now float64, id int64, sess string, blocks []uint64, input, output int) float64 {
	t.Helper()
	r := &Request{ID: id, Kind: Full, Session: sess, KeepSession: sess != "", Blocks: blocks, Input: input, Output: output}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	end, _ := drive(w, now)
	checkPool(t, w)
	return end
}

// plainAndS holds a plain 192-token prompt (3 blocks, evictable) and
// session s's 256 (4 blocks, pinned) in a pool of 1,000: 552 free, so
// f = free + evictable = 744.
func plainAndS(t *testing.T, sc SessionConfig) (*Worker, float64) {
	w := coloSessions(t, 1000, sc)
	now := fullOn(t, w, 0, 1, "", chain(2, 3), 192, 1)
	now = fullOn(t, w, now, 2, "s", chain(3, 4), 256, 1)
	if w.Used() != 448 || w.evictable() != 192 {
		t.Fatalf("set-up holds %d (%d evictable), want 448 (192)", w.Used(), w.evictable())
	}
	return w, now
}

// roomFor counts the evictable cache as room and trims sessions only for
// what it lacks: a seed needing exactly f = 744 (743 prompt + 1 output)
// trims nothing; one more token trims s (256 freed, f = 1,000). A direct
// append of s needing exactly 744 (999 − 256 cached, + 1) is granted; one
// more is refused, s being the only session to trim and the one asking.
func TestRoomForAtItsBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		q       AdmitQuery
		admit   bool
		mode    AdmitMode
		trimmed int
	}{
		{"seed of exactly f", AdmitQuery{Session: "n", Blocks: chain(9, 12), Input: 743, Output: 1}, true, AdmitSeed, 0},
		{"seed of f + 1", AdmitQuery{Session: "n", Blocks: chain(9, 12), Input: 744, Output: 1}, true, AdmitSeed, 1},
		{"append of exactly f", AdmitQuery{Session: "s", Blocks: chain(3, 16), Input: 999, Output: 1}, true, AdmitDirect, 0},
		{"append of f + 1", AdmitQuery{Session: "s", Blocks: chain(3, 16), Input: 1000, Output: 1}, false, AdmitNone, 0},
	} {
		w, now := plainAndS(t, SessionConfig{})
		rep := w.AdmitSession(now, tc.q)
		if rep.CanAdmit != tc.admit || rep.Mode != tc.mode || rep.Trimmed != tc.trimmed {
			t.Errorf("%s: reply %+v; want admit %v as %v, %d trimmed", tc.name, rep, tc.admit, tc.mode, tc.trimmed)
		}
		if !tc.admit && rep.Reason != ReasonNoSpace {
			t.Errorf("%s: refused for %q, want %q", tc.name, rep.Reason, ReasonNoSpace)
		}
	}
}

// The low watermark trims on past the need only after a trim, to leave
// 0.2 · 1,000 = 200 tokens more. Sessions of 256 each (a oldest) and the
// plain 192:
//   - s alone, a need of 600 ≤ f = 744: no trim, so no watermark either
//     (600 + 200 would have trimmed s);
//   - a, b: f = 488; a need of 544 trims a (f = 744), the goal
//     544 + 200 = 744 is met exactly: 1 trimmed;
//   - a, b, c: f = 232; a need of 300 trims a (f = 488), the goal 500
//     trims b (f = 744): 2 trimmed, c kept.
func TestLowWatermarkByHand(t *testing.T) {
	sc := SessionConfig{LowWatermark: 0.2}
	w, now := plainAndS(t, sc)
	if rep := w.AdmitSession(now, AdmitQuery{Session: "n", Blocks: chain(9, 10), Input: 599, Output: 1}); !rep.CanAdmit || rep.Trimmed != 0 {
		t.Errorf("need 600 with room 744: reply %+v, want admitted with nothing trimmed", rep)
	}
	for _, tc := range []struct {
		sessions []string
		input    int
		trimmed  int
	}{
		{[]string{"a", "b"}, 543, 1},
		{[]string{"a", "b", "c"}, 299, 2},
	} {
		w := coloSessions(t, 1000, sc)
		now := fullOn(t, w, 0, 1, "", chain(2, 3), 192, 1)
		for i, s := range tc.sessions {
			now = fullOn(t, w, now, int64(10+i), s, chain(uint64(10+i), 4), 256, 1)
		}
		rep := w.AdmitSession(now, AdmitQuery{Session: "n", Blocks: chain(9, 10), Input: tc.input, Output: 1})
		if !rep.CanAdmit || rep.Trimmed != tc.trimmed {
			t.Errorf("sessions %v, need %d: reply %+v, want admitted with %d trimmed", tc.sessions, tc.input+1, rep, tc.trimmed)
		}
	}
}

// ForceSeed drops an idle resident session first: the reply is a seed of a
// session that was here; without it the same query is a direct append.
func TestForceSeedDropsTheIdleSession(t *testing.T) {
	for _, force := range []bool{false, true} {
		w := sessionWorker(t, EvictSession, 50000)
		b := chain(1, 12)
		now := seedOn(t, w, 0, "s", b[:10], 640, 1)
		rep := w.AdmitSession(now, AdmitQuery{Session: "s", Blocks: b, Input: 768, Output: 1, ForceSeed: force})
		want, reason := AdmitDirect, ""
		if force {
			want, reason = AdmitSeed, ReasonWasEvicted
		}
		if !rep.CanAdmit || rep.Mode != want || rep.Reason != reason {
			t.Errorf("ForceSeed %v: reply %+v, want %v (%q)", force, rep, want, reason)
		}
	}
	w := sessionWorker(t, EvictSession, 50000)
	if rep := w.AdmitSession(0, AdmitQuery{Session: "new", Blocks: chain(1, 2), Input: 128, Output: 1, ForceSeed: true}); !rep.CanAdmit || rep.Mode != AdmitSeed || rep.Reason != ReasonNotResident {
		t.Errorf("ForceSeed of a session never here: reply %+v", rep)
	}
}

// The pause hint's occupancy is the KV held less the evictable cache plus
// the output promised, against HighWater of the pool; its queue bound is a
// quarter of MaxRunning, reached at equality.
func TestPauseHintByHand(t *testing.T) {
	// Held: 448 used − 192 evictable = 256. At high water 0.3 (300) no
	// pause; at 0.25 (250) a pause of 10 ms (an empty queue: 10·(0+1)).
	for _, tc := range []struct {
		hw   float64
		want float64
	}{{0.3, 0}, {0.25, 10}} {
		w, now := plainAndS(t, SessionConfig{HighWater: tc.hw})
		if rep := w.AdmitSession(now, AdmitQuery{Session: "n", Blocks: chain(9, 1), Input: 64, Output: 1}); rep.PauseMs != tc.want {
			t.Errorf("256 held, high water %v: pause %v, want %v", tc.hw, rep.PauseMs, tc.want)
		}
	}
	// A transfer in flight of a 64-token prompt and 4,936 promised output
	// tokens holds 64 + 4,936 = 5,000: half of 10,000 exactly, a pause; one
	// output token fewer, none.
	for _, tc := range []struct {
		out  int
		want float64
	}{{4936, 10}, {4935, 0}} {
		w := sessionWorker(t, EvictSession, 10000)
		w.cfg.Session.HighWater = 0.5
		if err := w.Reserve(0, &Request{ID: 1, Kind: DecodeOnly, Blocks: chain(1, 1), Input: 64, Output: tc.out}); err != nil {
			t.Fatal(err)
		}
		if rep := w.AdmitSession(0, AdmitQuery{Session: "n", Blocks: chain(9, 1), Input: 64, Output: 1}); rep.PauseMs != tc.want {
			t.Errorf("64 + %d held of 10,000 at high water 0.5: pause %v, want %v", tc.out, rep.PauseMs, tc.want)
		}
	}
	// MaxRunning 8: a queue of 2 (transfers counted) is a quarter, a pause
	// of 10·(2+1) = 30 ms; a queue of 1 is not.
	for _, tc := range []struct {
		transfers int
		want      float64
	}{{2, 30}, {1, 0}} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 10000, MaxRunning: 8,
			Session: SessionConfig{Enabled: true, HighWater: 1, PauseCountsTransfers: true}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.transfers {
			if err := w.Reserve(0, &Request{ID: int64(1 + i), Kind: DecodeOnly, Blocks: chain(uint64(1+i), 1), Input: 64, Output: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if rep := w.AdmitSession(0, AdmitQuery{Session: "n", Blocks: chain(9, 1), Input: 64, Output: 1}); rep.PauseMs != tc.want {
			t.Errorf("%d transfers, MaxRunning 8: pause %v, want %v", tc.transfers, rep.PauseMs, tc.want)
		}
	}
}

// dumpWorker is a session-aware decoder of 1,000 tokens holding seeded
// sessions of 256 tokens each (4 blocks, oldest first), whose evictions
// dump to P: a trimmed session's KV counts as coming free (Dumping).
func dumpWorker(t *testing.T, lw float64, sessions ...string) (*Worker, float64) {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1000,
		Session: SessionConfig{Enabled: true, DumpOnEvict: true, LowWatermark: lw}})
	if err != nil {
		t.Fatal(err)
	}
	now := 0.0
	for i, s := range sessions {
		now = seedOn(t, w, now, s, chain(uint64(1+i), 4), 256, 1)
	}
	return w, now
}

// Tokens being dumped are room, in both of roomFor's loops.
//   - a, b (488 free): a need of 600 trims a (dumping 256, f = 744); a
//     second need of 700 then trims nothing (488 + 256 ≥ 700).
//   - a, b, c (232 free), watermark 0.1 (+100): a need of 300 trims a
//     (f = 488), goal 400 met: 1 trimmed. At 0.3 (+300) the goal 600
//     trims b too (f = 744): 2.
func TestRoomCountsDumpsByHand(t *testing.T) {
	w, now := dumpWorker(t, 0, "a", "b")
	for _, tc := range []struct {
		sess    string
		input   int
		trimmed int
	}{{"n1", 599, 1}, {"n2", 699, 0}} {
		rep := w.AdmitSession(now, AdmitQuery{Session: tc.sess, Blocks: chain(9, 11), Input: tc.input, Output: 1})
		if !rep.CanAdmit || rep.Trimmed != tc.trimmed {
			t.Errorf("need %d: reply %+v, want admitted with %d trimmed (dumping %d)", tc.input+1, rep, tc.trimmed, w.Dumping())
		}
	}
	for _, tc := range []struct {
		lw      float64
		trimmed int
	}{{0.1, 1}, {0.3, 2}} {
		w, now := dumpWorker(t, tc.lw, "a", "b", "c")
		rep := w.AdmitSession(now, AdmitQuery{Session: "n", Blocks: chain(9, 5), Input: 299, Output: 1})
		if !rep.CanAdmit || rep.Trimmed != tc.trimmed {
			t.Errorf("watermark %v: reply %+v, want admitted with %d trimmed", tc.lw, rep, tc.trimmed)
		}
	}
}

// The watermark's tail trim frees only what the goal still lacks. a (512
// tokens, 8 blocks) and b (256) leave 232 free; a need of 300 is 68 short:
// a's last 2 blocks go (the last alone, 64, is short of 68), 360 free.
// The goal 300 + 0.1 · 1,000 = 400 is then 40 short: one more block of 64
// from the oldest session. 192 trimmed in two trims, 424 free after.
func TestWatermarkTailTrimTakesWhatTheGoalLacks(t *testing.T) {
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 1000,
		Session: SessionConfig{Enabled: true, TrimTail: true, LowWatermark: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	now := seedOn(t, w, 0, "a", chain(1, 8), 512, 1)
	now = seedOn(t, w, now, "b", chain(2, 4), 256, 1)
	rep := w.AdmitSession(now, AdmitQuery{Session: "n", Blocks: chain(9, 5), Input: 299, Output: 1})
	if !rep.CanAdmit || rep.Trimmed != 2 || rep.TrimmedTok != 192 || w.free() != 424 {
		t.Fatalf("reply %+v, %d free; want admitted, 2 trims of 192 tokens, 424 free", rep, w.free())
	}
}
