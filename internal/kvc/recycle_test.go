package kvc

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestRecycledDispatchesChangeNothing runs two dispatchers through the
// same random requests, refusals and outcomes; one recycles every dispatch
// once it is Finished (Recycle), so each Begin after the first few fills a
// recycled one. Every action, mode, path and the dispatchers' beliefs at
// the end must be the same, and a recycled dispatch must start as a new
// one does (its overlap memos zeroed).
func TestRecycledDispatchesChangeNothing(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		fresh, reuse := kvcDispatcher(ResetDirect, 3), kvcDispatcher(ResetDirect, 3)
		rng := rand.New(rand.NewPCG(seed, 9))
		var openF, openR []*Dispatch
		recycled := 0
		for i := 0; i < 400; i++ {
			if len(openF) > 0 && (rng.IntN(3) == 0 || len(openF) > 8) {
				k := rng.IntN(len(openF))
				ok := rng.IntN(4) > 0
				openF[k].Finished(ok)
				openR[k].Finished(ok)
				if openF[k].Mode() != openR[k].Mode() || !reflect.DeepEqual(openF[k].Path(), openR[k].Path()) {
					t.Fatalf("seed %d: modes %q / %q", seed, openF[k].Mode(), openR[k].Mode())
				}
				reuse.Recycle(openR[k])
				openF, openR = append(openF[:k], openF[k+1:]...), append(openR[:k], openR[k+1:]...)
				continue
			}
			s := "s" + string(rune('a'+rng.IntN(6)))
			n := 1 + rng.IntN(6)
			blocks := make([]uint64, n)
			for j := range blocks {
				blocks[j] = uint64(s[1])<<32 | uint64(j)
			}
			q := Request{Session: s, Turn: 1 + rng.IntN(5), Blocks: blocks, Input: 64 * n, Output: 1 + rng.IntN(50)}
			spare := len(reuse.spare) > 0
			f, r := fresh.Begin(0, q), reuse.Begin(0, q)
			if spare {
				recycled++
			}
			for k := 0; f.Action().Kind == ActAdmit; k++ {
				if !reflect.DeepEqual(f.Action(), r.Action()) || k > 20 {
					t.Fatalf("seed %d request %d: actions %+v / %+v", seed, i, f.Action(), r.Action())
				}
				rep := AdmitReply{CanAdmit: rng.IntN(3) > 0, Direct: rng.IntN(2) == 0, Reason: []string{"no-space", "session-not-resident"}[rng.IntN(2)]}
				f.Reply(rep)
				r.Reply(rep)
			}
			if !reflect.DeepEqual(f.Action(), r.Action()) || !reflect.DeepEqual(f.dOv, r.dOv) || !reflect.DeepEqual(f.pOv, r.pOv) {
				t.Fatalf("seed %d request %d: decided %+v / %+v", seed, i, f.Action(), r.Action())
			}
			if f.Action().Kind.starts() {
				if rng.IntN(8) == 0 {
					f.Refused("worker-refused: test")
					r.Refused("worker-refused: test")
				} else {
					f.Accepted()
					r.Accepted()
				}
			}
			openF, openR = append(openF, f), append(openR, r)
		}
		if !reflect.DeepEqual(fresh.Snapshot(), reuse.Snapshot()) {
			t.Fatalf("seed %d: the beliefs differ at the end", seed)
		}
		if recycled < 100 {
			t.Fatalf("seed %d: only %d dispatches begun on recycled ones", seed, recycled)
		}
	}
}

// TestRecycleOnlyEnded checks that a dispatch not yet Finished is not
// recycled (a lifecycle violation) and that a poisoned one panics on any
// outcome.
func TestRecycleOnlyEnded(t *testing.T) {
	defer SetStrict(SetStrict(false))
	x := kvcDispatcher(ResetDirect, 3)
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 64, Output: 2})
	x.Recycle(d)
	if len(x.spare) != 0 || x.Violations() != 1 || !strings.Contains(x.LifecycleErr().Error(), "Recycle in stage deciding") {
		t.Fatalf("recycling an open dispatch: %d spare, %d violations (%v)", len(x.spare), x.Violations(), x.LifecycleErr())
	}
	d.Finished(false)
	x.PoisonRecycled()
	x.Recycle(d)
	if len(x.spare) != 0 || d.Stage() != "recycled" {
		t.Fatalf("poisoned: %d spare, stage %s", len(x.spare), d.Stage())
	}
	for name, f := range map[string]func(){"Finished": func() { d.Finished(true) }, "Accepted": d.Accepted, "Recycle": func() { x.Recycle(d) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s on a poisoned dispatch: no panic", name)
				}
			}()
			f()
		}()
	}
}
