package sim

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// Transport faults. A KV transfer still on the link TransferTimeoutS after
// it started fails its request (cause kv-transfer-timeout), as mooncake's
// batch_transfer_sync does. What the failure does next is PeerFailure:
//
//   - "windowed" (ours): the control plane's breaker for that decoder counts
//     it (kvc/breaker.go) and, after enough failures in its window, routes
//     around the decoder until a probe succeeds;
//   - "hair-trigger" (the seed's mooncake, F5): the P→D peer is marked dead
//     for the rest of the run, and every later transfer between them fails
//     at once (cause peer-dead), while the router, which does not know, keeps
//     sending requests there.

const (
	PeerWindowed    = "windowed"
	PeerHairTrigger = "hair-trigger"
)

// watchTransfer arms the timeout of a transfer just started.
func (s *Sim) watchTransfer(r *req, x *engine.Transfer) {
	if s.cfg.TransferTimeoutS > 0 {
		s.pushFor(r, event{t: s.now + s.cfg.TransferTimeoutS, kind: evXferTimeout, xfer: x})
	}
}

// transferTimeout fires TransferTimeoutS after x started.
func (s *Sim) transferTimeout(r *req, x *engine.Transfer) {
	if x.Tag.(*kvXfer).landed || r.ended || r.dead {
		return
	}
	p, d := r.p-s.prefills[0], r.d-s.decodes[0]
	r.x.TransferFailed(s.now)
	s.peerFailed(p, d)
	s.failLegs(r, fmt.Sprintf("kv-transfer-timeout: %s → %s: a transfer of %d bytes still unfinished after %g s",
		s.workers[r.p].Name(), s.workers[r.d].Name(), x.Bytes, s.cfg.TransferTimeoutS))
}

// peerFailed marks the P→D peer dead under the hair-trigger mode (the
// dispatcher's breaker heard of the failure from the request itself).
func (s *Sim) peerFailed(p, d int) {
	if s.cfg.PeerFailure == PeerHairTrigger {
		if s.deadPeer == nil {
			s.deadPeer = map[[2]int]bool{}
		}
		if !s.deadPeer[[2]int{p, d}] {
			s.deadPeer[[2]int{p, d}] = true
			s.logEventW("peer-dead", s.workers[s.decodes[d]].Name(), fmt.Sprintf("%s marked %s dead after a transfer timeout (hair-trigger)",
				s.workers[s.prefills[p]].Name(), s.workers[s.decodes[d]].Name()))
		}
	}
}

// peerDead reports whether a hair-trigger failure killed r's P→D peer.
func (s *Sim) peerDead(r *req) bool {
	return s.deadPeer != nil && s.deadPeer[[2]int{r.p - s.prefills[0], r.d - s.decodes[0]}]
}

// kvXfer is a P→D chunk transfer and its tag (Transfer.Tag points back at
// it): landed once the decoder handled it.
type kvXfer struct {
	engine.Transfer
	r      *req
	landed bool
}

// landTransfer hands a transfer whose bytes arrived to its decoder. A
// decoder whose scheduler loop is stalled by a trim handles it only when the
// stall is over (the seed's trims blocked mooncake's completion handling,
// F6), and the transfer's timeout keeps running until then.
func (s *Sim) landTransfer(t *kvXfer) {
	r := t.r.alive()
	if !r.dead && r.d >= 0 {
		if until := s.workers[r.d].StalledUntil(); until > s.now {
			x := &engine.Transfer{Tag: t}
			s.pushFor(r, event{t: until, kind: evLand, xfer: x})
			return
		}
	}
	t.landed = true
	s.transferDone(r)
}
