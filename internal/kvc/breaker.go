package kvc

// A windowed circuit breaker per decoder: the control plane's answer to a
// transport that fails. After Failures transfer failures to a decoder
// within WindowS seconds the breaker opens and the router sends that decoder
// nothing; after CooldownS it lets one request through (half-open), whose
// success closes it and whose failure opens it again. The seed's transport
// instead marked a peer dead for good on one timeout (F5); the simulator
// models that as the hair-trigger peer-failure mode, outside the router.

// BreakerConfig sets the breaker up; Failures 0 disables it.
type BreakerConfig struct {
	Failures  int
	WindowS   float64
	CooldownS float64
}

type breaker struct {
	cfg      BreakerConfig
	fails    []float64 // failure times within the window
	openedAt float64
	open     bool
	probing  bool // half-open: one request let through
}

// allows reports whether a request may go to the decoder at now; a
// half-open breaker lets exactly one through.
func (b *breaker) allows(now float64) bool {
	if !b.open {
		return true
	}
	if b.probing || now < b.openedAt+b.cfg.CooldownS {
		return false
	}
	return true
}

// sent notes that a request went to the decoder and reports whether it is
// the half-open breaker's probe.
func (b *breaker) sent(now float64) bool {
	if b.open && !b.probing && now >= b.openedAt+b.cfg.CooldownS {
		b.probing = true
		return true
	}
	return false
}

// failure counts a transport failure at now; probe says it was the
// half-open breaker's probe's.
func (b *breaker) failure(now float64, probe bool) {
	if b.cfg.Failures <= 0 {
		return
	}
	if b.open {
		// Open: wait again. A straggler (decided before the breaker
		// opened) failing leaves the probe out, if any, to say how it went.
		b.openedAt = now
		if probe {
			b.probing = false
		}
		return
	}
	kept := b.fails[:0]
	for _, t := range b.fails {
		if t > now-b.cfg.WindowS {
			kept = append(kept, t)
		}
	}
	b.fails = append(kept, now)
	if len(b.fails) >= b.cfg.Failures {
		b.open, b.openedAt, b.fails = true, now, b.fails[:0]
	}
}

func (b *breaker) success() {
	b.open, b.probing = false, false
	b.fails = b.fails[:0]
}

// PeerFailed reports a failed KV transfer to decoder d at now that no
// dispatch owns (a request's own failure is Dispatch.TransferFailed).
func (x *Dispatcher) PeerFailed(now float64, d int) { x.breakers[d].failure(now, false) }

// BreakerOpen reports whether d's breaker holds traffic back at now.
func (x *Dispatcher) BreakerOpen(now float64, d int) bool { return !x.breakers[d].allows(now) }
