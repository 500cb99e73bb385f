package emulator

// The decode side of PD between emulated workers: a room's reservation,
// KV delivery, failures and the heartbeat that watches P.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

func (s *Server) decodeArrive(now float64, st *reqState) error {
	g := st.g
	st.er.Kind = engine.DecodeOnly
	if g.BootstrapHost == FakeBootstrapHost {
		st.fake = true
	} else {
		if g.BootstrapHost == "" {
			return badValue("Invalid request: bootstrap_host is required with a bootstrap_room. req.rid=%s", pyRepr(st.rid))
		}
		port := g.BootstrapPort
		if port == 0 {
			port = DefaultBootstrapPort
		}
		if s.drooms[g.BootstrapRoom] != nil {
			return badValue("bootstrap_room %d is already waiting on this decode worker", g.BootstrapRoom)
		}
		st.bootAddr = net.JoinHostPort(g.BootstrapHost, strconv.Itoa(port))
		s.drooms[g.BootstrapRoom] = st
	}
	if err := s.w.Reserve(now, &st.er); err != nil {
		if s.drooms[g.BootstrapRoom] == st {
			delete(s.drooms, g.BootstrapRoom)
		}
		return err
	}
	st.waitTimer = s.d.after(now+s.cfg.WaitingTimeout, func(t float64) {
		if st.ended || st.er.Stage == engine.StageDecoding {
			return
		}
		s.decodeFail(t, st, fmt.Sprintf("Request %d timed out after %.1fs in KVPoll.WaitingForInput", g.BootstrapRoom, t-st.arrived))
	})
	return nil
}

// decodeReserved: the KV is pre-allocated; tell P (or, without a peer,
// take the KV as arrived).
func (s *Server) decodeReserved(st *reqState, at float64) {
	if st.fake {
		st.waitTimer.cancel()
		s.w.StartDecode(at, &st.er)
		return
	}
	// With the decode radix cache the reservation matched a prefix here
	// (engine CachedTokens): P is told its length and sends the rest, as
	// SGLang's decoder sends decode_prefix_len with its KV indices.
	reg := registration{Room: st.g.BootstrapRoom, RID: st.rid, KVURL: s.url + "/_pd/kv", PromptTokens: st.er.Input,
		DecodePrefixLen: st.er.CachedTokens}
	url := "http://" + st.bootAddr + "/_pd/register"
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		err := s.postJSON(url, reg, nil)
		s.d.post(func(now float64) {
			if err != nil {
				s.decodeFail(now, st, "Failed to get kvcache from prefill instance, it might be dead ("+err.Error()+")")
				return
			}
			s.watch(now, st.bootAddr)
		})
	}()
}

// decodeFail ends D's leg with 500 and frees its KV.
func (s *Server) decodeFail(now float64, st *reqState, why string) {
	if st.ended {
		return
	}
	s.w.Abort(now, &st.er)
	s.metrics.transferFailed()
	s.end(st, &outcome{reason: finishAbort(pdError("Decode", st, why), 500), status: 500, at: now})
}

// deliver takes one of P's deliveries (driver goroutine). While trims
// stall the decoder's scheduler loop, the last delivery is handled (and
// acknowledged) only when the stall ends, as the seed's trims held back
// mooncake's completion handling (F6); handled is closed then.
func (s *Server) deliver(now float64, d delivery, handled chan struct{}) (int, string) {
	st := s.drooms[d.Room]
	if st == nil || (d.RID != "" && d.RID != st.rid) {
		return http.StatusNotFound, fmt.Sprintf("no request waits for bootstrap_room %d here", d.Room)
	}
	if !d.Done {
		close(handled)
		return http.StatusOK, ""
	}
	if st.er.Stage != engine.StageReserved {
		return http.StatusConflict, fmt.Sprintf("bootstrap_room %d has no KV pre-allocated yet", d.Room)
	}
	delete(s.drooms, d.Room)
	st.waitTimer.cancel()
	st.mu.Lock()
	st.firstTok, st.firstFrom = d.FirstToken, d.Prefill
	st.mu.Unlock()
	start := func(t float64) {
		defer close(handled)
		if !st.ended {
			s.w.StartDecode(t, &st.er)
		}
	}
	if until := s.w.StalledUntil(); until > now {
		s.d.after(until, start)
	} else {
		start(now)
	}
	return http.StatusOK, ""
}

func (s *Server) handleKVDelivery(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	if s.cfg.Role != engine.RoleDecode {
		writeHTTPError(w, http.StatusNotFound, "this worker takes no KV deliveries (not a decode worker)")
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var d delivery
	if err := strictJSON(body, &d); err != nil {
		writeValidation(w, "invalid KV delivery: "+jsonMsg(err))
		return
	}
	status, msg := http.StatusServiceUnavailable, "the decode worker is shutting down"
	handled := make(chan struct{})
	s.d.do(func(now float64) { status, msg = s.deliver(now, d, handled) })
	if status != http.StatusOK {
		writeHTTPError(w, status, msg)
		return
	}
	select {
	case <-handled:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// heartbeat tracks one prefill worker a decode worker waits on.
type heartbeat struct {
	failures int
	inflight bool
}

// watch starts heartbeats to addr (driver goroutine).
func (s *Server) watch(now float64, addr string) {
	if s.beats[addr] == nil {
		s.beats[addr] = &heartbeat{}
	}
	if s.beatTimer == nil {
		s.beatTimer = s.d.after(now+s.cfg.HeartbeatInterval, s.beat)
	}
}

func (s *Server) beat(now float64) {
	s.beatTimer = nil
	waited := map[string]bool{}
	for _, st := range s.drooms {
		waited[st.bootAddr] = true
	}
	for addr, hb := range s.beats {
		if !waited[addr] {
			delete(s.beats, addr)
			continue
		}
		if hb.inflight {
			continue
		}
		hb.inflight = true
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			err := s.ping("http://" + addr + "/health")
			s.d.post(func(now float64) { s.beaten(now, addr, hb, err) })
		}()
	}
	if len(s.beats) > 0 {
		s.beatTimer = s.d.after(now+s.cfg.HeartbeatInterval, s.beat)
	}
}

func (s *Server) beaten(now float64, addr string, hb *heartbeat, err error) {
	hb.inflight = false
	if err == nil {
		hb.failures = 0
		return
	}
	hb.failures++
	if hb.failures < s.cfg.HeartbeatMaxFailures {
		return
	}
	delete(s.beats, addr)
	for _, st := range s.drooms {
		if st.bootAddr == addr && st.er.Stage == engine.StageReserved {
			s.decodeFail(now, st, "Failed to get kvcache from prefill instance, it might be dead (heartbeat: "+err.Error()+")")
		}
	}
}

func (s *Server) ping(url string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}
