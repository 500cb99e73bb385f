package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
	dto "github.com/prometheus/client_model/go"
)

// allAt is a worker's capabilities with every capability in state t, as
// discovery may leave them: a capability the role never probes stays
// unknown whatever was learnt of the others.
func allAt(t tri) Capabilities {
	return Capabilities{Mode: "decode", PageSize: 64, DecodeRadix: t, CondAgg: t, ServeWhole: t,
		SessionCache: t, SnapshotDump: t, SnapshotSink: t}
}

// TestCapabilitySummaryByRole: the startup line names only the
// capabilities a worker's role has, in every state, so a stock prefill
// worker is "stock", not a list of decode capabilities it was never asked
// about (they used to print as unknown).
func TestCapabilitySummaryByRole(t *testing.T) {
	const base = "mode=decode page_size=64 "
	decodeAll := "decode_radix_cache=%s,conditional_agg=%s,session_cache=%s,snapshot_dump=%s"
	prefillAll := "serve_whole=%s,snapshot_ingest=%s"
	rep := func(f, v string) string { return strings.ReplaceAll(f, "%s", v) }
	// A stock worker of each role as discovery leaves it: the role's own
	// capabilities learnt absent, the others never asked (unknown).
	discoveredStock := func(role string) Capabilities {
		c := allAt(unknown)
		for _, f := range []*tri{&c.DecodeRadix, &c.CondAgg, &c.ServeWhole} {
			*f = absent // server_info answered
		}
		switch role {
		case roleDecode:
			c.SessionCache, c.SnapshotDump = absent, absent
		case rolePrefill:
			c.SnapshotSink = absent
		}
		return c
	}
	for _, c := range []struct {
		role string
		caps Capabilities
		want string
	}{
		{roleDecode, allAt(unknown), base + rep(decodeAll, "unknown")},
		{roleDecode, allAt(absent), base + "stock"},
		{roleDecode, allAt(present), base + rep(decodeAll, "yes")},
		{roleDecode, discoveredStock(roleDecode), base + "stock"},
		{rolePrefill, allAt(unknown), base + rep(prefillAll, "unknown")},
		{rolePrefill, allAt(absent), base + "stock"},
		{rolePrefill, allAt(present), base + rep(prefillAll, "yes")},
		{rolePrefill, discoveredStock(rolePrefill), base + "stock"},
		{roleColo, allAt(unknown), base + "stock"},
		{roleColo, allAt(absent), base + "stock"},
		{roleColo, allAt(present), base + "stock"},
		{roleColo, discoveredStock(roleColo), base + "stock"},
	} {
		if got := c.caps.Summary(c.role); got != c.want {
			t.Errorf("%s %+v:\n got %s\nwant %s", c.role, c.caps, got, c.want)
		}
		// /admin/workers shows the same capabilities, and only those.
		var names []string
		for _, f := range c.caps.fields(c.role) {
			names = append(names, f.name)
		}
		var shown []string
		for k := range c.caps.forRole(c.role) {
			if !slices.Contains([]string{"server_info", "kvc_protocol_version", "disaggregation_mode", "page_size", "error", "discovered_at"}, k) {
				shown = append(shown, k)
			}
		}
		sort.Strings(names)
		sort.Strings(shown)
		if !slices.Equal(names, shown) {
			t.Errorf("%s: /admin/workers shows %v, want %v", c.role, shown, names)
		}
	}
}

// TestCapabilitiesConsistentAcrossViews: after discovery of live workers
// of every role, the startup line, /admin/workers and /metrics name the
// same capabilities for each worker, the role's own, none unknown.
func TestCapabilitiesConsistentAcrossViews(t *testing.T) {
	p := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, emulatortest.Stock)
	pw := emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) { emulatortest.Stock(c); c.ServeWhole = true })
	d := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, emulatortest.Stock)
	dx := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) { c.Session = engine.SessionConfig{Enabled: true} })
	co := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleColocated, nil)
	kv, gk := gatewayServer(t, kvc.MechKVC, []*emulator.Server{p, pw}, []*emulator.Server{d, dx}, func(c *Config) { c.AdminToken, c.Health.Interval = "tok", -1 })
	cl, gc := gatewayServer(t, kvc.MechColo, nil, []*emulator.Server{co}, func(c *Config) { c.AdminToken, c.Health.Interval = "tok", -1 })
	wantLine := map[string]string{p.URL(): "stock", pw.URL(): "serve_whole=yes kvc_protocol=1", d.URL(): "stock",
		dx.URL(): "session_cache=yes,snapshot_dump=yes kvc_protocol=1", co.URL(): "stock"}
	for _, g := range []struct {
		url string
		s   *Server
	}{{kv.URL, gk}, {cl.URL, gc}} {
		g.s.Discover(context.Background())
		var view struct {
			Workers []map[string]json.RawMessage `json:"workers"`
		}
		if st, b := admin(t, http.MethodGet, g.url+"/admin/workers", "tok", nil, &view); st != 200 {
			t.Fatalf("/admin/workers: %d %s", st, b)
		}
		shown := map[string]map[string]string{}
		for _, w := range view.Workers {
			var u string
			var caps map[string]any
			json.Unmarshal(w["url"], &u)
			json.Unmarshal(w["capabilities"], &caps)
			shown[u] = map[string]string{}
			for k, v := range caps {
				if s, ok := v.(string); ok && (s == "yes" || s == "no" || s == "unknown") && k != "server_info" {
					shown[u][k] = s
				}
			}
		}
		fams := promtest.Scrape(t, g.url+"/metrics")
		for _, w := range g.s.Capabilities() {
			line := w.Capabilities.Summary(w.Role)
			if !strings.HasSuffix(line, " page_size=64 "+wantLine[w.URL]) {
				t.Errorf("%s %s: startup line %q, want it to end %q", w.Role, w.URL, line, wantLine[w.URL])
			}
			fs := w.Capabilities.fields(w.Role)
			if len(shown[w.URL]) != len(fs) {
				t.Errorf("%s: /admin/workers shows %v, want exactly %v", w.Role, shown[w.URL], fs)
			}
			for _, f := range fs {
				if f.t == unknown {
					t.Errorf("%s %s: %s still unknown after discovery", w.Role, w.URL, f.name)
				}
				if shown[w.URL][f.name] != f.t.String() {
					t.Errorf("%s: /admin/workers %s = %q, want %s", w.Role, f.name, shown[w.URL][f.name], f.t)
				}
				if v := promtest.Value(fams, "pdhybrid_worker_capability", map[string]string{"worker": w.URL, "capability": f.name}); v != b2f(f.t == present) {
					t.Errorf("%s: /metrics %s = %v, want %v", w.Role, f.name, v, b2f(f.t == present))
				}
			}
			for _, other := range []string{"decode_radix_cache", "conditional_agg", "session_cache", "snapshot_dump", "serve_whole", "snapshot_ingest"} {
				applies := slices.ContainsFunc(fs, func(f capField) bool { return f.name == other })
				if !applies && (strings.Contains(line, other) || shown[w.URL][other] != "" || hasSample(fams, w.URL, other)) {
					t.Errorf("%s %s: %s does not apply to the role but is shown", w.Role, w.URL, other)
				}
			}
		}
	}
}

// hasSample reports whether /metrics has a capability sample for worker u.
func hasSample(fams map[string]*dto.MetricFamily, u, capability string) bool {
	_, ok := promtest.Sample(fams, "pdhybrid_worker_capability", map[string]string{"worker": u, "capability": capability})
	return ok
}
