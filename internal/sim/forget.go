package sim

// Forgetting idle sessions (Config.SessionIdleForgetS). A trace never says
// that a session ended: any session may send another turn later, so the
// replay, the trace checker, the control plane and the decoders keep a
// record of every session ever seen, and a run's memory grows with the
// sessions it served (about a kilobyte each: a million one-turn sessions
// held most of a 1.4 GB run). With a bound, a session idle for longer (no
// request of it in flight or waiting, in simulated seconds) is forgotten by
// all of them, so memory follows the live sessions. A later turn of a
// forgotten session stops the run with the checker's located error (its
// parent is no longer known), which names the flag. Off (0), nothing is
// forgotten and nothing changes.

// forgetRef is a session that went idle at at; gen tells a session that
// has been busy since (sessionBusy moves idleGen) from one still idle.
type forgetRef struct {
	sess *session
	gen  uint32
	at   float64
}

// noteIdleForForget files a session that just went idle (sessionIdle).
func (s *Sim) noteIdleForForget(sess *session) {
	if s.cfg.SessionIdleForgetS > 0 {
		s.forget = append(s.forget, forgetRef{sess: sess, gen: sess.idleGen, at: s.now})
	}
}

// forgetIdle forgets the sessions idle for longer than the bound by now.
// Sessions go idle in time order, so the queue is oldest first.
func (s *Sim) forgetIdle() {
	d := s.cfg.SessionIdleForgetS
	if d <= 0 {
		return
	}
	for s.forgetHead < len(s.forget) {
		ref := s.forget[s.forgetHead]
		if s.now-ref.at <= d {
			break
		}
		s.forget[s.forgetHead] = forgetRef{}
		s.forgetHead++
		if ref.sess.idleGen == ref.gen && ref.sess.live == 0 {
			s.forgetSession(ref.sess)
		}
	}
	if s.forgetHead > 1024 && s.forgetHead*2 > len(s.forget) {
		n := copy(s.forget, s.forget[s.forgetHead:])
		clear(s.forget[n:])
		s.forget, s.forgetHead = s.forget[:n], 0
	}
}

// forgetSession drops every record of an idle session.
func (s *Sim) forgetSession(sess *session) {
	id := sess.id
	s.sessionBusy(sess) // its chain leaves the idle budget's list (stale there)
	sess.chain = nil
	s.dropSession(sess)
	delete(s.lastSync, id)
	s.disp.ForgetSessionKey(sess.key())
	for _, w := range s.workers {
		w.ForgetSessionKey(sess.key())
	}
	s.stats.ForgottenSessions++
}
