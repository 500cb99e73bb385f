package gateway

// Routing each KVC request only to paths its decoder supports
// (capabilities.go has the order). The dispatcher decides as it always
// does; what changes on a decoder without the KVC extension is who answers
// the admission (the router itself: stockAdmit) and how a direct
// decision is carried out (do_local_prefill on a decoder with conditional
// aggregation). A protocol-level refusal the capabilities did not foresee
// — a 404 from the admission path, a 400 "without bootstrap room id" to a
// direct request — corrects them and sends the request once more, on the
// path they now allow; the client never sees it.

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// refusalText is the part of SGLang's scheduler abort for a request
// without a bootstrap room on a disaggregated worker.
const refusalText = "without bootstrap room id"

// decoderPath is the KVC path of decoder d (held lock): "" when the
// gateway does not run KVC.
func (s *Server) decoderPath(d int) string {
	if !s.kvc() && !s.cfg.Dispatch.Mechanism.IsPeer() || d < 0 {
		return ""
	}
	return s.decoderCaps(d).KVCPath()
}

// pathMode labels an execution mode with the path it took on decoder d
// (held lock; kvc.PathMode).
func (s *Server) pathMode(mode string, d int) string {
	if !s.kvc() {
		return mode // a peer's modes name their own paths
	}
	return kvc.PathMode(mode, s.decoderPath(d))
}

// workerCaps is what the dispatcher may ask of each worker, as discovery
// and refusals last learnt it (called with the lock held, as every call
// into the dispatcher is): a decoder prefills a request itself on the
// extension or with do_local_prefill — for the peers only the latter,
// whose radix cache holds what their PD turns sent it — and a prefill
// worker serves one whole unless it said it does not.
func (s *Server) workerCaps() kvc.WorkerCaps {
	peer := s.cfg.Dispatch.Mechanism.IsPeer()
	return kvc.WorkerCaps{
		LocalOnD: func(d int) bool {
			p := s.decoderCaps(d).KVCPath()
			return p == PathLocalPrefill || p == PathExtension && !peer
		},
		WholeOnP: func(p int) bool { return s.capsOf(rolePrefill, p).ServeWhole != absent },
		// A stock decoder (or conditional aggregation alone) keeps nothing:
		// its router index is not told what it was sent.
		KeepsOnD: func(d int) bool { return s.decoderCaps(d).KVCPath() != PathPlainPD },
	}
}

// peerDefaults fills the peers' unset knobs with their own defaults
// (docs/peer-baselines.md; the simulator's are the same).
func peerDefaults(c *kvc.PeerConfig) {
	if c.Strategy == "" {
		c.Strategy = kvc.StrategyISL
	}
	if c.EffISLThreshold == 0 {
		c.EffISLThreshold = 2048
	}
	if c.EffISLRatio == 0 {
		c.EffISLRatio = 0.7
	}
	if c.PrefillBusy == 0 {
		c.PrefillBusy = 4
	}
	if c.PrefillBatchTokens == 0 {
		c.PrefillBatchTokens = 8192
	}
	if c.NonCachedTokens == 0 {
		c.NonCachedTokens = 512
	}
}

// stockAdmit is the router's own admission for a decoder without the
// session cache (kvc.RouterAdmit, as the simulator's).
func (s *Server) stockAdmit(q *request, a kvc.Action) kvc.AdmitReply {
	var pinned bool
	var path string
	s.locked(func() {
		pin, ok := s.disp.DRouter().Pin(q.session)
		pinned = ok && pin == a.D && q.session != ""
		path = s.decoderPath(a.D)
	})
	return kvc.RouterAdmit(path, pinned, q.tokens, a)
}

// hasSessionCache reports whether decoder d may take the admission RPC:
// its session cache is offered or not yet known.
func (s *Server) hasSessionCache(d int) (ok bool) {
	s.locked(func() { ok = s.decoderCaps(d).SessionCache != absent })
	return ok
}

// noSessionCache records that decoder d answered 404 on the admission
// path.
func (s *Server) noSessionCache(d int) {
	s.locked(func() {
		s.correct(d, func(c *Capabilities) { c.SessionCache, c.SnapshotDump = absent, absent })
	})
}

// directBody shapes a direct request for decoder d: the session named on
// the extension, do_local_prefill under conditional aggregation.
func (s *Server) directBody(body map[string]any, q *request, d int) {
	var path string
	s.locked(func() { path = s.decoderPath(d) })
	if path == PathLocalPrefill {
		delete(body, "session_id")
		body["do_local_prefill"] = true
		return
	}
	body["session_id"] = q.session
}

// refused reads the start of a direct request's answer and reports
// whether it is the protocol-level refusal of a decoder that cannot take
// it (then the request is to be sent again, once, and d's capabilities
// are corrected). SGLang refuses a plain request with a 400; a streamed
// one with a 200 whose first event is the abort (its tokenizer manager
// yields the scheduler's abort into the stream), so a streamed direct
// answer's first event is read before anything is relayed. Otherwise
// resp's body is left as it came, for the relay.
func (s *Server) refused(q *request, resp *http.Response, d, p int) bool {
	if q.refused || d < 0 && p < 0 || !s.kvc() && !s.cfg.Dispatch.Mechanism.IsPeer() {
		return false
	}
	var b []byte
	switch {
	case resp.StatusCode == http.StatusBadRequest:
		b = peek(resp, nil)
	case resp.StatusCode == http.StatusOK && q.stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		b = peek(resp, []byte("\n\n")) // the first event
	default:
		return false
	}
	if !bytes.Contains(b, []byte(refusalText)) {
		return false
	}
	s.locked(func() {
		if d < 0 {
			s.correctPrefill(p) // a request served whole on P
			return
		}
		s.correct(d, func(c *Capabilities) {
			if c.KVCPath() == PathLocalPrefill {
				c.CondAgg = absent
			} else {
				c.SessionCache, c.SnapshotDump = absent, absent
			}
		})
	})
	q.refused = true
	return true
}

// peekLimit bounds what refused reads ahead of the relay.
const peekLimit = 64 << 10

// peek reads the start of resp's body — up to and including the first
// until, or all of it when until is nil — at most peekLimit bytes, and
// puts it back in front of the rest for the relay.
func peek(resp *http.Response, until []byte) []byte {
	var b []byte
	buf := make([]byte, 4<<10)
	for len(b) < peekLimit {
		n, err := resp.Body.Read(buf[:min(len(buf), peekLimit-len(b))])
		b = append(b, buf[:n]...)
		if err != nil || until != nil && bytes.Contains(b, until) {
			break
		}
	}
	resp.Body = &peekedBody{head: bytes.NewBuffer(b), rest: resp.Body}
	return b
}

// peekedBody is a body with what peek read put back in front; the direct
// relay (relaydirect.go) takes the unread part and the body under it.
type peekedBody struct {
	head *bytes.Buffer
	rest io.ReadCloser
}

func (p *peekedBody) Read(b []byte) (int, error) {
	if p.head.Len() > 0 {
		return p.head.Read(b)
	}
	return p.rest.Read(b)
}

func (p *peekedBody) Close() error { return p.rest.Close() }
