package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// TestAdmission404MarksDecoderStock: a decoder discovered with the
// session-cache extension that then answers its admission RPC 404 (an
// SGLang restarted without it, behind the same address) is corrected to
// stock by that 404 alone — its /generate still serves direct requests, so
// no refusal there would correct it — and every turn is still served.
func TestAdmission404MarksDecoderStock(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	target, _ := url.Parse(d.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var lost atomic.Bool // the extension's admission path gone
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lost.Load() && r.URL.Path == "/session_cache/admit_direct_append" {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Decode = []string{front.URL}
		c.Health.Interval = -1 // no round corrects it meanwhile
	})
	g.Discover(context.Background())
	if c := decoderSessionCache(g); c != present {
		t.Fatalf("decoder's session cache %v after discovery, want present", c)
	}
	lost.Store(true)
	for i, a := range turns(t, gw.URL, "lost", 2) {
		if a.status != http.StatusOK {
			t.Fatalf("turn %d: %+v", i+1, a)
		}
	}
	if c := decoderSessionCache(g); c != absent {
		t.Errorf("decoder's session cache %v after its admission answered 404, want absent", c)
	}
}

// decoderSessionCache is what g believes of its one decoder's extension.
func decoderSessionCache(g *Server) (c tri) {
	g.locked(func() {
		for _, w := range g.workers {
			if w.Role == roleDecode {
				c = w.caps.SessionCache
			}
		}
	})
	return c
}
