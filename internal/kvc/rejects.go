package kvc

// A session's refusals by each decoder, which blacklist the decoder for the
// session at τ_reject (Algorithm 1). With RejectWindowS only the refusals
// of the last window count (the seed's P8 sliding window): a session every
// decoder refused for its large appends was otherwise held to plain PD
// until a direct success that plain PD never brings.

// blacklisted says whether the session's refusals by d that count at now
// reached τ_reject.
func (x *Dispatcher) blacklisted(s *sessState, d int, now float64) bool {
	return x.cfg.TauReject > 0 && x.rejectsAt(s, d, now) >= x.cfg.TauReject
}

// rejectsAt is d's refusals of the session that count at now: all of them
// since the last reset, or those of the last RejectWindowS seconds.
func (x *Dispatcher) rejectsAt(s *sessState, d int, now float64) int {
	if w := x.cfg.RejectWindowS; w > 0 && d < len(s.rejectAt) {
		at := s.rejectAt[d]
		k := 0
		for k < len(at) && at[k] <= now-w {
			k++
		}
		if k > 0 {
			s.rejectAt[d] = append(at[:0], at[k:]...)
			s.rejects[d] = len(s.rejectAt[d])
		}
	}
	return s.rejected(d)
}

// rejected is d's refusals of the session as last counted.
func (s *sessState) rejected(d int) int {
	if d < len(s.rejects) {
		return s.rejects[d]
	}
	return 0
}

// reject counts a refusal by d at now (its time kept when windowed).
func (s *sessState) reject(d int, now float64, windowed bool) {
	if d >= len(s.rejects) {
		s.rejects = append(s.rejects, make([]int, d+1-len(s.rejects))...)
	}
	s.rejects[d]++
	if windowed {
		if d >= len(s.rejectAt) {
			s.rejectAt = append(s.rejectAt, make([][]float64, d+1-len(s.rejectAt))...)
		}
		s.rejectAt[d] = append(s.rejectAt[d], now)
	}
}

// forgive clears d's refusals (a success there resets τ_reject's count).
func (s *sessState) forgive(d int) {
	if d < len(s.rejects) {
		s.rejects[d] = 0
	}
	if d < len(s.rejectAt) {
		s.rejectAt[d] = s.rejectAt[d][:0]
	}
}
