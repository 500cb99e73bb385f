package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/gateway"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// upCmd starts a whole live stack in one process: emulated workers and the
// gateway in front of them, all on loopback.
func upCmd(e *env) *cobra.Command {
	var (
		mech, hardware    string
		prefill, decode   int
		colo, port        int
		timeScale         float64
		tauAppend, blockS int
		sHeader, sField   string
	)
	c := &cobra.Command{
		Use:   "up [flags]",
		Short: "a whole live stack on loopback: emulated workers and the gateway in front of them",
		Long: `Start emulated SGLang workers ('pdhybrid worker') and the gateway ('pdhybrid
serve') in front of them, in this one process, on loopback: --prefill P and
--decode D for kvcache-centric (KVC decoders keep sessions) or
pd-disaggregation, --colo N for pd-colo. The gateway listens on --port; the
workers on free ports. Prints the gateway's URL and each worker's, then serves
until SIGINT or SIGTERM. Point a client (SGLang /generate, or an OpenAI SDK at
URL/v1, an Anthropic SDK at URL) at the gateway; --time-scale runs the model
faster than real time. Sessions are resolved as 'pdhybrid serve --help' says.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&mech, "mechanism", "kvcache-centric", "`mechanism`: kvcache-centric, pd-disaggregation or pd-colo")
	fs.IntVar(&prefill, "prefill", 1, "prefill `workers` (kvcache-centric, pd-disaggregation)")
	fs.IntVar(&decode, "decode", 3, "decode `workers` (kvcache-centric, pd-disaggregation)")
	fs.IntVar(&colo, "colo", 4, "colocated `workers` (pd-colo)")
	fs.IntVar(&port, "port", 8000, "the gateway's TCP `port`; 0 = a free one")
	fs.StringVar(&hardware, "hardware", "h200-141g", "built-in hardware `name` of every worker (h100-80g, h200-141g)")
	fs.Float64Var(&timeScale, "time-scale", 1, "model seconds per wall second, a `factor` in [0.001, 1000]")
	fs.IntVar(&tauAppend, "direct-max-uncached-tokens", 8192, "kvcache-centric: τ_append in `tokens`")
	fs.IntVar(&blockS, "block-size", emulator.DefaultBlockSize, "prefix-block size in `tokens` for workers and gateway")
	addSessionFlags(fs, &sHeader, &sField)
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.oneOf("mechanism", "kvcache-centric", "pd-disaggregation", "pd-colo")
		ck.num("prefill", between(1, 64).is("a number of workers"))
		ck.num("decode", between(1, 64).is("a number of workers"))
		ck.num("colo", between(1, 64).is("a number of workers"))
		ck.num("port", between(1, 65535).is("a TCP port").orZero("a free one"))
		ck.num("time-scale", timeScaleRange)
		ck.num("direct-max-uncached-tokens", between(1, 1<<22).is("a number of tokens"))
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		pd := mech != "pd-colo"
		ck.only("prefill", pd, "to mechanisms with prefill workers")
		ck.only("decode", pd, "to mechanisms with decode workers")
		ck.only("colo", !pd, "to --mechanism pd-colo")
		ck.only("direct-max-uncached-tokens", mech == "kvcache-centric", "to --mechanism kvcache-centric")
		checkSessionFlags(ck, sHeader, sField)
		if err := ck.err(); err != nil {
			return err
		}
		prof, err := model.Builtin("qwen3-30b-a3b", hardware)
		if err != nil {
			return usagef("--hardware %s: %v", hardware, err)
		}
		var servers []*emulator.Server
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, s := range servers {
				if s.Shutdown(sctx) != nil {
					s.Kill()
				}
			}
		}()
		start := func(role engine.Role, session bool) (*emulator.Server, error) {
			cfg := emulator.Config{Role: role, Profile: prof, TimeScale: timeScale, BlockSize: blockS}
			if session {
				cfg.Session = engine.SessionConfig{Enabled: true}
			}
			s, err := emulator.New(cfg)
			if err != nil {
				return nil, err
			}
			if err := s.Start("127.0.0.1:0", "127.0.0.1:0"); err != nil {
				return nil, err
			}
			servers = append(servers, s)
			return s, nil
		}
		gcfg := gateway.Config{BlockSize: blockS, Dispatch: kvc.DispatchConfig{Mechanism: kvc.Mechanism(mech), Policy: kvc.PolicyKVAware,
			Options: kvc.Options{Alpha: 1}, TauReject: 3, TauAppend: tauAppend, MaxRetries: -1, SeedMinTurn: 1,
			Gate: kvc.GateWorker, Reset: kvc.ResetDirect, Belief: kvc.BeliefTrack}, SessionHeader: sHeader, SessionField: sField}
		if !pd {
			for range colo {
				s, err := start(engine.RoleColocated, false)
				if err != nil {
					return err
				}
				gcfg.Colo = append(gcfg.Colo, s.URL())
				fmt.Fprintf(e.stdout, "worker url=%s role=colo\n", s.URL())
			}
		} else {
			for range prefill {
				s, err := start(engine.RolePrefill, false)
				if err != nil {
					return err
				}
				gcfg.Prefill = append(gcfg.Prefill, gateway.Prefill{URL: s.URL(), BootstrapPort: s.BootstrapPort()})
				fmt.Fprintf(e.stdout, "worker url=%s role=prefill bootstrap_port=%d\n", s.URL(), s.BootstrapPort())
			}
			for range decode {
				s, err := start(engine.RoleDecode, mech == "kvcache-centric")
				if err != nil {
					return err
				}
				gcfg.Decode = append(gcfg.Decode, s.URL())
				fmt.Fprintf(e.stdout, "worker url=%s role=decode\n", s.URL())
			}
		}
		gw, err := gateway.New(gcfg)
		if err != nil {
			return err
		}
		return serveGateway(ctx, e, gw.Handler(), "127.0.0.1", port, mech)
	})
	return c
}
