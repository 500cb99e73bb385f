package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// workerFlags are pdhybrid worker's knobs; SGLang's names where it has one.
type workerFlags struct {
	role, host, advertise, served, link string
	port, bootPort                      int
	model, hardware, profile            string
	mc                                  modelConfigFlags // modelconfig.go
	blockSize, chunk, maxRunning        int
	memFraction, snapshotBufGiB         float64
	maxTotal                            int64
	mixed, incremental                  bool
	sessionCache, serveWhole, priority  bool
	decodeRadix, condAgg, snapshotSync  bool
	sessionCap, tailMaxWaiting, bypass  int
	bypassAhead                         bool
	trim, eviction, order               string
	lowWatermark, trimStall, trimTok    float64
	maxWait, tpotSLO                    float64
	backpressure, bpTransfers           bool
	kvEvents                            bool
	bpHighWater                         float64
	timeScale, startup                  float64
	bootTimeout, waitTimeout            float64
	beat                                float64
	beatMisses                          int
	errRate, stall, slowXfer            float64
	crashAfter                          int
	refuse                              bool
	faultSeed                           uint64
	hicache                             hicacheFlags
	storeURL                            string
}

func workerCmd(e *env) *cobra.Command {
	var f workerFlags
	c := &cobra.Command{
		Use:   "worker [flags]",
		Short: "an emulated SGLang worker (colocated, prefill or decode) timed by the engine model",
		Long: `Serve one emulated SGLang worker over HTTP: SGLang's native API (/generate,
JSON or SSE; /open_session, /close_session, /abort_request, /health,
/health_generate, /server_info, /v1/loads, /get_load, /metrics, /flush_cache),
timed by the same engine model as the simulator, in wall-clock time divided by
--time-scale. A prefill worker also runs the PD bootstrap server on
--bootstrap-port; prefill and decode workers pair up by bootstrap room as
SGLang's do, and P's KV reaches D after the modelled transfer over the
profile's --link. A decode worker with --session-cache is the KVC decoder: it
keeps sessions' KV and answers /session_cache/admit_direct_append. D→P
snapshots: a decoder with --session-cache answers /_snapshot/dump, a prefill
worker with --snapshot-sync /_snapshot/prepare_receive and
/_snapshot/finalize_ingest from a buffer of --snapshot-buf GiB, and
/_snapshot/release gives a failed dump's space back. Without an extension flag
the worker is stock SGLang: the extension's paths answer 404.
--disaggregation-decode-enable-radix-cache and
--disaggregation-decode-enable-conditional-agg (with do_local_prefill per
request) are upstream SGLang's decode-side modes.
docs/emulator.md describes the wire behaviour and what is approximated.

Prints one line when it listens ("listening url=... role=... [bootstrap_port=...]")
and serves until SIGINT or SIGTERM, then drains requests for up to 5 s.
Durations in flags are model seconds, as the engine charges them.`,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.role, "role", "colo", "worker `role`: colo (prefill and decode here), prefill or decode (SGLang --disaggregation-mode)")
	fs.StringVar(&f.host, "host", "127.0.0.1", "`address` to listen on")
	fs.IntVar(&f.port, "port", 30000, "TCP `port` for the API; 0 = a free one (printed)")
	fs.IntVar(&f.bootPort, "bootstrap-port", emulator.DefaultBootstrapPort, "prefill: TCP `port` of the PD bootstrap server (SGLang --disaggregation-bootstrap-port); 0 = a free one (printed)")
	fs.StringVar(&f.advertise, "advertise-url", "", "decode: base `url` prefill workers deliver KV to (default: http://host:port as listened)")
	fs.StringVar(&f.served, "served-model-name", "", "model `name` in metrics and info (default: the profile's model name)")
	fs.StringVar(&f.model, "model", "qwen3-30b-a3b", "built-in model `name`")
	fs.StringVar(&f.hardware, "hardware", "h200-141g", "built-in hardware `name` (h100-80g, h200-141g)")
	fs.StringVar(&f.profile, "profile", "", "model/hardware profile JSON `file`, replacing --model/--hardware (see docs/engine.md)")
	f.mc.register(fs)
	fs.StringVar(&f.link, "link", "rdma-400g", "prefill: the profile's `link` P→D KV travels over (rdma-400g, tcp-loopback, nvlink)")
	fs.IntVar(&f.blockSize, "block-size", emulator.DefaultBlockSize, "prefix-cache block size in `tokens` (SGLang --page-size): input_ids are hashed in blocks of this many")
	fs.IntVar(&f.chunk, "chunk-tokens", 0, "chunked-prefill budget per scheduler step in `tokens` (SGLang --chunked-prefill-size); 0 = the profile's")
	fs.IntVar(&f.maxRunning, "max-running", 0, "max running `requests` (SGLang --max-running-requests); 0 = the profile's")
	fs.Float64Var(&f.memFraction, "mem-fraction-static", 0, "HBM `fraction` for weights and KV, in (0, 1]; 0 = the profile's")
	fs.Int64Var(&f.maxTotal, "max-total-tokens", 0, "KV pool size in `tokens` (SGLang --max-total-tokens); 0 = from the memory fraction")
	fs.BoolVar(&f.mixed, "mixed-chunk", false, "run the decode batch inside prefill steps (SGLang --enable-mixed-chunk)")
	f.hicache.register(fs, "a worker with a prefix cache (colo, prefill, or decode with --session-cache or the decode radix cache)")
	fs.StringVar(&f.storeURL, "hicache-storage-shared-url", "", "with --hicache-storage-backend: the shared storage pool's loopback service at `URL` (http://127.0.0.1:PORT, which 'pdhybrid up --hicache-storage-shared' starts and passes): every worker given it sees one storage pool, as SGLang's L3 is one store, each reading it over its own link; the first worker to reach it sizes it (--hicache-storage-size); unset: a pool of this worker's own")
	fs.BoolVar(&f.incremental, "incremental-streaming-output", false, "stream only the new text and ids in each SSE event (SGLang --incremental-streaming-output); by default every event holds all so far")
	fs.Float64Var(&f.snapshotBufGiB, "snapshot-buf", 8, "prefill: the D→P snapshot buffer /_snapshot/prepare_receive reserves in, in `GiB` (the seed's SGLANG_SNAPSHOT_LINK_BUF_BYTES; sim's --snapshot-buf)")
	fs.BoolVar(&f.serveWhole, "serve-whole", false, "prefill: also serve a request without a bootstrap room whole (prefill and decode), as a colocated worker would: the extension KVC v3's --whole-on-p and --p-hosts-sessions need on the prefill worker (stock SGLang answers 400)")
	fs.BoolVar(&f.priority, "prefill-priority-eviction", false, "prefill: evict a KVC seed's prompt (a leg that names a session_id, which its decoder keeps) from the prefix cache before any other KV once it is done; plain-PD prompts keep LRU order (the seed's --kvcache-prefill-priority-eviction; mirrors sim's --prefill-priority-eviction; off by default)")
	fs.BoolVar(&f.decodeRadix, "disaggregation-decode-enable-radix-cache", false, "decode: SGLang's decode radix cache (PR #19746): keep what was received and generated in a prefix cache and have P send only the KV past the matched prefix (decode_prefix_len)")
	fs.BoolVar(&f.condAgg, "disaggregation-decode-enable-conditional-agg", false, "decode: SGLang's conditional aggregation (draft PR #34773): also prefill a request that carries do_local_prefill: true and no bootstrap room (without it such a request is refused 400)")
	fs.BoolVar(&f.snapshotSync, "snapshot-sync", false, "prefill: answer the KVC extension's D→P snapshot RPCs /_snapshot/prepare_receive, finalize_ingest, release (docs/worker-protocol.md; stock SGLang answers 404)")
	fs.BoolVar(&f.sessionCache, "session-cache", false, "decode: be the KVC session-aware decoder (keeps sessions' KV, takes direct appends, answers /session_cache/admit_direct_append)")
	fs.BoolVar(&f.kvEvents, "kv-events", false, "with --session-cache: publish the decoder's session evictions (and where below HBM each session's KV still is: host, storage or none) as the KVC extension's KV event stream, GET /kvc/kv_events (SSE; docs/worker-protocol.md), which serve --kv-events reads into its residency belief; off by default: 404, as stock SGLang")
	fs.IntVar(&f.sessionCap, "session-cap", 0, "with --session-cache: most `sessions` resident at once; 0 = no cap")
	fs.StringVar(&f.trim, "trim", "idle", "with --session-cache: which sessions a trim may evict: `idle` (no request running) or any")
	fs.StringVar(&f.eviction, "eviction", "session", "with --session-cache: eviction `granularity`: session (a whole session at once), block (LRU nibbles the oldest blocks) or tail (a trim cuts the least recently used session's last blocks, as many as the room needs)")
	fs.StringVar(&f.order, "prefill-order", "fcfs", "how the worker admits its waiting requests: `fcfs` (arrival order, SGLang's) or shortest (fewest uncached prompt tokens first: KVC v3's scheduler extension; see --prefill-max-wait)")
	fs.Float64Var(&f.maxWait, "prefill-max-wait", 0, "with --prefill-order shortest: a request waiting longer than this many `seconds`, in [0, 86400], goes first, in arrival order; 0 = no bound (default 0)")
	fs.Float64Var(&f.tpotSLO, "tpot-slo-ms", 0, "KVC v4's decode slicing (an extension; SGLang has no such option): hold every request decoding here to this TPOT in `milliseconds`, in [0, 1000000], by sizing each prefill chunk to the smallest stall budget of the decode batch and decoding instead when none fits, as the simulator's workers do with --tpot-slo-ms (engine/slice.go, docs/kvc-v4.md); 0 = off: SGLang's prefill-first order (default 0; up --kvc-preset v4: 12)")
	fs.IntVar(&f.bypass, "prefill-bypass-tokens", 0, "with --session-cache or --role prefill: a step that continues a long chunked prefill also takes the waiting requests whose uncached prompt fits in this many `tokens`, in [0, 16777216], in their queue order (KVC v3's scheduler extension: a direct append does not wait behind a local seed, nor on P a hosted session's turn behind a long prompt; default 0: SGLang's order; up --kvc-preset v4 starts the prefill workers with 2048)")
	fs.BoolVar(&f.bypassAhead, "prefill-bypass-ahead", false, "prefill, with --prefill-bypass-tokens and --prefill-order shortest: the waiting turns served whole (no bootstrap room) that fit the bypass run in a step of their own before the long prompt's next chunk, never two such steps in a row (KVC v4's extension; off by default; up --kvc-preset v4: on)")
	fs.IntVar(&f.tailMaxWaiting, "tail-trim-max-waiting", 8, "with --eviction tail: a trim cuts a session's tail only while at most this many `requests` wait in the queue, in [0, 1048576] (default 8)")
	fs.Float64Var(&f.lowWatermark, "low-watermark", 0, "with --session-cache: `share` of the pool a trim frees beyond the need, in [0, 1)")
	fs.Float64Var(&f.trimStall, "trim-stall", 0, "with --session-cache: scheduler stall per trimmed session in `seconds`")
	fs.Float64Var(&f.trimTok, "trim-stall-per-token", 0, "with --session-cache: scheduler stall per freed token in `seconds`")
	fs.BoolVar(&f.backpressure, "backpressure", true, "with --session-cache: admission replies carry recommended_pause_ms once the KV held reaches --backpressure-high-water of the pool or the queue reaches a quarter of --max-running (10 ms per queued request, plus 10); --backpressure=false: always 0 (the seed's router honoured it only with --enable-backpressure, off by default)")
	fs.Float64Var(&f.bpHighWater, "backpressure-high-water", engine.DefaultHighWater, "with --session-cache and --backpressure: the `share` of the KV pool, in (0, 1], held for requests and sessions (the evictable prefix cache not counted) from which admission replies carry a pause")
	fs.BoolVar(&f.bpTransfers, "backpressure-transfer-queue", false, "with --session-cache and --backpressure: the queue the pause grows with also counts the requests whose KV transfer has not landed (the seed's transfer_queue_depth; off by default: the requests waiting for admission or a KV reservation only)")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "model seconds per wall second, a `factor` in [0.001, 1000]: 10 runs the model ten times faster than real time")
	fs.Float64Var(&f.startup, "startup-delay", 0, "answer /health with 503 for this many `seconds` after start (loading weights)")
	fs.Float64Var(&f.bootTimeout, "bootstrap-timeout", emulator.DefaultBootstrapTimeout, "prefill: `seconds` a request waits for its decode worker's pre-allocation before it fails (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT)")
	fs.Float64Var(&f.waitTimeout, "waiting-timeout", emulator.DefaultWaitingTimeout, "decode: `seconds` a request waits for its KV before it fails (SGLANG_DISAGGREGATION_WAITING_TIMEOUT)")
	fs.Float64Var(&f.beat, "heartbeat-interval", emulator.DefaultHeartbeatInterval, "decode: `seconds` between pings of the prefill workers it waits on (SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL)")
	fs.IntVar(&f.beatMisses, "heartbeat-max-failures", emulator.DefaultHeartbeatFailures, "decode: missed `pings` in a row that fail a prefill worker's rooms (SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE)")
	fs.Float64Var(&f.errRate, "fault-error-rate", 0, "failure injection: `fraction` of /generate requests answered 500, in [0, 1]")
	fs.Float64Var(&f.stall, "fault-stall", 0, "failure injection: `seconds` added before each /generate is taken")
	fs.IntVar(&f.crashAfter, "fault-crash-after", 0, "failure injection: serve this many /generate `requests`, then exit with status 1 at the next one; 0 = never")
	fs.Float64Var(&f.slowXfer, "fault-slow-transfer", 1, "failure injection, prefill: divide the link's bandwidth by this `factor` (≥ 1)")
	fs.BoolVar(&f.refuse, "fault-refuse-admissions", false, "failure injection, with --session-cache: refuse every admission (reason fault-injected)")
	fs.Uint64Var(&f.faultSeed, "fault-seed", 1, "failure injection: random `seed` of --fault-error-rate")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		cfg, err := f.config(newChecks(c))
		if err != nil {
			return err
		}
		cfg.Crash = func() {
			fmt.Fprintf(e.stderr, "pdhybrid worker: fault injection: crashing at /generate request %d\n", f.crashAfter+1)
			os.Exit(exitError)
		}
		return serveWorker(ctx, e, cfg, &f)
	})
	return c
}

// config checks the flags and builds the emulator's configuration.
func (f *workerFlags) config(ck *checks) (emulator.Config, error) {
	port := atLeast(1).upTo(65535).orZero("a free port").is("a TCP port")
	ck.num("port", port)
	ck.num("bootstrap-port", port)
	ck.num("block-size", between(1, 1<<20).is("a number of tokens"))
	ck.num("chunk-tokens", between(1, 1<<22).is("a number of tokens").orZero("the profile's"))
	ck.num("max-running", between(1, 1<<16).is("a number of requests").orZero("the profile's"))
	ck.num("mem-fraction-static", memRange)
	ck.num("max-total-tokens", between(1, 1e10).is("a number of tokens").orZero("from the memory fraction"))
	ck.num("session-cap", between(1, 1e7).is("a number of sessions").orZero("no cap"))
	ck.num("low-watermark", between(0, 1).openTop().is("a share of the pool"))
	ck.num("trim-stall", between(0, 3600).is("a number of seconds"))
	ck.num("trim-stall-per-token", between(0, 1).is("a number of seconds"))
	ck.num("backpressure-high-water", above(0).upTo(1).is("a share of the pool"))
	ck.num("time-scale", timeScaleRange)
	ck.num("startup-delay", between(0, 1e6).is("a number of seconds"))
	ck.num("bootstrap-timeout", above(0).upTo(1e6).is("a number of seconds"))
	ck.num("waiting-timeout", above(0).upTo(1e6).is("a number of seconds"))
	ck.num("heartbeat-interval", above(0).upTo(1e6).is("a number of seconds"))
	ck.num("heartbeat-max-failures", between(1, 1e6).is("a number of pings"))
	ck.num("fault-error-rate", between(0, 1).is("a fraction"))
	ck.num("fault-stall", between(0, 1e6).is("a number of seconds"))
	ck.num("fault-crash-after", between(1, 1e9).is("a number of requests").orZero("never"))
	ck.num("fault-slow-transfer", between(1, 1e6).is("a factor"))
	ck.num("snapshot-buf", above(0).upTo(1024).is("a number of GiB"))
	ck.oneOf("role", "colo", "prefill", "decode")
	ck.oneOf("trim", "idle", "any")
	ck.oneOf("eviction", "session", "block", "tail")
	ck.num("tail-trim-max-waiting", between(0, 1<<20).is("a number of requests"))
	ck.only("tail-trim-max-waiting", f.eviction == "tail", "with --eviction tail")
	ck.num("prefill-bypass-tokens", between(0, 1<<24).is("a number of tokens"))
	ck.oneOf("prefill-order", "fcfs", "shortest")
	ck.num("prefill-max-wait", between(0, 86400).is("seconds"))
	ck.only("prefill-max-wait", f.order == "shortest", "with --prefill-order shortest")
	ck.num("tpot-slo-ms", between(0, 1e6).is("milliseconds").orZero("off"))
	prefill, decode := f.role == "prefill", f.role == "decode"
	for _, n := range []string{"bootstrap-port", "link", "bootstrap-timeout", "fault-slow-transfer", "serve-whole", "snapshot-buf", "prefill-priority-eviction", "snapshot-sync"} {
		ck.only(n, prefill, "with --role prefill")
	}
	for _, n := range []string{"advertise-url", "waiting-timeout", "heartbeat-interval", "heartbeat-max-failures", "session-cache",
		"disaggregation-decode-enable-radix-cache", "disaggregation-decode-enable-conditional-agg"} {
		ck.only(n, decode, "with --role decode")
	}
	ck.only("prefill-bypass-tokens", f.sessionCache || prefill, "with --session-cache or --role prefill")
	ck.only("prefill-bypass-ahead", prefill && f.bypass > 0 && f.order == "shortest", "with --role prefill, --prefill-bypass-tokens above 0 and --prefill-order shortest")
	for _, n := range []string{"session-cap", "trim", "eviction", "tail-trim-max-waiting", "low-watermark", "trim-stall", "trim-stall-per-token", "fault-refuse-admissions",
		"backpressure", "backpressure-high-water", "backpressure-transfer-queue", "kv-events"} {
		ck.only(n, f.sessionCache, "with --session-cache")
	}
	ck.only("disaggregation-decode-enable-radix-cache", !f.sessionCache, "without --session-cache (both would own the decoder's KV)")
	ck.only("backpressure-high-water", f.backpressure, "with --backpressure")
	ck.only("backpressure-transfer-queue", f.backpressure, "with --backpressure")
	ck.only("fault-seed", f.errRate > 0, "with --fault-error-rate")
	f.hicache.check(ck)
	ck.only("hicache-storage-shared", false, "in sim, bench and sweep (a worker process shares a pool through --hicache-storage-shared-url)")
	ck.only("hicache-storage-shared-url", f.hicache.enabled && f.hicache.storage != "", "with --hicache-storage-backend")
	if ck.set("hicache-storage-shared-url") {
		if u, err := url.Parse(f.storeURL); err != nil || u.Scheme != "http" || u.Host == "" {
			ck.fail("--hicache-storage-shared-url %q: want http://HOST:PORT", f.storeURL)
		}
	}
	ck.only("enable-hierarchical-cache", !decode || f.sessionCache || f.decodeRadix, "to a worker with a prefix cache: colo, prefill, or decode with --session-cache or --disaggregation-decode-enable-radix-cache (a plain PD decoder keeps no KV between requests)")
	if ck.set("profile") {
		ck.only("model", false, "without --profile (the profile names its model)")
		ck.only("hardware", false, "without --profile (the profile names its hardware)")
	}
	f.mc.check(ck)
	if err := ck.err(); err != nil {
		return emulator.Config{}, err
	}
	sf := simFlags{model: f.model, hardware: f.hardware, profile: f.profile, mc: f.mc}
	prof, err := sf.loadProfile()
	if err != nil {
		return emulator.Config{}, err
	}
	if _, ok := prof.Links[f.link]; prefill && !ok {
		var names []string
		for n := range prof.Links {
			names = append(names, n)
		}
		sort.Strings(names)
		return emulator.Config{}, usagef("--link %q: profile %s has no such link; want one of %s", f.link, prof.Name, strings.Join(names, ", "))
	}
	if f.maxTotal == 0 && prof.KVPoolTokens(f.memFraction) <= 0 {
		return emulator.Config{}, usagef("--mem-fraction-static %v: the weights and workspace of %s leave no room for KV", f.memFraction, prof.Name)
	}
	f.hicache.checkWithProfile(ck, prof, cmp.Or(f.maxTotal, prof.KVPoolTokens(f.memFraction)))
	if err := ck.err(); err != nil {
		return emulator.Config{}, err
	}
	cfg := emulator.Config{
		Role:    map[string]engine.Role{"colo": engine.RoleColocated, "prefill": engine.RolePrefill, "decode": engine.RoleDecode}[f.role],
		Profile: prof, Link: f.link, BlockSize: f.blockSize, ChunkTokens: f.chunk, MaxRunning: f.maxRunning,
		MemFraction: f.memFraction, PoolTokens: f.maxTotal, MixedChunk: f.mixed, IncrementalStream: f.incremental,
		TimeScale: f.timeScale, StartupDelay: f.startup, BootstrapTimeout: f.bootTimeout, WaitingTimeout: f.waitTimeout,
		HeartbeatInterval: f.beat, HeartbeatMaxFailures: f.beatMisses, ServedModelName: f.served, AdvertiseURL: f.advertise,
		Faults: emulator.Faults{ErrorRate: f.errRate, StallS: f.stall, CrashAfter: f.crashAfter, SlowTransfer: f.slowXfer,
			RefuseAdmissions: f.refuse, Seed: f.faultSeed},
		ServeWhole: f.serveWhole, PriorityEviction: f.priority,
		DecodeRadix: f.decodeRadix, ConditionalAgg: f.condAgg, SnapshotSync: f.snapshotSync,
		ShortestFirst: f.order == "shortest", MaxWaitS: f.maxWait, SliceTPOTS: f.tpotSLO / 1000,
		HiCache: f.hicache.config(), KVEvents: f.kvEvents,
	}
	if f.storeURL != "" {
		cfg.HiCache.Storage.Index = emulator.NewStoreClient(f.storeURL)
	}
	if prefill {
		cfg.SnapshotBufBytes = int64(f.snapshotBufGiB * (1 << 30))
		cfg.PrefillBypassTokens, cfg.PrefillBypassAhead = f.bypass, f.bypassAhead
	}
	if f.sessionCache {
		cfg.Session = engine.SessionConfig{Enabled: true, Cap: f.sessionCap, LowWatermark: f.lowWatermark, BypassTokens: f.bypass,
			TrimStallS: f.trimStall, TrimStallPerTokenS: f.trimTok,
			NoPauseHint: !f.backpressure, HighWater: f.bpHighWater, PauseCountsTransfers: f.bpTransfers}
		if f.trim == "any" {
			cfg.Session.Trim = engine.TrimAny
		}
		switch f.eviction {
		case "block":
			cfg.Session.Eviction = engine.EvictBlock
		case "tail":
			cfg.Session.TrimTail, cfg.Session.TailMaxWaiting = true, f.tailMaxWaiting
		}
	}
	return cfg, nil
}

// serveWorker runs the worker until ctx ends, then drains it.
func serveWorker(ctx context.Context, e *env, cfg emulator.Config, f *workerFlags) error {
	s, err := emulator.New(cfg)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
	boot := net.JoinHostPort(f.host, strconv.Itoa(f.bootPort))
	if err := s.Start(addr, boot); err != nil {
		return err
	}
	line := fmt.Sprintf("listening url=%s role=%s", s.URL(), f.role)
	if p := s.BootstrapPort(); p != 0 {
		line += fmt.Sprintf(" bootstrap_port=%d", p)
	}
	fmt.Fprintln(e.stdout, line)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		s.Kill()
	}
	return ctx.Err()
}
