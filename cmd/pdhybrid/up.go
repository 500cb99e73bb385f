package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/front"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// upFlags are up's own flags; the replay's are replayFlags.
type upFlags struct {
	mech, hardware, frontPolicy string
	kvcPreset                   string
	prefill, decode, colo       int
	gateways, port, workerBase  int
	timeScale                   float64
	tauAppend, blockSize        int
	noProbe, storeShared        bool
	storeURL                    string // the shared storage pool's service, once started
	kvEvents                    bool
	storeGBps                   float64 // the shared pool's aggregate bandwidth; 0 unlimited
	workerArgs, gatewayArgs     []string
	sessionHeader, sessionField string
	rival                       rivalFlags
}

// upCmd starts a whole live stack as child processes on loopback —
// emulated workers, one or more gateways, a front when there are several —
// and, given a trace, replays it through them and stops everything.
func upCmd(e *env) *cobra.Command {
	var (
		f upFlags
		r replayFlags
	)
	c := &cobra.Command{
		Use:   "up [flags]",
		Short: "a whole live stack on loopback: emulated workers and gateways as child processes, a trace replayed through them",
		Long: `Start emulated SGLang workers ('pdhybrid worker') and gateways ('pdhybrid
serve') as child processes on loopback: --prefill P and --decode D for
kvcache-centric (KVC decoders keep sessions), pd-disaggregation or the 2026
rivals pd-ppd and pd-deflect (decoders with conditional aggregation and the
decode radix cache, which their local prefills need; pd-deflect's also slice
their prefills to --rival-tpot-slo-ms, its TBT SLO), --colo N for pd-colo.
With --gateways N > 1 the gateways are replicas that share no state, behind a
front (round-robin, or session-hash) on --port; with one, the gateway itself
listens on --port. Workers take free ports, or consecutive ones from
--worker-port-base. A port already taken is a clear error before anything
starts.

Without --trace, prints the entry URL ("listening url=...") and each child's,
and serves until SIGINT or SIGTERM. With --trace, replays it through the stack
as 'pdhybrid replay' does (--out, --max-concurrency, --request-timeout,
--goodput as there; the workers' --time-scale is the replay's), writes the run
files, then stops. A child that dies is logged and started again on its own
ports after a backoff (500 ms, doubling while restarts fail, at most 10 s);
meanwhile the stack keeps serving (the gateways route around a dead worker,
the front passes over a dead replica). up ends only on SIGINT or SIGTERM, at
the end of --trace, or when a child cannot start at all. Every child is
stopped on exit, Ctrl-C included; on Linux the kernel kills them if up itself
is killed. Children's logs go to stderr, each line prefixed with its name.

Point a client at the entry URL: SGLang /generate, an OpenAI SDK at URL/v1, an
Anthropic SDK at URL. Sessions are resolved as 'pdhybrid serve --help' says.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.mech, "mechanism", "kvcache-centric", "`mechanism`: kvcache-centric, pd-disaggregation, pd-colo, or the 2026 rivals pd-ppd ("+ppdSrc+") and pd-deflect ("+deflectSrc+"), the gateways priced by the workers' --hardware profile (docs/peer-baselines.md)")
	fs.IntVar(&f.prefill, "prefill", 1, "prefill `workers` (kvcache-centric, pd-disaggregation)")
	fs.IntVar(&f.decode, "decode", 3, "decode `workers` (kvcache-centric, pd-disaggregation)")
	fs.IntVar(&f.colo, "colo", 4, "colocated `workers` (pd-colo)")
	fs.IntVar(&f.gateways, "gateways", 1, "gateway `replicas`; more than one puts a front before them")
	fs.StringVar(&f.frontPolicy, "front", "round-robin", "with --gateways > 1: the front's `policy`: round-robin (any replica, any turn) or session-hash (a session's turns to one replica)")
	fs.IntVar(&f.port, "port", 8000, "the entry point's TCP `port` (the gateway, or the front); 0 = a free one")
	fs.IntVar(&f.workerBase, "worker-port-base", 0, "workers listen on consecutive TCP `ports` from this one (prefill bootstrap servers after them); 0 = free ports")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "built-in hardware `name` of every worker (h100-80g, h200-141g)")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "model seconds per wall second, a `factor` in [0.001, 1000]; the replay runs its trace as fast")
	fs.IntVar(&f.tauAppend, "direct-max-uncached-tokens", 8192, "kvcache-centric: τ_append in `tokens`")
	fs.StringVar(&f.kvcPreset, "kvc-preset", "v3", "kvcache-centric: `preset` of the gateways' KVC options: v3 (the default), v4 or v2 (the seed's, all v3 options off) (docs/kvc-v3.md; v3 also starts the prefill workers with --serve-whole, which its P hosting needs, and both with --prefill-order shortest --prefill-max-wait 30, the decode workers also with --prefill-bypass-tokens 512; v4 is v3 with both kinds of worker started with --tpot-slo-ms 12, KVC v4's decode slicing, the prefill workers also with --prefill-bypass-tokens 2048 --prefill-bypass-ahead, and the gateways run v4's stall budget priced by the workers' profile, docs/kvc-v4.md)")
	f.rival.register(fs)
	fs.IntVar(&f.blockSize, "block-size", emulator.DefaultBlockSize, "prefix-block size in `tokens` for workers and gateways")
	fs.StringArrayVar(&f.workerArgs, "worker-arg", nil, "a `flag` passed to every 'pdhybrid worker' (repeat); ROLE:FLAG (prefill, decode, colo) passes it to that role only, e.g. --worker-arg=decode:--eviction=block --worker-arg=--max-running=64")
	fs.StringArrayVar(&f.gatewayArgs, "gateway-arg", nil, "a `flag` passed to every 'pdhybrid serve' (repeat), e.g. --gateway-arg=--migration-reject-threshold=1")
	addSessionFlags(fs, &f.sessionHeader, &f.sessionField)
	fs.BoolVar(&f.storeShared, "hicache-storage-shared", false, "one storage pool for every worker given a storage tier (--worker-arg=--enable-hierarchical-cache --worker-arg=--hicache-storage-backend=mooncake, for every role or ROLE:), as SGLang's L3 is one store for the cluster: up serves the pool's index on loopback and passes its URL to those workers (--hicache-storage-shared-url), each reading it over its own link (docs/engine.md)")
	fs.Float64Var(&f.storeGBps, "hicache-storage-shared-bandwidth", 0, "with --hicache-storage-shared: the shared pool's aggregate bandwidth in `GB/s` (10^9 bytes per model second), which every worker's prefetches share, first booked first served at the pool's service, each also limited by its own link, as in the simulator (docs/engine.md); 0 = unlimited")
	fs.BoolVar(&f.kvEvents, "kv-events", false, "kvcache-centric: the decoders publish their session evictions (worker --kv-events) and the gateways read them into their residency belief (serve --kv-events; docs/worker-protocol.md, \"KV events\"); off by default: the belief learns evictions from admission replies only")
	fs.BoolVar(&f.noProbe, "no-residency-probe", false, "kvcache-centric: gateways do not ask the decoders where a session they have not routed lives")
	fs.StringVar(&r.trace, "trace", "", "canonical trace `file` to replay through the stack, then stop (default: serve until interrupted)")
	fs.StringVar(&r.out, "out", "", "with --trace: run `folder` for metrics.jsonl and summary.json")
	fs.BoolVar(&r.force, "force", false, "with --out: replace the run files a previous run left there")
	fs.IntVar(&r.concurrency, "max-concurrency", 0, "with --trace: `requests` in flight at most; 0 = no limit")
	fs.Float64Var(&r.timeout, "request-timeout", 600, "with --trace: per-request timeout in wall-clock `seconds`; 0 = none")
	fs.StringVar(&r.goodput, "goodput", defaultGoodput, "with --trace: goodput `SLOs` in milliseconds (trace time), as for pdhybrid sim")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.oneOf("mechanism", "kvcache-centric", "pd-disaggregation", "pd-colo", "pd-ppd", "pd-deflect")
		ck.oneOf("front", "round-robin", "session-hash")
		ck.num("prefill", between(1, 64).is("a number of workers"))
		ck.num("decode", between(1, 64).is("a number of workers"))
		ck.num("colo", between(1, 64).is("a number of workers"))
		ck.num("gateways", between(1, 32).is("a number of replicas"))
		ck.num("port", between(1, 65535).is("a TCP port").orZero("a free one"))
		ck.num("worker-port-base", between(1, 65000).is("a TCP port").orZero("free ports"))
		ck.num("time-scale", timeScaleRange)
		ck.num("direct-max-uncached-tokens", between(1, 1<<22).is("a number of tokens"))
		ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
		ck.num("max-concurrency", between(0, 1e6).orZero("no limit").is("a number of requests"))
		ck.num("request-timeout", between(0, 86400).orZero("none").is("a number of seconds"))
		pd := f.mech != "pd-colo"
		ck.only("prefill", pd, "to mechanisms with prefill workers")
		ck.only("decode", pd, "to mechanisms with decode workers")
		ck.only("colo", !pd, "to --mechanism pd-colo")
		ck.only("direct-max-uncached-tokens", f.mech == "kvcache-centric", "to --mechanism kvcache-centric")
		ck.only("no-residency-probe", f.mech == "kvcache-centric", "to --mechanism kvcache-centric")
		ck.only("kv-events", f.mech == "kvcache-centric", "to --mechanism kvcache-centric")
		ck.num("hicache-storage-shared-bandwidth", sharedBWRange)
		ck.only("hicache-storage-shared-bandwidth", f.storeShared, "with --hicache-storage-shared")
		ck.oneOf("kvc-preset", "v2", "v3", "v4")
		ck.only("kvc-preset", f.mech == "kvcache-centric", "to --mechanism kvcache-centric")
		f.rival.check(ck, kvc.Mechanism(f.mech).IsRival(), f.mech == "pd-ppd")
		ck.only("front", f.gateways > 1, "to --gateways > 1")
		for _, n := range []string{"out", "force", "max-concurrency", "request-timeout", "goodput"} {
			ck.only(n, r.trace != "", "with --trace")
		}
		checkSessionFlags(ck, f.sessionHeader, f.sessionField)
		if err := ck.err(); err != nil {
			return err
		}
		for _, a := range f.workerArgs {
			if r, _, ok := strings.Cut(a, ":"); ok && !strings.HasPrefix(a, "-") && r != "prefill" && r != "decode" && r != "colo" {
				return usagef("--worker-arg %s: want FLAG or ROLE:FLAG with ROLE prefill, decode or colo", a)
			}
		}
		return runUp(ctx, e, &f, &r)
	})
	return c
}

func runUp(ctx context.Context, e *env, f *upFlags, r *replayFlags) error {
	var replayIn *replayInput
	if r.trace != "" {
		in, err := loadReplay(e, r)
		if err != nil {
			return err
		}
		replayIn = in
	}
	if err := portsFree(f); err != nil {
		return err
	}
	if f.storeShared {
		stop, err := startStore(e, f)
		if err != nil {
			return err
		}
		defer stop()
	}
	cs := &children{e: e}
	defer cs.stop(10 * time.Second)
	entry, stopFront, err := startStack(ctx, e, cs, f)
	if err != nil {
		return err
	}
	defer stopFront()
	fmt.Fprintf(e.stdout, "listening url=%s mechanism=%s gateways=%d\n", entry, f.mech, f.gateways)
	cs.supervise(ctx) // a child that dies is restarted; up ends on SIGINT or SIGTERM
	if replayIn == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	r.url, r.timeScale = entry, f.timeScale
	return runReplay(ctx, e, r, replayIn.hdr, replayIn.reqs, replayIn.slo)
}

// startStack starts workers, then gateways, then (several gateways) the
// front, and returns the entry URL and a function that stops the front.
func startStack(ctx context.Context, e *env, cs *children, f *upFlags) (string, func(), error) {
	nothing := func() {}
	port := func(i int) string {
		if f.workerBase == 0 {
			return "0"
		}
		return strconv.Itoa(f.workerBase + i)
	}
	base := []string{"--hardware", f.hardware, "--time-scale", fmtFloat(f.timeScale), "--block-size", strconv.Itoa(f.blockSize)}
	common := roleArgs(base, f.workerArgs, "colo")
	var pool []string // the gateway's worker flags
	n := 0
	if f.mech == "pd-colo" {
		for i := range f.colo {
			w, err := cs.start(ctx, fmt.Sprintf("colo-%d", i), f.withStore(append([]string{"worker", "--role", "colo", "--port", port(n)}, common...))...)
			if err != nil {
				return "", nothing, err
			}
			n++
			fmt.Fprintf(e.stdout, "worker url=%s role=colo pid=%d\n", w.url, w.cmd.Process.Pid)
			pool = append(pool, "--colo", w.url)
		}
	} else {
		for i := range f.prefill {
			boot := "0"
			if f.workerBase != 0 {
				boot = strconv.Itoa(f.workerBase + f.prefill + f.decode + i)
			}
			args := append([]string{"worker", "--role", "prefill", "--port", port(n), "--bootstrap-port", boot}, f.sliceArgs("prefill")...)
			args = append(args, roleArgs(base, f.workerArgs, "prefill")...)
			if f.mech == "kvcache-centric" {
				args = append(args, "--snapshot-sync") // the KVC extension's D→P snapshot RPCs
			}
			if f.mech == "kvcache-centric" && f.v3Workers() {
				args = append(args, "--serve-whole", "--prefill-order", v3Order, "--prefill-max-wait", strconv.Itoa(v3MaxWait))
			}
			if f.mech == "kvcache-centric" && f.kvcPreset == "v4" {
				args = append(args, "--prefill-bypass-tokens", strconv.Itoa(v4PBypass), "--prefill-bypass-ahead")
			}
			w, err := cs.start(ctx, fmt.Sprintf("prefill-%d", i), f.withStore(args)...)
			if err != nil {
				return "", nothing, err
			}
			n++
			fmt.Fprintf(e.stdout, "worker url=%s role=prefill bootstrap_port=%d pid=%d\n", w.url, w.bootPort, w.cmd.Process.Pid)
			pool = append(pool, "--prefill", fmt.Sprintf("%s@%d", w.url, w.bootPort))
		}
		for i := range f.decode {
			args := append([]string{"worker", "--role", "decode", "--port", port(n)}, f.sliceArgs("decode")...)
			if kvc.Mechanism(f.mech).IsRival() {
				// The rivals' local prefills are do_local_prefill requests,
				// which a decoder takes with conditional aggregation; PPD's
				// append reuses the turn the decode radix cache kept.
				args = append(args, "--disaggregation-decode-enable-conditional-agg", "--disaggregation-decode-enable-radix-cache")
			}
			args = append(args, roleArgs(base, f.workerArgs, "decode")...)
			if f.mech == "kvcache-centric" {
				args = append(args, "--session-cache")
				if f.kvEvents {
					args = append(args, "--kv-events")
				}
				if f.v3Workers() {
					args = append(args, "--prefill-bypass-tokens", strconv.Itoa(v3Bypass), "--prefill-order", v3Order, "--prefill-max-wait", strconv.Itoa(v3MaxWait))
				}
			}
			w, err := cs.start(ctx, fmt.Sprintf("decode-%d", i), f.withStore(args)...)
			if err != nil {
				return "", nothing, err
			}
			n++
			fmt.Fprintf(e.stdout, "worker url=%s role=decode pid=%d\n", w.url, w.cmd.Process.Pid)
			pool = append(pool, "--decode", w.url)
		}
	}
	gwArgs := f.serveArgs(pool)
	if f.gateways == 1 {
		g, err := cs.start(ctx, "gateway", append(gwArgs, "--port", strconv.Itoa(f.port))...)
		if err != nil {
			return "", nothing, err
		}
		fmt.Fprintf(e.stdout, "gateway url=%s pid=%d\n", g.url, g.cmd.Process.Pid)
		return g.url, nothing, nil
	}
	var reps []string
	for i := range f.gateways {
		g, err := cs.start(ctx, fmt.Sprintf("gateway-%d", i), append(gwArgs, "--port", "0")...)
		if err != nil {
			return "", nothing, err
		}
		fmt.Fprintf(e.stdout, "gateway url=%s pid=%d\n", g.url, g.cmd.Process.Pid)
		reps = append(reps, g.url)
	}
	fr, err := front.New(front.Policy(f.frontPolicy), reps)
	if err != nil {
		return "", nothing, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)))
	if err != nil {
		return "", nothing, portError("--port", f.port, err)
	}
	srv := &http.Server{Handler: fr, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

// startStore serves the shared storage pool's index (emulator.StoreServer)
// on a free loopback port for the workers up starts; a worker restarted
// after a crash finds the pool as it was.
func startStore(e *env, f *upFlags) (func(), error) {
	if !hasStorageArg(roleArgs(nil, f.workerArgs, "prefill")) && !hasStorageArg(roleArgs(nil, f.workerArgs, "decode")) &&
		!hasStorageArg(roleArgs(nil, f.workerArgs, "colo")) {
		return nil, usagef("--hicache-storage-shared: no worker has a storage tier; give them one with --worker-arg=--enable-hierarchical-cache --worker-arg=--hicache-storage-backend=mooncake")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("--hicache-storage-shared: %w", err)
	}
	store := emulator.NewStoreServer()
	store.BandwidthBytes = f.storeGBps * 1e9
	srv := &http.Server{Handler: store, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	f.storeURL = "http://" + ln.Addr().String()
	bw := "unlimited"
	if f.storeGBps > 0 {
		bw = strconv.FormatFloat(f.storeGBps, 'g', -1, 64) + "GB/s"
	}
	fmt.Fprintf(e.stdout, "storage url=%s shared by the workers with a storage tier bandwidth=%s\n", f.storeURL, bw)
	return func() { srv.Close() }, nil
}

// storageServeArgs give a KVC gateway the decoders' storage link, so that
// tier costing prices their storage answers: the backend and prefetch
// policy the decoders' --worker-arg flags name (the last of each wins, as
// on a command line), and a shared pool's aggregate bandwidth; none
// without a storage tier.
func (f *upFlags) storageServeArgs() []string {
	var out []string
	args := roleArgs(nil, f.workerArgs, "decode")
	for _, n := range []string{"--hicache-storage-backend", "--hicache-storage-prefetch-policy"} {
		v := ""
		for _, a := range args {
			if x, ok := strings.CutPrefix(a, n+"="); ok {
				v = x
			}
		}
		if v != "" && hasStorageArg(args) {
			out = append(out, n, v)
		}
	}
	if f.storeShared && f.storeGBps > 0 && len(out) > 0 {
		// The pool's aggregate bandwidth, so that the gateway prices the
		// time the decoders' answers say it is booked ahead.
		out = append(out, "--hicache-storage-shared-bandwidth", strconv.FormatFloat(f.storeGBps, 'g', -1, 64))
	}
	return out
}

// hasStorageArg reports whether worker flags give a storage tier.
func hasStorageArg(args []string) bool {
	for _, a := range args {
		if a == "--hicache-storage-backend" || strings.HasPrefix(a, "--hicache-storage-backend=") {
			return true
		}
	}
	return false
}

// withStore adds the shared storage pool's URL to a worker's flags when
// they give it a storage tier.
func (f *upFlags) withStore(args []string) []string {
	if f.storeURL != "" && hasStorageArg(args) {
		return append(args, "--hicache-storage-shared-url", f.storeURL)
	}
	return args
}

// serveArgs are the flags of every gateway ('pdhybrid serve') in front
// of the workers pool names: the mechanism with what it needs (KVC's
// preset, the rivals' SLOs; both the workers' --hardware for the cost
// model), then the --gateway-arg flags.
func (f *upFlags) serveArgs(pool []string) []string {
	gwArgs := append([]string{"serve", "--mechanism", f.mech, "--block-size", strconv.Itoa(f.blockSize)}, pool...)
	if f.sessionHeader != "" {
		gwArgs = append(gwArgs, "--session-header", f.sessionHeader)
	}
	if f.sessionField != "" {
		gwArgs = append(gwArgs, "--session-field", f.sessionField)
	}
	if f.mech == "kvcache-centric" {
		gwArgs = append(gwArgs, "--direct-max-uncached-tokens", strconv.Itoa(f.tauAppend), "--kvc-preset", f.kvcPreset,
			"--hardware", f.hardware) // the workers' cost model, for v4's stall budget and tier costing
		if f.noProbe {
			gwArgs = append(gwArgs, "--no-residency-probe")
		}
		if f.kvEvents {
			gwArgs = append(gwArgs, "--kv-events")
		}
		gwArgs = append(gwArgs, f.storageServeArgs()...)
	}
	if kvc.Mechanism(f.mech).IsRival() {
		gwArgs = append(gwArgs, f.rival.serveArgs(f.mech, f.hardware)...)
	}
	gwArgs = append(gwArgs, f.gatewayArgs...) // last: a --gateway-arg wins over up's own flags
	return gwArgs
}

// portsFree checks the ports given before anything starts, so a taken one
// is a clear error rather than a child failing halfway through.
func portsFree(f *upFlags) error {
	check := func(flag string, p int) error {
		if p == 0 {
			return nil
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return portError(flag, p, err)
		}
		return ln.Close()
	}
	if err := check("--port", f.port); err != nil {
		return err
	}
	if f.workerBase == 0 {
		return nil
	}
	workers := f.colo
	if f.mech != "pd-colo" {
		workers = f.prefill*2 + f.decode // prefill workers also take a bootstrap port
	}
	for i := range workers {
		if err := check("--worker-port-base", f.workerBase+i); err != nil {
			return err
		}
	}
	return nil
}

func portError(flag string, p int, err error) error {
	return usagef("%s: port %d is not free on 127.0.0.1 (%v); choose another, or 0 for a free one", flag, p, err)
}

// v3Workers says the workers take v3's scheduler options (v4's are v3's
// and more).
func (f *upFlags) v3Workers() bool { return f.kvcPreset == "v3" || f.kvcPreset == "v4" }

// sliceArgs are a role's decode-slicing flags: KVC v4's at the preset's
// TPOT on every worker that may decode (decoders, and prefill workers
// serving sessions whole), as the simulator sets it on every KVC worker;
// pd-deflect's at its TBT SLO on the decoders, where its deflected
// prefills run (the simulator's workerSliceTPOTS). They go before the
// --worker-arg flags, so that one given there wins.
func (f *upFlags) sliceArgs(role string) []string {
	switch {
	case f.mech == "kvcache-centric" && f.kvcPreset == "v4":
		return []string{"--tpot-slo-ms", strconv.Itoa(v4TPOTSLO)}
	case f.mech == "pd-deflect" && role == "decode":
		return []string{"--tpot-slo-ms", fmtFloat(f.rival.tpotSLO)}
	}
	return nil
}

// roleArgs is base plus the --worker-arg flags for role: those without a
// ROLE: prefix and those with this role's.
func roleArgs(base, extra []string, role string) []string {
	out := append([]string(nil), base...)
	for _, a := range extra {
		if r, flag, ok := strings.Cut(a, ":"); ok && !strings.HasPrefix(a, "-") {
			if r == role {
				out = append(out, flag)
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func lastLine(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
