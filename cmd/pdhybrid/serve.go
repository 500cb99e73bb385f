package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

func serveCmd(e *env) *cobra.Command {
	var (
		host, mech, policy, gate, reset, belief string
		dToP                                    string
		dToPDelta                               int
		sessionHeader, sessionField             string
		prefill, decode, colo                   []string
		port, blockSize, tauAppend, tauReject   int
		attempts                                int
		noProbe, backpressure, homeHolds        bool
		maxPauseMs, rejectWindow, floorK        float64
		config, tokenizerFile                   string
		drainS                                  float64
		ops                                     opsFlags
		disc                                    discoverFlags
	)
	c := &cobra.Command{
		Use:   "serve [flags]",
		Short: "the gateway: SGLang's /generate in front of prefill, decode or colocated workers, routed by the control plane",
		Long: `Serve the gateway: SGLang's native /generate (JSON or SSE) in front of SGLang
workers — real ones, or 'pdhybrid worker' emulations — routed by the same
control-plane dispatcher the simulator runs. --mechanism kvcache-centric asks
the decoders for admission (/session_cache/admit_direct_append; a worker
without it gets the router's own estimate), sends follow-up turns of a
resident session straight to its decoder, and seeds or falls back to plain PD
through the prefill workers over SGLang's PD protocol (the same body to both
legs with a fresh bootstrap room and one rid; the other leg aborted when one
fails). Each answer carries X-PDHybrid-Mode (the execution mode) and
X-PDHybrid-Worker. Besides /generate it serves OpenAI's /v1/completions and
/v1/chat/completions and Anthropic's /v1/messages (and count_tokens).

` + sessionOrderHelp + `

Prints one line when it listens ("listening url=...") and serves until SIGINT
or SIGTERM, then drains and exits 0: /health (readiness) answers 503 at once,
/livez (liveness) stays 200, new requests are answered 503 with Retry-After
(a proxy retries them on another replica; docs/deploy.md), and requests in
flight, streams too, get --drain-timeout to finish before they are cut.
docs/gateway.md says what is built.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&mech, "mechanism", "kvcache-centric", "`mechanism`: kvcache-centric, pd-disaggregation, pd-colo, or a peer baseline with its own defaults (pd-conditional, pd-prefix-decider, pd-decode-radix, and the 2026 rivals pd-ppd, "+ppdSrc+", and pd-deflect, "+deflectSrc+", priced by the workers' profile as in the simulator; docs/peer-baselines.md), whose local prefills go to decoders with conditional aggregation and the decode radix cache as do_local_prefill")
	fs.StringSliceVar(&prefill, "prefill", nil, "prefill worker `URL@BOOTSTRAP_PORT` (repeat or comma-separate; the port is SGLang's --disaggregation-bootstrap-port, default 8998)")
	fs.StringSliceVar(&decode, "decode", nil, "decode worker `URL` (repeat or comma-separate)")
	fs.StringSliceVar(&colo, "colo", nil, "colocated worker `URL`, for pd-colo (repeat or comma-separate)")
	fs.StringVar(&host, "host", "127.0.0.1", "`address` to listen on")
	fs.IntVar(&port, "port", 8000, "`port` to listen on; 0 = a free one")
	fs.StringVar(&policy, "policy", "kv-aware", "decoder routing `policy`: default (round-robin), sticky, kv-aware, cache-aware (SGLang router's)")
	fs.IntVar(&blockSize, "block-size", 64, "`tokens` per prefix block the router hashes prompts into")
	fs.Float64Var(&floorK, "floor-k", 0, "kv-aware policy only: load-floor bonus in `blocks` for under-assigned decoders (the seed's --kvcache-load-floor-bonus, 200 in its E3/E4 runs); 0 = off, as in the seed's defaults, which send new sessions sharing a system prompt all to one decoder (docs/kvc.md)")
	fs.StringVar(&tokenizerFile, "tokenizer", "", "the model's Hugging Face tokenizer.json `file`: text prompts are tokenized with it and sent as input_ids, so the router hashes what the workers cache (default: none, a 4-bytes-a-token estimate, reported as such by count_tokens)")
	fs.IntVar(&tauAppend, "direct-max-uncached-tokens", 8192, "kvcache-centric: τ_append, the largest direct append in `tokens`")
	fs.IntVar(&tauReject, "migration-reject-threshold", 3, "kvcache-centric: τ_reject, admission `rejects` before a decoder is skipped for a session; 0 = never")
	fs.IntVar(&attempts, "kvc-max-attempts", 0, "kvcache-centric: admission `attempts` before plain PD; 0 = one per decoder")
	fs.StringVar(&gate, "admission-gate", "worker", "kvcache-centric: who checks τ_append: `worker` (the decoder's admission RPC) or router")
	fs.StringVar(&reset, "reject-reset", "direct", "kvcache-centric: when reject counts return to 0: `direct`, any, off")
	fs.Float64Var(&rejectWindow, "reject-window", 0, "kvcache-centric: only a session's refusals by a decoder in the last this many `seconds`, in [0, 86400], count toward --migration-reject-threshold (P8's sliding window); 0 = every refusal since the last reset (default 0)")
	fs.StringVar(&belief, "residency-belief", "track", "kvcache-centric: the router's residency belief: `track` or never-shrink")
	fs.BoolVar(&homeHolds, "home-holds", false, "kvcache-centric: a turn its session's decoder refuses (before τ_reject) goes plain PD at once and the session stays pinned there, instead of the retry chain seeding the next decoder")
	fs.BoolVar(&backpressure, "backpressure", true, "kvcache-centric: honour a decoder's recommended_pause_ms: after a refusal that carries one, wait that long, at most --backpressure-max-pause-ms, before the next decoder or the fallback (labelled -d-backpressure); --backpressure=false ignores it (the seed's --enable-backpressure, off by default there)")
	fs.Float64Var(&maxPauseMs, "backpressure-max-pause-ms", 1000*kvc.DefaultMaxPauseS, "kvcache-centric, with --backpressure: the cap on a decoder's recommended pause, in `milliseconds` ≥ 0 (the seed's --backpressure-max-pause-s 2.0); 0 = never wait")
	fs.StringVar(&dToP, "d-to-p-sync", "off", dToPModeHelp+dToPPassiveHelp+", "+dToPActiveHelp+"; the snapshot buffer is the prefill workers' (worker --snapshot-buf; docs/gateway.md)")
	fs.IntVar(&dToPDelta, "d-to-p-delta-tokens", dToPDeltaDefault, dToPDeltaHelp)
	var v3 kvcV3Flags
	v3.registerLive(fs)
	var cost serveCostFlags
	cost.register(fs)
	var rival rivalFlags
	rival.register(fs)
	var slide slideFlags
	slide.register(fs)
	var kvEvents bool
	fs.BoolVar(&kvEvents, "kv-events", false, "kvcache-centric: read every decoder's KV event stream (GET /kvc/kv_events, which worker --kv-events publishes; docs/worker-protocol.md) into the residency belief, as the simulator's router hears its decoders' evictions and demotions; off by default: the belief learns them from admission replies only")
	fs.BoolVar(&noProbe, "no-residency-probe", false, "kvcache-centric: do not ask the decoders which holds a session this gateway has not routed (needed for replicas behind one load balancer; docs/gateway.md)")
	ops.register(fs)
	disc.register(fs)
	fs.Float64Var(&drainS, "drain-timeout", 30, "on SIGINT or SIGTERM, `seconds` requests in flight (streams included) get to finish before they are cut")
	addSessionFlags(fs, &sessionHeader, &sessionField)
	fs.StringVar(&config, "config", "", "YAML `file` of flag settings: keys are these flags' names, values scalars or lists (prefill, decode, colo); the command line wins over it (docs/gateway.md)")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		if config != "" {
			if err := applyConfigFile(c, config); err != nil {
				return err
			}
		}
		ck := newChecks(c)
		ck.oneOf("mechanism", "kvcache-centric", "pd-disaggregation", "pd-colo", "pd-conditional", "pd-prefix-decider", "pd-decode-radix", "pd-ppd", "pd-deflect")
		ck.oneOf("policy", "default", "sticky", "kv-aware", "cache-aware")
		ck.num("port", between(0, 65535).is("a TCP port").orZero("a free one"))
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		ck.num("floor-k", between(0, 1e9).is("a bonus in blocks").orZero("off"))
		ck.only("floor-k", policy == "kv-aware", "with --policy kv-aware")
		ck.num("direct-max-uncached-tokens", between(1, 1<<22).is("a number of tokens"))
		ck.num("migration-reject-threshold", between(0, 1e6).is("a number of rejects"))
		ck.num("kvc-max-attempts", between(1, 1024).is("a number of attempts").orZero("one per decoder"))
		ck.oneOf("admission-gate", "worker", "router")
		ck.oneOf("reject-reset", "direct", "any", "off")
		ck.num("reject-window", between(0, 86400).is("seconds"))
		ck.oneOf("residency-belief", "track", "never-shrink")
		ck.num("backpressure-max-pause-ms", between(0, 3.6e6).is("a number of milliseconds").orZero("never wait"))
		ck.only("backpressure-max-pause-ms", backpressure, "with --backpressure")
		ck.oneOf("d-to-p-sync", "off", "passive", "active")
		ck.num("d-to-p-delta-tokens", between(1, 1<<30).is("a number of tokens"))
		ck.only("d-to-p-delta-tokens", dToP == "active", "with --d-to-p-sync active")
		ops.check(ck)
		slide.check(ck, ops.modelConfig)
		disc.check(ck, mech)
		ck.num("drain-timeout", between(0, 86400).is("a number of seconds"))
		kvcOnly := mech == "kvcache-centric"
		for _, n := range append([]string{"direct-max-uncached-tokens", "migration-reject-threshold", "kvc-max-attempts", "admission-gate", "reject-reset", "reject-window", "residency-belief", "no-residency-probe", "kv-events", "home-holds",
			"backpressure", "backpressure-max-pause-ms", "d-to-p-sync", "d-to-p-delta-tokens"}, kvcV3FlagNames...) {
			ck.only(n, kvcOnly, "to --mechanism kvcache-centric")
		}
		isRival := kvc.Mechanism(mech).IsRival()
		for _, n := range serveCostFlagNames {
			ck.only(n, kvcOnly || isRival, "to --mechanism kvcache-centric, pd-ppd or pd-deflect")
		}
		rival.check(ck, isRival, mech == "pd-ppd")
		v3.check(ck)
		v3.checkV4(ck)
		cost.check(ck)
		ck.only("prefill", mech != "pd-colo", "to mechanisms with prefill workers")
		ck.only("decode", mech != "pd-colo", "to mechanisms with decode workers")
		ck.only("colo", mech == "pd-colo", "to --mechanism pd-colo")
		checkSessionFlags(ck, sessionHeader, sessionField)
		if err := ck.err(); err != nil {
			return err
		}
		cfg := gateway.Config{BlockSize: blockSize, Decode: decode, Colo: colo, NoResidencyProbe: noProbe, KVEvents: kvEvents,
			SessionHeader: sessionHeader, SessionField: sessionField}
		if tokenizerFile != "" {
			tk, err := gateway.LoadTokenizer(tokenizerFile)
			if err != nil {
				return usagef("--tokenizer: %v", err)
			}
			cfg.Tokenizer = tk
		}
		ctxTokens, err := ops.servedContext()
		if err != nil {
			return err
		}
		ops.apply(&cfg, e)
		cfg.ContextTokens = ctxTokens
		for _, p := range prefill {
			u, bp, err := parsePrefill(p)
			if err != nil {
				return usagef("--prefill %s: %v", p, err)
			}
			cfg.Prefill = append(cfg.Prefill, gateway.Prefill{URL: u, BootstrapPort: bp})
		}
		g, _ := kvc.ParseGate(gate)
		r, _ := kvc.ParseReset(reset)
		b, _ := kvc.ParseBelief(belief)
		cfg.Dispatch = kvc.DispatchConfig{Mechanism: kvc.Mechanism(mech), Policy: kvc.Policy(policy), Options: kvc.Options{Alpha: 1, FloorK: floorK},
			TauReject: tauReject, TauAppend: tauAppend, MaxRetries: attempts - 1, SeedMinTurn: 1, Gate: g, Reset: r, RejectWindowS: rejectWindow, Belief: b,
			NoBackpressure: !backpressure, MaxPauseS: maxPauseMs / 1000, HomeHolds: homeHolds}
		if maxPauseMs == 0 {
			cfg.Dispatch.MaxPauseS = -1 // kvc: a cap of 0
		}
		if err := slide.view(&cfg.Dispatch.Options, ops.modelConfig, blockSize); err != nil {
			return err
		}
		if isRival {
			sc, _, err := cost.costs()
			if err != nil {
				return err
			}
			cfg.Dispatch.Peer.Rival = kvc.RivalConfig{TTFTSLOS: rival.ttftSLO / 1000, TPOTSLOS: rival.tpotSLO / 1000,
				TTFTWeight: rival.ttftWeight, TPOTWeight: rival.tpotWeight, Cost: sc}
		}
		if kvcOnly {
			sc, tc, err := cost.costs()
			if err != nil {
				return err
			}
			cfg.Dispatch.V3 = v3.live(sc, tc)
			cfg.DToP = gateway.DToPConfig{Mode: dToP, DeltaTokens: dToPDelta}
		}
		var found []gateway.Discovered
		if len(disc.targets) > 0 {
			var err error
			if found, err = disc.initial(ctx, e, &cfg, mech); err != nil {
				return err
			}
			found = addTo(&cfg, found)
		}
		gw, err := gateway.New(cfg)
		if err != nil {
			return usagef("%v", err)
		}
		if len(disc.targets) > 0 {
			gw.Adopt(found)
			go gw.DiscoverWorkers(ctx, disc.resolver(), disc.targets, disc.interval())
		}
		return serveGateway(ctx, e, gw, host, port, mech, time.Duration(drainS*float64(time.Second)))
	})
	return c
}

// parsePrefill splits "URL@PORT" (the bootstrap port defaults to SGLang's
// 8998).
func parsePrefill(s string) (string, int, error) {
	u, port := s, 8998
	if i := strings.LastIndex(s, "@"); i >= 0 {
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("bootstrap port %q, want a TCP port in [1, 65535]", s[i+1:])
		}
		u, port = s[:i], n
	}
	return strings.TrimRight(u, "/"), port, nil
}

// serveGateway serves the gateway on host:port until ctx ends, printing
// its "listening" line, then drains streams for up to drain.
func serveGateway(ctx context.Context, e *env, gw *gateway.Server, host string, port int, mech string, drain time.Duration) error {
	defer gw.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	// What each worker offers, and the KVC path its decoders allow
	// (gateway/capabilities.go); learnt again on every health round.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	gw.Discover(dctx)
	cancel()
	for _, w := range gw.Capabilities() {
		line := fmt.Sprintf("worker url=%s role=%s %s", w.URL, w.Role, w.Capabilities.Summary(w.Role))
		if w.KVCPath != "" {
			line += " kvc_path=" + w.KVCPath
		}
		if w.Capabilities.Error != "" {
			line += fmt.Sprintf(" discovery_error=%q", w.Capabilities.Error)
		}
		fmt.Fprintln(e.stderr, line)
	}
	fmt.Fprintf(e.stdout, "listening url=http://%s mechanism=%s\n", ln.Addr(), mech)
	err = gw.Serve(ctx, ln, drain)
	var cut *gateway.DrainCutError
	if errors.As(err, &cut) {
		// A planned stop all the same (a rolling update's): exit 0.
		fmt.Fprintf(e.stderr, "serve: %v\n", err)
		return nil
	}
	if err == nil {
		fmt.Fprintln(e.stderr, "serve: drained")
	}
	return err
}
