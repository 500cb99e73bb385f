package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// hostTail is the host tier's demoted tail of an unnumbered session.
func (w *Worker) hostTail(id string) *outputTail {
	t, _ := w.host.tails.Get(SessionKey{ID: id})
	return t
}

// TestNumberedSessionsActAsNamed: a session-aware decoder (whole-session
// and block eviction, a session cap, a host tier) driven by random
// multi-turn sessions — admission RPCs, direct appends, seeds, aborts,
// forgets, residency probes — does the same whether its owner numbers the
// sessions (Request.SessionNum, as the simulator does) or names them by id
// alone (the emulated worker): the same events at the same times, the
// same replies, the same stats and pool.
func TestNumberedSessionsActAsNamed(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		named := playSessions(t, seed, false)
		numbered := playSessions(t, seed, true)
		if len(named) != len(numbered) {
			t.Fatalf("seed %d: %d lines named, %d numbered", seed, len(named), len(numbered))
		}
		for i := range named {
			if named[i] != numbered[i] {
				t.Fatalf("seed %d, line %d:\nnamed    %s\nnumbered %s", seed, i, named[i], numbered[i])
			}
		}
		if len(named) < 100 {
			t.Fatalf("seed %d: only %d lines: the load exercises too little", seed, len(named))
		}
	}
}

// playSessions plays seed's load on a fresh decoder and returns what it
// did, a line per event, reply and probe.
func playSessions(t *testing.T, seed uint64, numbered bool) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 25))
	sc := SessionConfig{Enabled: true, Eviction: Eviction(seed % 2), Trim: TrimPolicy(seed / 2 % 2), Cap: int(seed % 3 * 2)}
	cfg := Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000,
		ChunkTokens: 512, MaxRunning: 4, PrefixCache: true, Session: sc}
	if seed%4 == 3 {
		cfg.HiCache = HiCacheConfig{Enabled: true, Ratio: 2, WritePolicy: WriteThrough}
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 12
	num := func(s int) int64 {
		if numbered {
			return int64(s + 1)
		}
		return 0
	}
	id := func(s int) string { return fmt.Sprint("s", s) }
	var out []string
	note := func(evs []Event) {
		for _, ev := range evs {
			rid := int64(-1)
			if ev.Req != nil {
				rid = ev.Req.ID
			}
			out = append(out, fmt.Sprintf("%v %.9f req %d tokens %d session %q %v", ev.Kind, ev.Time, rid, ev.Tokens, ev.Session, ev.Hot))
		}
	}
	chains := make([][]uint64, sessions)
	var live []*Request
	now := 0.0
	for i := 0; i < 500; i++ {
		now += rng.Float64() * 0.05
		for {
			tn, ok := w.NextTime()
			if !ok || tn > now {
				break
			}
			w.Advance(tn)
			note(w.TakeEvents())
		}
		s := rng.IntN(sessions)
		switch op := rng.IntN(12); {
		case op < 8:
			for k := rng.IntN(30) + 1; k > 0; k-- {
				chains[s] = append(chains[s], uint64(s)<<40|uint64(len(chains[s])+1))
			}
			if len(chains[s])*16 > 2500 {
				chains[s] = chains[s][:1]
			}
			input := (len(chains[s])-1)*16 + 1 + rng.IntN(16)
			output := 1 + rng.IntN(60)
			q := AdmitQuery{Session: id(s), SessionNum: num(s), Blocks: chains[s], Input: input, Output: output}
			rep := w.AdmitSession(now, q)
			out = append(out, fmt.Sprintf("admit %s: %+v", id(s), rep))
			note(w.TakeEvents())
			if !rep.CanAdmit {
				continue
			}
			r := &Request{ID: int64(i), Blocks: append([]uint64(nil), chains[s]...), Input: input, Output: output,
				Session: id(s), SessionNum: num(s), KeepSession: true}
			if rep.Mode == AdmitDirect {
				r.Kind = Full
				err = w.Submit(now, r)
			} else {
				r.Kind = DecodeOnly
				if err = w.Reserve(now, r); err == nil {
					note(w.TakeEvents())
					err = w.StartDecode(now, r)
				}
			}
			out = append(out, fmt.Sprintf("request %d: %v", r.ID, err))
			if err == nil {
				live = append(live, r)
			}
		case op < 10 && len(live) > 0:
			w.Abort(now, live[rng.IntN(len(live))])
		case op < 11:
			w.ForgetSessionKey(SessionKey{ID: id(s), Num: num(s)})
		default:
			res, cached, tier := w.SessionTier(now, AdmitQuery{Session: id(s), SessionNum: num(s), Blocks: chains[s], Input: max(len(chains[s])*16-8, 1)})
			_, _, held := w.SessionPathKey(SessionKey{ID: id(s), Num: num(s)})
			c := w.CachedForKey(SessionKey{ID: id(s), Num: num(s)}, chains[s], max(len(chains[s])*16-8, 1))
			out = append(out, fmt.Sprintf("probe %s: %v %d %s %v %d", id(s), res, cached, tier, held, c))
		}
		note(w.TakeEvents())
		checkPool(t, w)
	}
	_, evs := drive(w, now)
	note(evs)
	checkPool(t, w)
	out = append(out, fmt.Sprintf("stats %+v used %d tracked %d resident %d", w.Stats(), w.Used(), w.Tracked(), w.ResidentSessions()))
	return out
}
