package sim

import (
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// startWholeP serves r prefill and decode on prefill worker a.P (KVC v3's
// idle P taking decode work, kvc/v3.go): a Full request on P's own
// scheduler, its KV kept in P's prefix cache afterwards. It reports whether
// the worker took it.
func (s *Sim) startWholeP(r *req, a kvc.Action) bool {
	r.p, r.d = -1, s.prefills[a.P]
	r.startAt = s.now
	r.de.Renew(engine.Request{ID: r.t.ChatID, Kind: engine.Full, Blocks: r.t.HashIDs, SharedBlocks: r.shared, Input: r.t.InputLength, Output: r.t.OutputLength,
		Session: r.t.SessionID, SessionNum: r.sess.num, Tag: r})
	s.onWorker(r, r.d)
	if err := s.workers[r.d].Submit(s.now, &r.de); err != nil {
		r.x.Refused(reason(err, s.workers[r.d].Name()))
		return false
	}
	s.logEvent("session-binding", s.workers[r.d].Name(), r, "whole on a prefill worker", int64(r.t.InputLength))
	r.x.Accepted()
	s.collect(r.d)
	return true
}
