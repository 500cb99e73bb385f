package emulator

import (
	"errors"
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// Config sets one emulated worker up. Durations are in model seconds
// (wall seconds × TimeScale), like every time the engine charges.
type Config struct {
	Role    engine.Role
	Profile *model.Profile
	// Link names the profile's link a prefill worker's KV leaves on.
	Link        string
	BlockSize   int     // tokens per prefix block (default 64)
	ChunkTokens int     // 0: the profile's (SGLang --chunked-prefill-size)
	MaxRunning  int     // 0: the profile's (SGLang --max-running-requests)
	MemFraction float64 // 0: the profile's (SGLang --mem-fraction-static)
	PoolTokens  int64   // overrides MemFraction when > 0 (SGLang --max-total-tokens)
	MixedChunk  bool
	// HiCache gives the worker a host KV tier below its prefix cache
	// (SGLang --enable-hierarchical-cache; engine/hicache.go).
	HiCache engine.HiCacheConfig
	// Session makes a decode worker session-aware (the KVC decoder).
	Session engine.SessionConfig
	// ServeWhole lets a prefill worker serve a request that carries no
	// bootstrap room whole, prefill and decode, as a colocated worker
	// would (KVC v3's P hosting sessions, docs/kvc-v3.md); stock SGLang's
	// prefill server answers such a request 400, as this one does without.
	ServeWhole bool
	// DecodeRadix is SGLang's --disaggregation-decode-enable-radix-cache
	// (server_args.py, ServerArgs.disaggregation_decode_enable_radix_cache;
	// PR #19746): a decode worker keeps what it received and generated in
	// a prefix cache, matches each PD request against it when its KV is
	// pre-allocated, and tells the prefill worker the matched length
	// (decode_prefix_len) so that only the delta crosses the link.
	DecodeRadix bool
	// ConditionalAgg is --disaggregation-decode-enable-conditional-agg
	// (draft PR #34773): a decode worker also prefills a request that
	// carries do_local_prefill: true and no bootstrap room, interleaved
	// with its decode batch; without the flag such a request is refused as
	// every raw request on a decode worker is (400, no bootstrap room).
	ConditionalAgg bool
	// SnapshotSync makes a prefill worker answer the KVC extension's D→P
	// snapshot RPCs (/_snapshot/prepare_receive, finalize_ingest, release;
	// docs/worker-protocol.md). Stock SGLang has no such routes: without
	// it they answer FastAPI's 404.
	SnapshotSync bool
	// SnapshotBufBytes is a prefill worker's D→P snapshot buffer (0: the
	// seed's 8 GiB, SGLANG_SNAPSHOT_LINK_BUF_BYTES; snapshot.go).
	SnapshotBufBytes int64
	// PriorityEviction makes a prefill worker evict the prompts of KVC
	// seeds (PD legs that name a session) before any other prefix-cache KV
	// once they are done, as the simulator's --prefill-priority-eviction
	// does (engine/priority.go); other roles ignore it.
	PriorityEviction bool
	// ShortestFirst and MaxWaitS: the engine admits waiting requests fewest
	// uncached tokens first, bounded by MaxWaitS (engine.Config; KVC v3).
	ShortestFirst bool
	MaxWaitS      float64
	// PrefillBypassTokens and PrefillBypassAhead: a prefill worker's bypass
	// of a long chunked prompt (engine.Config, engine/pbypass.go; KVC v4).
	PrefillBypassTokens int
	PrefillBypassAhead  bool
	// SliceTPOTS is KVC v4's decode slicing (engine.Config.SliceTPOTS,
	// engine/slice.go): the worker sizes each prefill chunk to the stall
	// budget of the requests decoding there, so none of them passes this
	// TPOT in seconds; 0 = off (SGLang's prefill-first order). The
	// simulator sets it on every worker of a KVC run with --tpot-slo-ms.
	SliceTPOTS float64
	// IncrementalStream streams only the new text and ids per event
	// (SGLang --incremental-streaming-output); by default each event
	// carries everything so far, as SGLang's /generate does.
	IncrementalStream bool
	// KVEvents makes a session-aware decode worker publish its evictions
	// as the KVC extension's KV event stream (GET /kvc/kv_events,
	// kvevents.go); without it the path answers 404, as on stock SGLang.
	KVEvents bool

	TimeScale    float64 // model seconds per wall second (default 1)
	StartupDelay float64 // /health answers 503 this long after Start
	// BootstrapTimeout: how long a prefill worker's request waits for its
	// decode worker's pre-allocation (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT,
	// default 300). WaitingTimeout: how long a decode worker's request waits
	// for its KV (SGLANG_DISAGGREGATION_WAITING_TIMEOUT, default 300).
	BootstrapTimeout float64
	WaitingTimeout   float64
	// HeartbeatInterval and HeartbeatMaxFailures: a decode worker pings the
	// bootstrap server of every prefill worker it waits on, and fails the
	// rooms of one that misses this many pings in a row
	// (SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL 5, _MAX_FAILURE 2).
	HeartbeatInterval    float64
	HeartbeatMaxFailures int

	ServedModelName string // default: the profile's model name
	// AdvertiseURL is the base URL a decode worker gives prefill workers to
	// deliver KV to; default http://<listen address>.
	AdvertiseURL string

	Faults Faults
	Clock  Clock // default RealClock
	// Crash is what the crash-after fault does; default: Kill the server.
	Crash func()
}

// Defaults SGLang uses (environ.py, server_args.py).
const (
	DefaultBlockSize         = 64
	DefaultBootstrapTimeout  = 300
	DefaultWaitingTimeout    = 300
	DefaultHeartbeatInterval = 5
	DefaultHeartbeatFailures = 2
)

func (c *Config) fill() error {
	if c.Profile == nil {
		return errors.New("emulator: no profile")
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize < 1 {
		return fmt.Errorf("emulator: block size %d, want ≥ 1", c.BlockSize)
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) {
		return fmt.Errorf("emulator: time scale %v, want > 0", c.TimeScale)
	}
	if c.BootstrapTimeout == 0 {
		c.BootstrapTimeout = DefaultBootstrapTimeout
	}
	if c.WaitingTimeout == 0 {
		c.WaitingTimeout = DefaultWaitingTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatMaxFailures == 0 {
		c.HeartbeatMaxFailures = DefaultHeartbeatFailures
	}
	if c.Link == "" {
		c.Link = "rdma-400g"
	}
	if c.Role == engine.RolePrefill {
		if _, ok := c.Profile.Links[c.Link]; !ok {
			return fmt.Errorf("emulator: profile %s has no link %q", c.Profile.Name, c.Link)
		}
	}
	if !(c.SliceTPOTS >= 0 && c.SliceTPOTS <= 1000) {
		return fmt.Errorf("emulator: slice TPOT %v s, want seconds in [0, 1000] (0 = off)", c.SliceTPOTS)
	}
	if c.SnapshotBufBytes < 0 {
		return fmt.Errorf("emulator: snapshot buffer %d bytes, want ≥ 0 (0: 8 GiB)", c.SnapshotBufBytes)
	}
	if c.Session.Enabled && c.Role != engine.RoleDecode {
		return errors.New("emulator: a session cache needs the decode role")
	}
	if (c.DecodeRadix || c.ConditionalAgg) && c.Role != engine.RoleDecode {
		return errors.New("emulator: the decode radix cache and conditional aggregation need the decode role")
	}
	if c.DecodeRadix && c.Session.Enabled {
		// Two caches of one decoder's KV, each believing it owns the pool.
		return errors.New("emulator: the decode radix cache and the session cache exclude each other")
	}
	if c.KVEvents && !c.Session.Enabled {
		return errors.New("emulator: KV events need the session cache (a KVC decoder)")
	}
	if c.SnapshotSync && c.Role != engine.RolePrefill {
		return errors.New("emulator: snapshot sync needs the prefill role")
	}
	if s := c.Profile.Server; s != nil {
		if c.ChunkTokens == 0 {
			c.ChunkTokens = s.ChunkedPrefillSize
		}
		if c.MaxRunning == 0 {
			c.MaxRunning = s.MaxRunningRequests
		}
	}
	if c.ServedModelName == "" {
		c.ServedModelName = c.Profile.Model.Name
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	return c.Faults.check()
}
