package sim

import (
	"fmt"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// KVC on the decoders people run (docs/gateway.md): with a decoder kind
// other than extended a decoder has no session cache, and KVC takes the
// path the live gateway takes on it (kvc.DecoderCaps.Path, one function
// for both): the router answers its own admission (kvc.RouterAdmit, no
// round trip), a direct decision is a local prefill into the decoder's
// radix cache (conditional aggregation), a seed is PD to the session's
// decoder, which receives only the delta where it has the decode radix
// cache, and the execution mode names the path (kvc.PathMode).

// decoderKinds reads KVC.DecodeWorkerKind for n decoders.
func (k *KVC) decoderKinds(n int) ([]kvc.DecoderCaps, error) {
	spec := k.DecodeWorkerKind
	if spec == "" {
		spec = kvc.KindExtended
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 1 && len(parts) != n {
		return nil, fmt.Errorf("sim: decode worker kind %q names %d kinds for %d decoders, want one for all or one per decoder", spec, len(parts), n)
	}
	out := make([]kvc.DecoderCaps, n)
	for i := range out {
		c, err := kvc.ParseDecoderKind(strings.TrimSpace(parts[min(i, len(parts)-1)]))
		if err != nil {
			return nil, fmt.Errorf("sim: decode worker kind: %v", err)
		}
		out[i] = c
	}
	return out, nil
}

// checkKinds refuses what the kinds cannot run: the D→P snapshot RPCs are
// part of the extension.
func (c *Config) checkKinds() error {
	ks, err := c.KVC.decoderKinds(c.Decode)
	if err != nil {
		return err
	}
	switch c.KVC.PrefillWorkerKind {
	case "", kvc.KindExtended:
	case kvc.KindStock:
		if c.KVC.DToP != DToPOff {
			return fmt.Errorf("sim: prefill worker kind stock: --d-to-p-sync %s needs the KVC extension's snapshot RPCs on the prefill workers (prefill worker kind extended)", c.KVC.DToP)
		}
	default:
		return fmt.Errorf("sim: unknown prefill worker kind %q (want stock or extended)", c.KVC.PrefillWorkerKind)
	}
	for i, k := range ks {
		if !k.SessionCache && c.KVC.DToP != DToPOff {
			return fmt.Errorf("sim: decoder %d is %s: --d-to-p-sync %s needs the KVC extension's snapshot RPCs on every decoder (decode worker kind extended)", i, kindName(k), c.KVC.DToP)
		}
	}
	return nil
}

// kindName is the kind a decoder's capabilities make.
func kindName(c kvc.DecoderCaps) string {
	for _, k := range kvc.DecoderKinds {
		if x, _ := kvc.ParseDecoderKind(k); x == c {
			return k
		}
	}
	return "?"
}

// decoderEngine is what decoder d's engine keeps under its kind: its
// session cache only with the extension, SGLang's decode radix cache and
// local prefill as the flags give them.
func (s *Sim) decoderEngine(d int, sc engine.SessionConfig) (engine.SessionConfig, bool, bool) {
	if s.cfg.Mechanism != KVCacheCentric {
		return sc, false, false
	}
	k := s.dcaps[d]
	if !k.SessionCache {
		sc = engine.SessionConfig{}
	}
	return sc, k.DecodeRadix, k.CondAgg
}

// dPath is decoder d's KVC path ("" off kvcache-centric).
func (s *Sim) dPath(d int) string {
	if s.cfg.Mechanism != KVCacheCentric || d < 0 || d >= len(s.dcaps) {
		return ""
	}
	return s.dcaps[d].Path()
}

// workerCaps tells the dispatcher which decoders prefill a request
// themselves (the extension's direct append, do_local_prefill) and
// whether the prefill workers serve one whole.
func (s *Sim) workerCaps() kvc.WorkerCaps {
	wc := kvc.WorkerCaps{LocalOnD: func(d int) bool {
		p := s.dPath(d)
		return p == kvc.PathExtension || p == kvc.PathLocalPrefill
	}, KeepsOnD: func(d int) bool {
		return s.dPath(d) != kvc.PathPlainPD // a stock decoder keeps nothing (kvc.DecoderCaps.Keeps)
	}}
	if s.cfg.KVC.PrefillWorkerKind == kvc.KindStock {
		wc.WholeOnP = func(int) bool { return false } // stock SGLang refuses a raw /generate on P
	}
	return wc
}

// routerAdmits answers r's admission itself when its decoder has no
// session cache (as the gateway's router does: no RPC, no round trip) and
// reports whether it did.
func (s *Sim) routerAdmits(r *req, a kvc.Action) bool {
	p := s.dPath(a.D)
	if p == "" || p == kvc.PathExtension {
		return false
	}
	pin, ok := s.disp.DRouter().PinKey(r.sessKey())
	r.x.Reply(kvc.RouterAdmit(p, ok && pin == a.D && r.t.SessionID != "", r.t.InputLength, a))
	return true
}
