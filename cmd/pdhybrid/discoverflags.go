package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
)

// discoverFlags are serve's flags for worker discovery (gateway's
// discover.go): names re-resolved on an interval, whose workers join and
// leave the pools.
type discoverFlags struct {
	names     []string
	intervalS float64
	dnsServer string
	targets   []gateway.DiscoverTarget
}

func (d *discoverFlags) register(fs *pflag.FlagSet) {
	fs.StringSliceVar(&d.names, "discover", nil, "`ROLE=NAME` whose DNS records are workers of pool ROLE (prefill, decode, colo): dns+srv://_port._proto.service (SRV, a Kubernetes headless Service's port) or dns://host:port (A/AAAA); a prefill name may end in @BOOTSTRAP_PORT (default 8998). Repeat or comma-separate; workers that appear are added, those that vanish drained then removed (docs/deploy.md)")
	fs.Float64Var(&d.intervalS, "discover-interval", 5, "with --discover: `seconds` between resolutions of its names, in [0.01, 3600]")
	fs.StringVar(&d.dnsServer, "dns-server", "", "with --discover: the DNS server `HOST:PORT` (UDP) to ask instead of the system's resolver")
}

// check validates the flags against the mechanism's pools.
func (d *discoverFlags) check(ck *checks, mech string) {
	ck.num("discover-interval", between(0.01, 3600).is("a number of seconds"))
	ck.only("discover-interval", len(d.names) > 0, "with --discover")
	ck.only("dns-server", len(d.names) > 0, "with --discover")
	if d.dnsServer != "" {
		if _, _, err := net.SplitHostPort(d.dnsServer); err != nil {
			ck.fail("--dns-server %s: want HOST:PORT", d.dnsServer)
		}
	}
	d.targets = nil
	for _, n := range d.names {
		t, err := gateway.ParseDiscoverTarget(n)
		if err != nil {
			ck.fail("--discover %v", err)
			continue
		}
		if colo := mech == "pd-colo"; colo != (t.Role == "colo") {
			ck.fail("--discover %s: --mechanism %s has no %s pool", n, mech, t.Role)
		}
		d.targets = append(d.targets, t)
	}
}

func (d *discoverFlags) interval() time.Duration {
	return time.Duration(d.intervalS * float64(time.Second))
}

func (d *discoverFlags) resolver() gateway.Resolver {
	if d.dnsServer == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", d.dnsServer)
	}}
}

// initial resolves the targets until the pools cfg needs have a worker
// each (the gateway cannot start with an empty pool), saying on stderr
// what it waits for; it returns what it found, for cfg's pools.
func (d *discoverFlags) initial(ctx context.Context, e *env, cfg *gateway.Config, mech string) ([]gateway.Discovered, error) {
	r := d.resolver()
	for {
		var found []gateway.Discovered
		var failed []string
		for _, t := range d.targets {
			c, cancel := context.WithTimeout(ctx, max(d.interval(), time.Second))
			ws, err := gateway.Resolve(c, r, t)
			cancel()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", t, err))
			}
			found = append(found, ws...)
		}
		has := map[string]bool{"prefill": len(cfg.Prefill) > 0, "decode": len(cfg.Decode) > 0, "colo": len(cfg.Colo) > 0}
		for _, w := range found {
			has[w.Role] = true
		}
		var missing []string
		need := []string{"prefill", "decode"}
		if mech == "pd-colo" {
			need = []string{"colo"}
		}
		for _, role := range need {
			if !has[role] {
				missing = append(missing, role)
			}
		}
		if len(missing) == 0 {
			return found, nil
		}
		fmt.Fprintf(e.stderr, "serve: waiting for %s workers to be discovered%s\n", strings.Join(missing, " and "), strings.Join(append([]string{""}, failed...), "; "))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d.interval()):
		}
	}
}

// addTo puts the discovered workers into cfg's pools, those named on the
// command line too aside, and returns the ones it put there.
func addTo(cfg *gateway.Config, found []gateway.Discovered) []gateway.Discovered {
	have := map[string]bool{}
	for _, p := range cfg.Prefill {
		have[p.URL] = true
	}
	for _, u := range append(append([]string(nil), cfg.Decode...), cfg.Colo...) {
		have[u] = true
	}
	var added []gateway.Discovered
	for _, w := range found {
		if have[w.URL] {
			continue
		}
		have[w.URL] = true
		added = append(added, w)
		switch w.Role {
		case "prefill":
			cfg.Prefill = append(cfg.Prefill, gateway.Prefill{URL: w.URL, BootstrapPort: w.BootstrapPort})
		case "decode":
			cfg.Decode = append(cfg.Decode, w.URL)
		default:
			cfg.Colo = append(cfg.Colo, w.URL)
		}
	}
	return added
}
