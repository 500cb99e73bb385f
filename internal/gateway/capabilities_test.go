package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
)

// decoderKinds are the decode workers of the live matrix: stock SGLang,
// with its decode radix cache, with conditional aggregation (and the radix
// cache it needs to reuse anything), and the KVC extension.
var decoderKinds = []struct {
	name string
	path string
	edit func(*emulator.Config)
}{
	{"stock", PathPlainPD, emulatortest.Stock},
	{"decode-radix", PathDeltaPD, func(c *emulator.Config) { emulatortest.Stock(c); c.DecodeRadix = true }},
	{"conditional-agg", PathPlainPD, func(c *emulator.Config) { emulatortest.Stock(c); c.ConditionalAgg = true }},
	{"conditional-agg+decode-radix", PathLocalPrefill, func(c *emulator.Config) { emulatortest.Stock(c); c.ConditionalAgg, c.DecodeRadix = true, true }},
	{"extended", PathExtension, func(c *emulator.Config) { c.Session = engine.SessionConfig{Enabled: true} }},
}

// TestCapabilityDiscovery: the gateway learns each decoder's capabilities
// from /server_info and the extension probes, and shows them and the KVC
// path in /admin/workers and /metrics.
func TestCapabilityDiscovery(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, nil)
	var ds []*emulator.Server
	for _, k := range decoderKinds {
		ds = append(ds, emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, k.edit))
	}
	gw, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, ds, func(c *Config) {
		c.AdminToken, c.Health.Interval = "tok", -1
	})
	caps := g.Discover(context.Background())
	if c := caps[p.URL()]; c.Mode != "prefill" || c.SnapshotSink != present || c.PageSize != 64 || c.Error != "" {
		t.Errorf("prefill: %+v", c)
	}
	var view struct {
		Workers []workerView `json:"workers"`
	}
	if st, b := admin(t, http.MethodGet, gw.URL+"/admin/workers", "tok", nil, &view); st != 200 {
		t.Fatalf("/admin/workers: %d %s", st, b)
	}
	byURL := map[string]workerView{}
	for _, v := range view.Workers {
		byURL[v.URL] = v
	}
	fams := promtest.Scrape(t, gw.URL+"/metrics")
	for i, k := range decoderKinds {
		u := ds[i].URL()
		c := caps[u]
		if c.Mode != "decode" || c.Error != "" || c.KVCPath() != k.path {
			t.Errorf("%s: %+v, path %s, want %s", k.name, c, c.KVCPath(), k.path)
		}
		// The simulator's decoder of the same kind (sim --decode-worker-kind)
		// takes the same path.
		if sc, err := kvc.ParseDecoderKind(k.name); err != nil || sc.Path() != c.KVCPath() {
			t.Errorf("%s: the simulator's kind is %+v (%v), path %s; the gateway's %s", k.name, sc, err, sc.Path(), c.KVCPath())
		}
		if v := byURL[u]; v.KVCPath != k.path || v.Capabilities.SessionCache != c.SessionCache {
			t.Errorf("%s: /admin/workers shows %+v", k.name, v)
		}
		if v := promtest.Value(fams, "pdhybrid_worker_kvc_path", map[string]string{"worker": u, "path": k.path}); v != 1 {
			t.Errorf("%s: pdhybrid_worker_kvc_path{path=%s} = %v", k.name, k.path, v)
		}
		want := 0.0
		if k.name == "extended" {
			want = 1
		}
		if v := promtest.Value(fams, "pdhybrid_worker_capability", map[string]string{"worker": u, "capability": "session_cache"}); v != want {
			t.Errorf("%s: session_cache capability %v, want %v", k.name, v, want)
		}
	}
}

// TestDiscoveryTellsErrorFrom404: a worker whose server_info and probes
// fail (500, or no answer) keeps its last belief and reports the error; a
// 404 is the only "not offered".
func TestDiscoveryTellsErrorFrom404(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	g := &Server{cfg: Config{Client: http.DefaultClient}}
	prev := Capabilities{SessionCache: present}
	c := g.discover(context.Background(), broken.URL, roleDecode, prev)
	if c.SessionCache != present || c.Info != unknown || c.Error == "" {
		t.Fatalf("after 500s: %+v, want the belief kept and the error named", c)
	}
	if c.KVCPath() != PathExtension {
		t.Fatalf("path %s", c.KVCPath())
	}
	broken.Close()
	if c = g.discover(context.Background(), broken.URL, roleDecode, Capabilities{}); c.SessionCache != unknown || c.Error == "" {
		t.Fatalf("unreachable: %+v", c)
	}
	stock := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	if c = g.discover(context.Background(), stock.URL(), roleDecode, prev); c.SessionCache != absent || c.SnapshotDump != absent || c.Error != "" {
		t.Fatalf("stock decoder: %+v", c)
	}
}

// TestHealthRoundRediscovers: every health round learns the capabilities
// again, so a belief that went wrong (a worker restarted with other flags)
// is put right without a refusal: a stock decoder believed to have the
// session cache and the decode radix cache is found stock again.
func TestHealthRoundRediscovers(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	_, g := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) {
		c.Health.Interval = 20 * time.Millisecond
	})
	deadline := time.Now().Add(10 * time.Second)           // a bound, not a timing claim: rounds are 20 ms apart
	for g.Capabilities()[1].Capabilities.Info != present { // the start's discovery, done
		if time.Now().After(deadline) {
			t.Fatal("no discovery within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	wrong := Capabilities{Info: present, Mode: "decode", PageSize: 64, DecodeRadix: present, SessionCache: present, SnapshotDump: present}
	g.locked(func() {
		for _, w := range g.workers {
			if w.Role == roleDecode {
				w.caps = wrong
			}
		}
	})
	for {
		c := g.Capabilities()[1]
		if c.KVCPath == PathPlainPD && c.Capabilities.DecodeRadix == absent && c.Capabilities.SessionCache == absent {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of health rounds the decoder is still %+v, path %s", c.Capabilities, c.KVCPath)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
