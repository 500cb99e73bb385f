package sim

import "math/bits"

// Closing sessions whose last turn has ended. A trace never says that a
// session ended, so by default every session ever seen keeps a record in
// the replay, the trace checker, the control plane and the decoders (about
// a kilobyte each: most of a million one-turn sessions' 1.6 GB). A source
// that knows how many turns each session has — a generator, or a trace
// file whose turns were counted before the run — says which request is its
// session's last (SessionEnds), and once that request has ended nothing of
// the session can come again: its records are dropped where nothing else
// reads them (the replay's, the checker's, the decoders' and the control
// plane's own; kvc.Dispatcher.CloseSession keeps what still counts for
// other sessions until it stops counting). Exact: every result is what it
// is without (TestClosedSessionsChangeNothing). With --session-idle-forget
// nothing is closed: that bound decides what is dropped, as before.

// SessionEnds is a Source that knows, for the request its Next returned
// last, whether it is its session's last: no later request of the stream
// belongs to that session or reuses one of its chat ids.
type SessionEnds interface {
	LastOfSession() bool
}

// sessionEnds is the source's SessionEnds, nil when it has none.
func sessionEnds(src Source) SessionEnds {
	if e, ok := src.(SessionEnds); ok {
		return e
	}
	return nil
}

// closeAsksEveryWorker makes closeSession ask every worker to forget the
// session, not only those its requests went to (a test compares the two).
var closeAsksEveryWorker = false

// closeSession drops every record of a session whose last request ended.
func (s *Sim) closeSession(sess *session) {
	id := sess.id
	s.sessionBusy(sess) // its chain leaves the idle budget (and any forget entry goes stale)
	sess.chain, sess.gone = nil, true
	s.dropSession(sess)
	delete(s.lastSync, id)
	s.disp.CloseSessionKey(sess.key())
	if closeAsksEveryWorker || len(s.workers) > 64 {
		for _, w := range s.workers {
			w.ForgetSessionKey(sess.key())
		}
	} else {
		for m := sess.onWorkers; m != 0; m &= m - 1 { // the workers that may hold a record of it
			s.workers[bits.TrailingZeros64(m)].ForgetSessionKey(sess.key())
		}
	}
	s.stats.closedSessions++
}
