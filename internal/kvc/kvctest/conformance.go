// Package kvctest holds the conformance suite's scenarios (test helpers
// only): scripted sessions that the simulator's executor
// (internal/sim/conformance_test.go) and the gateway's
// (internal/gateway/conformance_test.go) both run, each asserting the same
// sequence of dispatcher calls (kvc.Dispatcher.SetTrace) and the same
// belief afterwards (kvc.Dispatcher.Snapshot). docs/lifecycle.md gives the
// contract the rows hold the executors to.
package kvctest

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Turn is one request of a scripted session, sent after the previous one
// ended: its prompt is the session's previous prompt and answer, then New
// new tokens (the first turn: New tokens).
type Turn struct {
	Session string
	New     int
	Output  int
	Fails   bool // the client gets no answer (a fault, or it left)
}

// The faults a row can inject.
const (
	// FaultTransfer: every KV transfer P→D fails (the simulator: the
	// transfer times out; the gateway: the prefill leg answers 500 with a
	// KV transfer error).
	FaultTransfer = "transfer-fails"
	// FaultDecode503Once: the decoder answers the first /generate 503
	// (gateway only: the simulator's workers never answer an HTTP status).
	FaultDecode503Once = "decode-503-once"
	// FaultPauseClientLeaves: the decoder refuses the admission with a
	// 5 s pause hint and the client leaves during the pause.
	FaultPauseClientLeaves = "pause-client-leaves"
	// FaultDecodeDiesMidStream: the decoder's stream breaks off after its
	// first event (gateway only: the simulator's workers never die).
	FaultDecodeDiesMidStream = "decode-dies-mid-stream"
	// FaultClientLeavesPrefill: the client leaves while the prefill runs
	// (the simulator: the request times out before its KV lands; the
	// gateway: the prefill leg is held until the client has left).
	FaultClientLeavesPrefill = "client-leaves-during-prefill"
	// FaultClientLeavesMidStream: the client leaves after the first token
	// (the simulator: the request times out while decoding; the gateway:
	// the client reads the stream's first event and hangs up).
	FaultClientLeavesMidStream = "client-leaves-mid-stream"
	// FaultAdmitTimeout: the decoder never answers the admission RPC
	// within the gateway's admission timeout (gateway only: the
	// simulator's admission round trip always answers).
	FaultAdmitTimeout = "admission-timeout"
	// FaultAdmitPauseOnce: the decoder refuses the first admission with a
	// 50 ms pause hint; the client waits it out (gateway only, as
	// FaultPauseClientLeaves).
	FaultAdmitPauseOnce = "admission-pause-once"
)

// Row is one scripted scenario.
type Row struct {
	Name string
	// Decoders is the decode workers behind one prefill worker (1P·nD).
	Decoders int
	// SessionCap is each decoder's session cap (the engine's); RouterCap
	// the router gate's.
	SessionCap, RouterCap int
	Gate                  kvc.Gate   // "" takes the worker gate
	Belief                kvc.Belief // "" takes tracking
	V3                    kvc.V3Config
	// Fault is what the row injects (Fault* below; "" none), Retries the
	// gateway's retries (the simulator never retries).
	Fault   string
	Retries int
	Turns   []Turn
	// Want is the dispatcher calls, in order (SessionEvicted excluded:
	// see Calls).
	Want []string
	// MaxResident is the most sessions any decoder may hold at the end (0:
	// not checked).
	MaxResident int
	// Pins, when set, is the belief's session → decoder pins at the end
	// (rows where no decoder evicts a session: the gateway learns of an
	// eviction only from the next admission's answer, the simulator from
	// the engine's event).
	Pins map[string]int
	// Breakers is each decoder's breaker at the end (nil: all closed).
	Breakers []string
	// HostedOnP is each prefill worker's hosted sessions at the end (nil:
	// none).
	HostedOnP []int
	// Only names the one executor that can run the row ("" both), and Why
	// says why the other cannot.
	Only, Why string
}

// Failures is the turns the row expects to fail.
func (r Row) Failures() int {
	n := 0
	for _, t := range r.Turns {
		if t.Fails {
			n++
		}
	}
	return n
}

// Config is the dispatcher configuration of the row, over Defaults.
func (r Row) Config() kvc.DispatchConfig {
	c := kvc.Defaults(kvc.MechKVC)
	if r.Gate != "" {
		c.Gate = r.Gate
	}
	if r.Belief != "" {
		c.Belief = r.Belief
	}
	c.SessionCap = r.RouterCap
	c.V3 = r.V3
	return c
}

// Calls filters a trace down to what the suite compares: every call but
// SessionEvicted (the simulator hears of an eviction when it happens, the
// gateway at the next admission answer).
func Calls(trace []string) []string {
	var out []string
	for _, c := range trace {
		if !strings.HasPrefix(c, "SessionEvicted") {
			out = append(out, c)
		}
	}
	return out
}

// Check compares an executor's calls and final belief with the row's.
func (r Row) Check(trace []string, b kvc.Snapshot, err error) error {
	if err != nil {
		return fmt.Errorf("lifecycle: %w", err)
	}
	got := Calls(trace)
	if !reflect.DeepEqual(got, r.Want) {
		return fmt.Errorf("dispatcher calls:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(r.Want, "\n       "))
	}
	if b.Open != 0 {
		return fmt.Errorf("%d dispatches never finished", b.Open)
	}
	if r.Pins != nil && !reflect.DeepEqual(b.Pins, r.Pins) {
		return fmt.Errorf("pins %v, want %v", b.Pins, r.Pins)
	}
	for i, st := range b.Breakers {
		if want := "closed"; r.Breakers != nil && r.Breakers[i] != st || r.Breakers == nil && st != want {
			return fmt.Errorf("d%d's breaker %s, want %v", i, st, r.Breakers)
		}
	}
	for i, n := range b.HostedOnP {
		if want := 0; r.HostedOnP != nil && r.HostedOnP[i] != n || r.HostedOnP == nil && n != want {
			return fmt.Errorf("p%d hosts %d sessions, want %v", i, n, r.HostedOnP)
		}
	}
	for name, v := range map[string][]int{"prefill queued": b.PrefillQueued, "decode queued": b.DecodeQueued, "pending": b.Pending,
		"whole on P": b.WholeOnP, "P in flight": b.PInflight, "D in flight": b.DInflight, "seeding": b.Seeding} {
		for i, n := range v {
			if n != 0 {
				return fmt.Errorf("%s[%d] = %d with every request ended", name, i, n)
			}
		}
	}
	return nil
}

// Rows is the suite.
var Rows = []Row{
	{
		Name: "seed-then-direct", Decoders: 1, Pins: map[string]int{"s": 0},
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}, {Session: "s", New: 300, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin s/2 in=3308 out=8", "Reply d0 can=true direct=true ", "Accepted direct p-1 d0 kvcache-direct-to-d-session",
			"PrefillDone", "Finished ok",
		},
	},
	{
		// Bug 1: a session evicted earlier came back over the cap.
		Name: "session-cap-evicted-returns", Decoders: 1, SessionCap: 1, MaxResident: 1,
		Turns: []Turn{{Session: "a", New: 3000, Output: 8}, {Session: "b", New: 3000, Output: 8}, {Session: "a", New: 300, Output: 8}},
		Want: []string{
			"Begin a/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin b/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin a/2 in=3308 out=8", "Reply d0 can=true direct=false session-was-evicted", "Accepted seed p0 d0 pd-router-d-session-reseed-after-eviction",
			"TransferLanded", "PrefillDone", "Finished ok",
		},
	},
	{
		// Bug 4: under the router gate the admission asks for a direct
		// append only; a decoder that lost the session (b's seed trimmed a
		// under the decoder's cap; the never-shrink belief still pins a
		// there) refuses it, live as in the simulator.
		Name: "router-gate-direct-only", Decoders: 1, SessionCap: 1, Gate: kvc.GateRouter, Belief: kvc.BeliefNeverShrink,
		Turns: []Turn{{Session: "a", New: 3000, Output: 8}, {Session: "b", New: 3000, Output: 8}, {Session: "a", New: 300, Output: 8}},
		Want: []string{
			"Begin a/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed", "TransferLanded", "PrefillDone", "Finished ok", "Begin b/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed", "TransferLanded", "PrefillDone", "Finished ok", "Begin a/2 in=3308 out=8", "Reply d0 can=false direct=false session-not-resident", "Accepted pd p0 d0 pd-router-fallback-session-not-resident", "TransferLanded", "PrefillDone", "Finished ok",
		},
	},
	{
		// P fails after D accepted: the KV transfer fails; the decoder's
		// breaker counts it.
		Name: "transfer-fails", Decoders: 1, Fault: FaultTransfer,
		Turns: []Turn{{Session: "s", New: 3000, Output: 8, Fails: true}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferFailed", "Finished failed",
		},
	},
	{
		// Bug 2: a retry is the same turn; a turn-1 request retried after
		// a 503 is seeded again as turn 1, not labelled a reseed of turn 2.
		Name: "retry-after-503", Decoders: 2, Fault: FaultDecode503Once, Retries: 1,
		Only: "gateway", Why: "the simulator's workers answer no HTTP status: nothing to retry",
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}},
		// The decoder's 503 counts against its breaker (one failure:
		// closed); no KV landed on a decoder that refused the request.
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed", "TransferFailed", "Finished failed", "Begin s/1 in=3000 out=8", "Reply d1 can=true direct=false session-not-resident", "Accepted seed p0 d1 pd-router-turn1-seed", "TransferLanded", "PrefillDone", "Finished ok",
		},
	},
	{
		// Bug 3: a client leaving during a backpressure pause ends its
		// dispatch, which gives back cold routing's pending tokens.
		Name: "client-leaves-during-pause", Decoders: 1, Fault: FaultPauseClientLeaves, V3: kvc.V3Config{ColdRoute: true},
		Only: "gateway", Why: "the simulator's decoders hint a pause only under load, which a scripted row cannot pin down",
		Turns: []Turn{{Session: "s", New: 3000, Output: 8, Fails: true}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=false direct=false fault-injected", "Finished failed",
		},
	},
	{
		// v3 places a turn-1 prefill on its decoder (empty queues on both).
		Name: "v3-local-seed-on-d", Decoders: 1, Pins: map[string]int{"s": 0},
		V3:    kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true},
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}, {Session: "s", New: 300, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted direct p-1 d0 kvcache-local-seed-on-d", "PrefillDone", "Finished ok", "Begin s/2 in=3308 out=8", "Reply d0 can=true direct=true ", "Accepted direct p-1 d0 kvcache-direct-to-d-session", "PrefillDone", "Finished ok",
		},
	},
	{
		// The client leaves during the prefill: the dispatch ends with no
		// transport outcome (a client leaving is no worker's failure), and
		// what its acceptance counted is given back.
		Name: "client-leaves-during-prefill", Decoders: 1, Fault: FaultClientLeavesPrefill,
		Turns: []Turn{{Session: "s", New: 3000, Output: 8, Fails: true}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"Finished failed",
		},
	},
	{
		// The client leaves mid-stream: the KV landed, the prefill ended,
		// then the request fails; nothing counts against the breaker.
		Name: "client-leaves-mid-stream", Decoders: 1, Fault: FaultClientLeavesMidStream,
		Turns: []Turn{{Session: "s", New: 3000, Output: 2000, Fails: true}},
		Want: []string{
			"Begin s/1 in=3000 out=2000", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished failed",
		},
	},
	{
		// D dies mid-stream: its KV had landed, so the transport is not
		// at fault (the breaker stays closed); the request fails.
		Name: "decode-dies-mid-stream", Decoders: 1, Fault: FaultDecodeDiesMidStream,
		Only: "gateway", Why: "the simulator's workers never die",
		Turns: []Turn{{Session: "s", New: 3000, Output: 200, Fails: true}},
		Want: []string{
			"Begin s/1 in=3000 out=200", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished failed",
		},
	},
	{
		// A direct append larger than τ_append (8192): the decoder refuses
		// it (real-large-append) and the router seeds the session again.
		Name: "admission-refused-large-append", Decoders: 1,
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}, {Session: "s", New: 9000, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin s/2 in=12008 out=8", "Reply d0 can=false direct=false real-large-append", "Accepted pd p0 d0 pd-router-fallback-real-large-append",
			"TransferLanded", "PrefillDone", "Finished ok",
		}, // filled below
	},
	{
		// The admission RPC times out: the decoder is unreachable for the
		// router, which sends the request as plain PD; no refusal counts
		// toward τ_reject.
		Name: "admission-timeout", Decoders: 1, Fault: FaultAdmitTimeout,
		Only: "gateway", Why: "the simulator's admission round trip always answers",
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=false direct=false admission-timeout: no answer within 100ms",
			// The seed's labels: a refusal that names no cause on a decoder
			// not holding the session is session-not-resident.
			"Accepted pd p0 d0 pd-router-fallback-session-not-resident", "TransferLanded", "PrefillDone", "Finished ok",
		},
	},
	{
		// A refusal with a pause hint the client waits out: after the
		// pause the router sends turn 1 as plain PD (the seed's
		// pd-router-turn1-d-backpressure).
		Name: "admission-pause-then-served", Decoders: 1, Fault: FaultAdmitPauseOnce,
		Only: "gateway", Why: "the simulator's decoders hint a pause only under load, which a scripted row cannot pin down",
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=false direct=false fault-injected",
			"Accepted pd p0 d0 pd-router-turn1-d-backpressure", "TransferLanded", "PrefillDone", "Finished ok",
		},
	},
	{
		// v3 places a turn-1 prefill on P when the decoder's local budget
		// cannot take it (a seed through P).
		Name: "v3-seed-on-p", Decoders: 1, Pins: map[string]int{"s": 0},
		V3:    kvc.V3Config{DBudgetTokens: 1000, ColdRoute: true},
		Turns: []Turn{{Session: "s", New: 3000, Output: 8}, {Session: "s", New: 300, Output: 8}},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin s/2 in=3308 out=8", "Reply d0 can=true direct=true ", "Accepted direct p-1 d0 kvcache-direct-to-d-session",
			"PrefillDone", "Finished ok",
		},
	},
	{
		// v3 serves a new session whole on an idle prefill worker
		// (WholeOnP, ColdOnP), and keeps it there.
		Name: "v3-whole-on-p", Decoders: 1,
		V3:        kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true, LocalFallback: true, WholeOnP: true, ColdOnP: true},
		Turns:     []Turn{{Session: "s", New: 3000, Output: 8}, {Session: "s", New: 300, Output: 8}},
		HostedOnP: []int{1},
		Want: []string{
			"Begin s/1 in=3000 out=8", "Accepted whole-p p0 d-1 kvcache-whole-on-p", "PrefillDone", "Finished ok",
			"Begin s/2 in=3308 out=8", "Accepted whole-p p0 d-1 kvcache-whole-on-p", "PrefillDone", "Finished ok",
		},
	},
	{
		// The router gate's own session cap refuses a new session on a
		// decoder at the cap without asking it (session-cap), and the
		// request goes as plain PD.
		Name: "router-session-cap", Decoders: 1, Gate: kvc.GateRouter, RouterCap: 1,
		Turns: []Turn{{Session: "a", New: 3000, Output: 8}, {Session: "b", New: 3000, Output: 8}},
		Want: []string{
			"Begin a/1 in=3000 out=8", "Reply d0 can=true direct=false session-not-resident", "Accepted seed p0 d0 pd-router-turn1-seed",
			"TransferLanded", "PrefillDone", "Finished ok",
			"Begin b/1 in=3000 out=8", "Accepted pd p0 d0 pd-router-fallback-session-not-resident-session-cap",
			"TransferLanded", "PrefillDone", "Finished ok",
		},
	},
}
