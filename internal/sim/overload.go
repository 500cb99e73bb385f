package sim

import "fmt"

// An overloaded cluster never catches up with the trace: requests arrive
// faster than they end, every queue grows, and a simulator that kept them all
// would grow without bound too. The run says so as soon as the backlog
// (requests ingested and not ended) passes a tenth of the limit and again at
// each doubling, and stops with a StopError at the limit.

// watchBacklog is called after each ingestion.
func (s *Sim) watchBacklog() error {
	if s.live > s.stats.MaxBacklog {
		s.stats.MaxBacklog = s.live
	}
	limit := s.cfg.MaxBacklog
	if limit <= 0 {
		return nil
	}
	if s.nextWarn == 0 {
		s.nextWarn = max(limit/10, 1)
	}
	if s.live >= s.nextWarn && s.live < limit {
		s.warn(fmt.Sprintf("overload: %d requests in flight or waiting at simulated %.0f s (%d finished); the cluster is not keeping up with the trace, and the run stops at %d (--max-backlog)",
			s.live, s.now, s.finished, limit))
		s.nextWarn *= 2
	}
	if s.live >= limit {
		return &StopError{Reason: fmt.Sprintf("overload: %d requests in flight or waiting at simulated %.0f s, the --max-backlog limit (%d finished); lower the arrival rate or time scale, add workers, or raise the limit",
			s.live, s.now, s.finished)}
	}
	return nil
}

func (s *Sim) warn(msg string) {
	s.warnings = append(s.warnings, msg)
	if s.cfg.Warn != nil {
		s.cfg.Warn(msg)
	}
}
