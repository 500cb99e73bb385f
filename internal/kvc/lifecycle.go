package kvc

import (
	"errors"
	"fmt"
)

// A Dispatch's lifecycle (docs/lifecycle.md). Both executors — the
// simulator in virtual time, the gateway over HTTP — feed a dispatch its
// outcomes in one order, and the dispatcher checks it: an outcome out of
// order is a programming error in an executor, recorded (LifecycleErr) and,
// with SetStrict or under the kvcstrict build tag, a panic, so that the two
// executors cannot drift apart silently.
//
//	Begin ─► deciding ──Reply (Action is ActAdmit)──► deciding
//	            │ Refused (Action starts the request) ─► deciding, Action = ActFail
//	            │ Accepted (Action starts the request) ─► accepted
//	accepted ──PrefillDone──► decoding
//	accepted, decoding ──TransferFailed, TransferLanded──► (same stage)
//	any but ended ──Finished──► ended
//
// Every dispatch ends with exactly one Finished, whether or not it was
// accepted: a request abandoned while it waits (a client leaving during a
// pause, a timeout during an admission round trip) still holds what its
// decisions counted (cold routing's pending tokens, a breaker's probe).

// stage is where a dispatch is in its lifecycle.
type stage uint8

const (
	stDeciding stage = iota // Begin: admissions and replies until the action starts the request
	stAccepted              // the workers took it; its prefill runs
	stDecoding              // PrefillDone: its prefill is over (KV landed, or first token)
	stEnded                 // Finished: nothing more
	stRecycled              // handed back (Recycle) and poisoned (PoisonRecycled)
)

func (s stage) String() string {
	return [...]string{"deciding", "accepted", "decoding", "ended", "recycled"}[s]
}

// Recycle hands back a dispatch whose request has ended (Finished) and
// that its executor will never use again, for a later Begin to fill: an
// executor that knows when its last reference to a dispatch ends (the
// simulator, sim/recycle.go) saves an allocation a request, and the
// array of its overlap memos. The dispatcher itself keeps no reference to
// a dispatch; the paths a sink was given (Path) are not reused, and the
// dispatches kept for reuse follow the open ones (spareSlack). Recycling
// one not yet Finished is a lifecycle violation, and it is not recycled.
// Under PoisonRecycled the dispatch is poisoned instead and never reused.
func (x *Dispatcher) Recycle(t *Dispatch) {
	if !t.expect("Recycle", t.stage == stEnded) {
		return
	}
	if x.poison {
		*t = Dispatch{stage: stRecycled, chosenD: -1 << 40, chosenP: -1 << 40, act: Action{Kind: actRecycled, P: -1 << 40, D: -1 << 40}}
		return
	}
	x.spare = append(x.spare, t)
	for len(x.spare) > x.open+spareSlack { // fewer requests open now: let the extra go
		x.spare[len(x.spare)-1] = nil
		x.spare = x.spare[:len(x.spare)-1]
	}
}

// spareSlack is how many more recycled dispatches than open ones the
// dispatcher keeps for reuse: enough for the swings of a run that keeps
// up, while a backlog that drains lets its dispatches go.
const spareSlack = 1024

// PoisonRecycled makes Recycle poison what it is given (tests): every
// outcome fed to a poisoned dispatch panics, and so does any use of its
// dispatcher, its action's workers or its decoder.
func (x *Dispatcher) PoisonRecycled() { x.poison = true }

// actRecycled is a poisoned dispatch's action: no executor knows it.
const actRecycled ActionKind = 0xee

// starts reports whether an action starts the request on workers (the
// actions Accepted and Refused answer).
func (k ActionKind) starts() bool {
	switch k {
	case ActDirect, ActSeed, ActPD, ActColo, ActLocal, ActWholeP:
		return true
	}
	return false
}

// CrossesTransport reports whether an action moves KV over the P→D
// transport: only those outcomes drive a decoder's breaker. A direct
// append, a colocated request, a local prefill or a request served whole
// on P failing says nothing about the transfer path.
func (k ActionKind) CrossesTransport() bool { return k == ActSeed || k == ActPD }

// strictLifecycle makes every lifecycle violation panic (SetStrict; on by
// default under the kvcstrict build tag).
var strictLifecycle = strictDefault

// SetStrict makes lifecycle violations panic (true) or only be recorded
// (false) for every dispatcher; it returns the previous setting. Tests turn
// it on.
func SetStrict(on bool) (was bool) {
	was, strictLifecycle = strictLifecycle, on
	return was
}

// ErrLifecycle is wrapped by every lifecycle violation.
var ErrLifecycle = errors.New("kvc: outcome out of order")

// LifecycleErr is the first lifecycle violation any of this dispatcher's
// dispatches saw, nil when none; Violations counts them.
func (x *Dispatcher) LifecycleErr() error { return x.lcErr }
func (x *Dispatcher) Violations() int     { return x.lcViolations }

// Open is the dispatches begun and not yet Finished: 0 once every request
// has ended (the conformance suite holds both executors to it).
func (x *Dispatcher) Open() int { return x.open }

// expect checks that outcome may come in the dispatch's stage; it reports
// false (and records the violation) when not.
func (t *Dispatch) expect(outcome string, ok bool) bool {
	if ok {
		return true
	}
	if t.stage == stRecycled {
		panic("kvc: " + outcome + " on a dispatch after its Recycle")
	}
	x := t.x
	err := fmt.Errorf("%w: %s in stage %s (action %d, session %q turn %d)", ErrLifecycle, outcome, t.stage, t.act.Kind, t.r.Session, t.r.Turn)
	x.lcViolations++
	if x.lcErr == nil {
		x.lcErr = err
	}
	if strictLifecycle {
		panic(err)
	}
	return false
}

// Stage names where the dispatch is (tests, logs).
func (t *Dispatch) Stage() string { return t.stage.String() }

// TransferFailed reports that the request's KV transfer to its decoder
// failed at now (a timeout, a dead prefill leg seen as a transfer error).
// Only a request whose action crosses the transport counts against the
// decoder's breaker; the probe's failure opens it again.
func (t *Dispatch) TransferFailed(now float64) {
	if !t.expect("TransferFailed", t.stage == stAccepted || t.stage == stDecoding) {
		return
	}
	t.x.traced("TransferFailed")
	if !t.kind.CrossesTransport() || t.chosenD < 0 {
		return
	}
	t.x.breakers[t.chosenD].failure(now, t.probe)
	t.probe = false
}

// TransferLanded reports that the request's KV reached its decoder. It
// closes the decoder's breaker only when this request is the half-open
// breaker's probe: a transfer decided before the breaker opened (a
// straggler) landing says nothing about the transport now, and a closed
// breaker's failures age out of its window instead of being forgiven.
func (t *Dispatch) TransferLanded() {
	if !t.expect("TransferLanded", t.stage == stAccepted || t.stage == stDecoding) {
		return
	}
	t.x.traced("TransferLanded")
	if t.probe {
		t.x.breakers[t.chosenD].success()
		t.probe = false
	}
}
