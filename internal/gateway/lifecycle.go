package gateway

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// life feeds one dispatch its outcomes under the server's lock, in the
// order docs/lifecycle.md gives (kvc/lifecycle.go checks it): the steps of
// the executor (generate.go, pd.go) each report one outcome through it, and
// the outcomes that can come from two places — the end of the prefill (the
// prefill leg's answer or the first byte of the decoding worker's), the
// request's end (an exit path, or a deferred safety net) — are reported
// once.
type life struct {
	s         *Server
	d         *kvc.Dispatch
	accepted  bool
	prefilled bool
	ended     bool
	// over mirrors ended for the request's own goroutine to read without
	// the lock: once true it stays true, so a finish or prefillOver that
	// sees it has nothing to do (the deferred safety net, mostly).
	over atomic.Bool
	// next is the first action, read under Begin's lock (lifeOf): the
	// executor's first step needs no second trip through the lock.
	next    kvc.Action
	hasNext bool
	// label is the execution-mode label fixed at accept when no later
	// outcome can change it (mechanisms other than KVC, whose label is
	// the dispatch's own mode): mode needs no lock then.
	label string
}

// lifeOf is d's life; first is its first action, read under the lock
// that began it.
func (s *Server) lifeOf(d *kvc.Dispatch, first kvc.Action) *life {
	return &life{s: s, d: d, next: first, hasNext: true}
}

// action is the dispatch's next step.
func (l *life) action() (a kvc.Action) {
	if l.hasNext {
		l.hasNext = false
		return l.next
	}
	l.s.locked(func() { a = l.d.Action() })
	return a
}

// reply feeds an admission RPC's answer.
func (l *life) reply(rep kvc.AdmitReply) { l.s.locked(func() { l.d.Reply(rep) }) }

// accept: the workers took the decided action (counted in flight from now).
func (l *life) accept() {
	l.s.locked(func() {
		l.accepted = true
		l.d.Accepted()
		if !l.s.kvc() {
			l.label = l.s.pathMode(l.d.Mode(), l.d.Decoder())
		}
	})
}

// prefillOver: the request's prefill is over (its KV landed on D, or the
// first byte of its answer came). Once; nothing after its end.
func (l *life) prefillOver() {
	if l.over.Load() {
		return
	}
	l.s.locked(func() {
		if l.accepted && !l.prefilled && !l.ended {
			l.prefilled = true
			l.d.PrefillDone()
		}
	})
}

// landed: the request's KV reached its decoder — the prefill leg
// answered (SGLang's prefill worker answers once its transfer is done), or
// the decoder's first byte came — so its prefill is over too; once, from
// whichever comes first. A probe's landing closes the decoder's breaker.
func (l *life) landed() {
	l.s.locked(func() {
		if !l.accepted || l.ended || l.prefilled {
			return
		}
		l.prefilled = true
		l.d.TransferLanded()
		l.d.PrefillDone()
	})
}

// transferFailed: the KV's way to the decoder failed; kvc decides whether
// the action crossed the transport, and so whether the breaker counts it.
func (l *life) transferFailed() {
	l.s.locked(func() {
		if l.accepted && !l.ended {
			now, d := l.s.now(), l.d.Decoder()
			was := d >= 0 && l.s.disp.BreakerOpen(now, d)
			l.d.TransferFailed(now)
			if d >= 0 && !was && l.s.disp.BreakerOpen(now, d) {
				l.s.log.Warn("breaker open", "role", roleDecode, "worker", l.s.decoderAt(d))
			}
		}
	})
}

// finish ends the dispatch (ok: completed). Once: a deferred finish(false)
// after an exit path's own is a no-op.
func (l *life) finish(ok bool) {
	if l.over.Load() {
		return
	}
	l.s.locked(func() {
		if !l.ended {
			l.ended = true
			l.over.Store(true)
			l.d.Finished(ok)
		}
	})
}

// mode is the request's execution-mode label.
func (l *life) mode() (m string) {
	if l.label != "" {
		return l.label
	}
	l.s.locked(func() { m = l.s.pathMode(l.d.Mode(), l.d.Decoder()) }) // paths.go
	return m
}

// firstByte wraps a worker's answer body so that f runs once, when its
// first byte arrives: for an SSE answer its first event (the first
// token), for a JSON one the start of the whole answer.
type firstByte struct {
	io.ReadCloser
	once sync.Once
	f    func()
}

func (b *firstByte) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.once.Do(b.f)
	}
	return n, err
}
