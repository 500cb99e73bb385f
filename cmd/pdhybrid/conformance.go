package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/conformance"
)

// conformanceCmd runs the KVC worker contract (docs/worker-protocol.md)
// against one live worker: what a patched SGLang, or any engine, must do
// for the gateway to route to it.
func conformanceCmd(e *env) *cobra.Command {
	var (
		u, role string
		timeout float64
		asJSON  bool
	)
	c := &cobra.Command{
		Use:   "conformance --url URL --role prefill|decode|colo",
		Short: "check a live worker against the KVC worker contract, rule by rule",
		Long: `Run the KVC worker contract (docs/worker-protocol.md) against the worker at
--url and print each rule as pass, fail or not-offered, with the reason. The
stock rules are what every SGLang worker of the role does and the gateway
relies on (health, /server_info's role and page size, 404 for a path it does
not serve, a raw /generate refused 400 on a prefill or decode worker, a
colocated worker's answer); the extension rules (the admission RPC, direct
appends, lookup, the D→P snapshot RPCs) apply where the worker offers them,
learnt as the gateway learns it: kvc_protocol in /server_info, or the path
answering anything but 404. Upstream SGLang's conditional aggregation
(do_local_prefill) is checked on a decoder that reports it.

The checks send a few short requests under session ids of their own. Exit
status 0 when no rule fails, 1 when one does.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&u, "url", "", "the worker's base `URL`, e.g. http://127.0.0.1:30000 (required)")
	fs.StringVar(&role, "role", "", "the worker's `role`: prefill, decode or colo (required)")
	fs.Float64Var(&timeout, "timeout", 30, "bound on each HTTP call, in `seconds`, in (0, 3600]")
	fs.BoolVar(&asJSON, "json", false, "print the results as one JSON array instead of a table")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		if u == "" {
			ck.fail("--url is required: the worker's base URL, e.g. http://127.0.0.1:30000")
		} else if p, err := url.ParseRequestURI(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			ck.fail("--url %q: want an http:// or https:// base URL", u)
		}
		if role == "" {
			ck.fail("--role is required: prefill, decode or colo")
		}
		ck.oneOf("role", conformance.RolePrefill, conformance.RoleDecode, conformance.RoleColo)
		ck.num("timeout", above(0).upTo(3600).is("seconds"))
		if err := ck.err(); err != nil {
			return err
		}
		rs, err := conformance.Run(ctx, u, role, conformance.Options{Timeout: time.Duration(timeout * float64(time.Second))})
		if err != nil {
			return err
		}
		if asJSON {
			b, _ := json.MarshalIndent(rs, "", "  ")
			fmt.Fprintln(e.stdout, string(b))
		} else {
			fmt.Fprint(e.stdout, conformance.String(rs))
		}
		failed := 0
		for _, r := range rs {
			if r.Status == conformance.Fail {
				failed++
			}
		}
		if failed > 0 {
			return errShown{fmt.Sprintf("%d of %d rules failed", failed, len(rs))}
		}
		return nil
	})
	return c
}
