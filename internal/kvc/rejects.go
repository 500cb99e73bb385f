package kvc

// A session's refusals by each decoder, which blacklist the decoder for the
// session at τ_reject (Algorithm 1).

// blacklisted says whether the session's refusals by d reached τ_reject.
func (x *Dispatcher) blacklisted(s *sessState, d int) bool {
	return x.cfg.TauReject > 0 && s.rejected(d) >= x.cfg.TauReject
}

// rejected is d's refusals of the session.
func (s *sessState) rejected(d int) int {
	if d < len(s.rejects) {
		return s.rejects[d]
	}
	return 0
}

// reject counts a refusal by d.
func (s *sessState) reject(d int) {
	if d >= len(s.rejects) {
		s.rejects = append(s.rejects, make([]int, d+1-len(s.rejects))...)
	}
	s.rejects[d]++
}

// forgive clears d's refusals (a success there resets τ_reject's count).
func (s *sessState) forgive(d int) {
	if d < len(s.rejects) {
		s.rejects[d] = 0
	}
}
