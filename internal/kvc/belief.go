package kvc

import (
	"fmt"
	"strings"
)

// What an executor's conformance is judged by (docs/lifecycle.md): the
// calls it made, in order (SetTrace), and the dispatcher's belief after
// them (Belief). The simulator and the gateway run the same scripted
// scenarios and must agree on both.

// SetTrace makes the dispatcher report every outcome call as one line
// ("Begin s/1", "Reply d0 seed session-not-resident", "Accepted seed p0 d0",
// "TransferLanded", "PrefillDone", "Finished ok", ...); nil stops it.
func (x *Dispatcher) SetTrace(f func(call string)) { x.trace = f }

// traced reports one call to the trace, if any. Its arguments do not
// escape (traceLine formats copies of them), so a caller's boxed string or
// number can live on its stack: with no trace set (every simulation), the
// calls in Finished and SessionEvicted boxed a string on the heap per
// request, a tenth of KVC v3's allocations on one-turn sessions.
func (x *Dispatcher) traced(format string, args ...any) {
	if x.trace != nil {
		x.trace(traceLine(format, args))
	}
}

const unsupportedTraceArg = "(unsupported trace argument)"

// traceLine is fmt.Sprintf(format, args...) over fresh copies of args, for
// the kinds the trace lines pass (string, int, bool, ActionKind); another
// kind prints as unsupportedTraceArg, which TestTraceLineIsSprintf and the
// conformance traces would show. Copying, not passing args on, is what
// keeps them from escaping.
func traceLine(format string, args []any) string {
	cp := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			cp[i] = strings.Clone(v)
		case int:
			cp[i] = v
		case bool:
			cp[i] = v
		case ActionKind:
			cp[i] = v
		default:
			cp[i] = unsupportedTraceArg
		}
	}
	return fmt.Sprintf(format, cp...)
}

// kindName is an action's name in traces.
func (k ActionKind) String() string {
	switch k {
	case ActAdmit:
		return "admit"
	case ActDirect:
		return "direct"
	case ActSeed:
		return "seed"
	case ActPD:
		return "pd"
	case ActColo:
		return "colo"
	case ActLocal:
		return "local"
	case ActFail:
		return "fail"
	case ActDone:
		return "done"
	case ActWholeP:
		return "whole-p"
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// Snapshot is the dispatcher's state that outcomes move, per worker and
// session; equal beliefs compare equal with ==-like reflect.DeepEqual.
type Snapshot struct {
	Open          int            // dispatches not yet Finished
	PrefillQueued []int          // v3: prompt tokens queued per prefill worker
	DecodeQueued  []int          // v3: local prefill tokens queued per decoder
	Pending       []int          // v3: cold routing's tokens per decoder, unanswered
	WholeOnP      []int          // v3: requests served whole per prefill worker, in flight
	HostedOnP     []int          // v3: sessions hosted per prefill worker
	PInflight     []int          // the P router's requests in flight per worker
	DInflight     []int          // the D router's requests in flight per decoder
	OnD           []int          // sessions believed pinned per decoder
	Seeding       []int          // seeds in flight per decoder
	Pins          map[string]int // session → decoder believed to hold it
	Resident      map[string]int // session → tokens believed resident on its pin (router gate)
	Breakers      []string       // per decoder: closed, open, half-open-probing
}

// Snapshot is the dispatcher's belief now.
func (x *Dispatcher) Snapshot() Snapshot {
	x.ensureLoad()
	b := Snapshot{Open: x.open, Pins: map[string]int{}, Resident: map[string]int{},
		PrefillQueued: clone(x.load.p), DecodeQueued: clone(x.load.d), Pending: clone(x.load.pend),
		WholeOnP: clone(x.load.whole), HostedOnP: clone(x.load.hosted), OnD: clone(x.onD), Seeding: clone(x.seeding)}
	if x.p != nil {
		b.PInflight = clone(x.p.inflight)
	}
	b.DInflight = clone(x.d.inflight)
	x.sessions.Each(func(s *sessState) {
		if s.pin >= 0 {
			b.Pins[s.key.ID] = s.pin
			b.Resident[s.key.ID] = s.resident
		}
	})
	for _, br := range x.breakers {
		switch {
		case !br.open:
			b.Breakers = append(b.Breakers, "closed")
		case br.probing:
			b.Breakers = append(b.Breakers, "half-open-probing")
		default:
			b.Breakers = append(b.Breakers, "open")
		}
	}
	return b
}

func clone(v []int) []int { return append([]int{}, v...) }
