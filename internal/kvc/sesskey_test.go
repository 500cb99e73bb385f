package kvc

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// keysOf names unnumbered sessions by their ids.
func keysOf(ids ...string) []SessionKey {
	var out []SessionKey
	for _, id := range ids {
		out = append(out, SessionKey{ID: id})
	}
	return out
}

// TestNumberedSessionsDispatchAsNamed: a KVC v2 and a v3 dispatcher fed
// the same random requests of a dozen sessions — refusals, seeds, direct
// appends, failures, evictions, demotions, closes, forgets — decide the
// same whether the caller numbers the sessions (Request.SessionNum and the
// ...Key calls, as the simulator does) or names them by id alone (the
// gateway): the same actions, modes and paths, the same belief.
func TestNumberedSessionsDispatchAsNamed(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		named := playDispatch(t, seed, false)
		numbered := playDispatch(t, seed, true)
		if len(named) != len(numbered) {
			t.Fatalf("seed %d: %d lines named, %d numbered", seed, len(named), len(numbered))
		}
		for i := range named {
			if named[i] != numbered[i] {
				t.Fatalf("seed %d, line %d:\nnamed    %s\nnumbered %s", seed, i, named[i], numbered[i])
			}
		}
	}
}

func playDispatch(t *testing.T, seed uint64, numbered bool) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 24))
	cfg := DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 2, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack}
	if seed%2 == 0 {
		cfg.V3 = V3Config{DBudgetTokens: 4000, Margin: 100, ColdRoute: true, LocalFallback: true, TypedRejects: true, WholeOnP: true, ColdOnP: true}
	}
	x := NewDispatcher(cfg, []string{"p0", "p1"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})
	const sessions = 12
	key := func(s int) SessionKey {
		k := SessionKey{ID: fmt.Sprint("s", s)}
		if numbered {
			k.Num = int64(s + 1)
		}
		return k
	}
	turn := make([]int, sessions)
	chains := make([][]uint64, sessions)
	var out []string
	var open []*Dispatch
	for i := 0; i < 600; i++ {
		now := float64(i)
		s := rng.IntN(sessions)
		k := key(s)
		switch op := rng.IntN(14); {
		case op < 7:
			turn[s]++
			for n := rng.IntN(8) + 1; n > 0; n-- {
				chains[s] = append(chains[s], uint64(s)<<32|uint64(len(chains[s])+1))
			}
			r := Request{Session: k.ID, SessionNum: k.Num, Turn: turn[s], Blocks: append([]uint64(nil), chains[s]...),
				Input: len(chains[s]) * 16, Output: 4}
			d := x.Begin(now, r)
			for n := 0; d.Action().Kind == ActAdmit && n < 10; n++ {
				a := d.Action()
				switch rng.IntN(4) {
				case 0:
					d.Reply(AdmitReply{Reason: "no-space"})
				default:
					d.Reply(AdmitReply{CanAdmit: true, Direct: rng.IntN(2) == 0, Reason: "session-not-resident", CachedTokens: rng.IntN(r.Input)})
				}
				out = append(out, fmt.Sprintf("admit %s d%d -> %v", k.ID, a.D, d.Action()))
			}
			if rng.IntN(6) == 0 {
				d.Refused("worker-refused")
			} else {
				d.Accepted()
				open = append(open, d)
			}
			out = append(out, fmt.Sprintf("begin %s/%d: %v mode %s path %v", k.ID, turn[s], d.Action(), d.Mode(), d.Path()))
		case op < 10 && len(open) > 0:
			j := rng.IntN(len(open))
			d := open[j]
			open = append(open[:j], open[j+1:]...)
			d.Finished(rng.IntN(5) != 0)
			out = append(out, fmt.Sprintf("finished d%d p%d %s", d.Decoder(), d.Prefill(), d.Mode()))
		case op < 11:
			x.SessionEvictedKey(rng.IntN(3), k)
		case op < 12:
			x.SessionDemotedKey(rng.IntN(3), k)
		case op < 13:
			x.CloseSessionKey(k)
		default:
			x.ForgetSessionKey(k)
		}
		b := x.Snapshot()
		out = append(out, fmt.Sprintf("belief %v %v %v sessions %d", b.Pins, b.Resident, b.OnD, x.Sessions()))
	}
	return out
}
