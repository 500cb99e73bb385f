package kvc

import "math"

// Balanced session starts (V3Config.BalanceStarts). A data-parallel
// cluster with sticky routing starts its sessions round-robin, so every GPU
// holds the same number of them; v3's load-based placement of a new session
// looked only at the queues of the moment, and on a lightly loaded cluster
// those are empty nearly everywhere. Then the ties went to whichever
// decoder Algorithm 1 ranks first, and the prefill worker, whose in-flight
// count rarely fell below an idle decoder's, started few sessions: on the
// WEKA set at 4 GPUs it hosted 9 of 148 and was busy a third as long as
// each decoder, whose decode batches were a third larger than DP's. Counting
// the sessions each GPU started gives v3 DP's spread where the queues do not
// decide, and keeps the queue-based choice where they do.

// v3Starts counts the sessions each decoder and prefill worker started.
type v3Starts struct {
	d, p []int
	all  int
	// recent is the requests each decoder took, decayed with the half-life
	// BalanceHalfLifeS; recentAt when each was last brought up to date.
	recent, recentAt []float64
}

func (s *v3Starts) took(d int, now, half float64) {
	s.recent[d] = s.recentOn(d, now, half) + 1
	s.recentAt[d] = now
}

func (s *v3Starts) recentOn(d int, now, half float64) float64 {
	return s.recent[d] * math.Exp2(-(now-s.recentAt[d])/half)
}

func (s *v3Starts) grow(nP, nD int) {
	if len(s.p) < nP {
		s.p = append(s.p, make([]int, nP-len(s.p))...)
	}
	if len(s.d) < nD {
		s.d = append(s.d, make([]int, nD-len(s.d))...)
		s.recent = append(s.recent, make([]float64, nD-len(s.recent))...)
		s.recentAt = append(s.recentAt, make([]float64, nD-len(s.recentAt))...)
	}
}

// v3Started counts an accepted request that starts its session.
func (t *Dispatch) v3Started() {
	x := t.x
	if half := x.cfg.V3.BalanceHalfLifeS; half > 0 && t.kind != ActWholeP && t.chosenD >= 0 {
		x.load.started.took(t.chosenD, t.now, half)
	}
	if x.session(t.r.key()).seen {
		return
	}
	st := &x.load.started
	st.all++
	switch {
	case t.kind == ActWholeP && t.chosenP >= 0:
		st.p[t.chosenP]++
	case t.chosenD >= 0:
		st.d[t.chosenD]++
	}
}

// v3FewerStarts reports whether cold routing prefers decoder d to best at
// equal cost: d took fewer requests lately (BalanceHalfLifeS), or as many
// and started fewer sessions.
func (t *Dispatch) v3FewerStarts(d, best int) bool {
	x := t.x
	if !x.cfg.V3.BalanceStarts {
		return false
	}
	st := &x.load.started
	if half := x.cfg.V3.BalanceHalfLifeS; half > 0 {
		if a, b := st.recentOn(d, t.now, half), st.recentOn(best, t.now, half); a != b {
			return a < b
		}
	}
	return st.d[d] < st.d[best]
}

// v3ShareOnP reports whether prefill worker p may start a new session as
// its host: the sessions it started, with this one, are at most its equal
// share of all sessions started, with this one (one in |P|+|D|), and its
// prefill queue is at most PHostQueueTokens, so that the cold prompts it
// prefills for the decoders do not wait behind the sessions it hosts.
func (x *Dispatcher) v3ShareOnP(p int) bool {
	st := &x.load.started
	n := len(x.p.names) + len(x.d.names)
	return (st.p[p]+1)*n <= st.all+1 && x.load.p[p] <= x.cfg.V3.PHostQueueTokens
}
