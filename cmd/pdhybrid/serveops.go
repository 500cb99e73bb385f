package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// adminTokenEnv is where serve takes the admin token from when
// --admin-token is not given (a flag's value shows in ps; the environment
// does not).
const adminTokenEnv = "PDHYBRID_ADMIN_TOKEN"

// opsFlags are serve's flags for what runs beside routing: the admin API,
// request limits, load polling, request logging (internal/gateway's Ops).
type opsFlags struct {
	adminToken, clientHeader string
	maxBody                  int64
	maxHeader, maxClient     int
	pollS                    float64
	logPrompts, logDebug     bool
	logLevel, logFormat      string
	maxInflight, maxClientB  int64
	headerS, bodyS, idleS    float64
	connectS, workerHeaderS  float64
	contextTokens            int
	modelConfig              string
	model                    string
	relay                    string
}

func (o *opsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer `token` for /admin/ (default $"+adminTokenEnv+"); with neither the admin API is off (404)")
	fs.Int64Var(&o.maxBody, "max-body-bytes", 64<<20, "largest request body in `bytes`; larger is answered 413")
	fs.IntVar(&o.maxHeader, "max-header-bytes", 1<<20, "largest request header block in `bytes`; larger is answered 431")
	fs.IntVar(&o.maxClient, "max-client-concurrency", 0, "`requests` one client may have in flight; more are answered 429 with Retry-After; 0 = no limit")
	fs.StringVar(&o.clientHeader, "client-header", "", "`header` naming the client for --max-client-concurrency (an API key header, say); without one, or when a request lacks it, the client is its remote IP")
	fs.Float64Var(&o.pollS, "load-poll-interval", 1, "`seconds` between polls of each worker's /v1/loads for the pdhybrid_worker_* metrics; 0 = never poll")
	fs.BoolVar(&o.logPrompts, "log-prompts", false, "log every request, its prompt included, as a JSON line on stderr (default off: nothing of requests is logged)")
	fs.StringVar(&o.logLevel, "log-level", "info", "least `level` logged on stderr: debug, info, warn or error (errors, retries, breaker and worker state changes are info or above; no prompt text)")
	fs.StringVar(&o.logFormat, "log-format", "json", "log line `format`: json or text (log/slog's)")
	fs.Int64Var(&o.maxInflight, "max-inflight-bytes", 256<<20, "request body `bytes` the gateway holds at once; a body past it is answered 429 with Retry-After; 0 = no limit")
	fs.Int64Var(&o.maxClientB, "max-client-bytes", 128<<20, "request body `bytes` one client (--client-header, else its IP) holds at once; past it, 429 with Retry-After; 0 = no limit")
	fs.Float64Var(&o.headerS, "header-timeout", 10, "`seconds` a client gets to send its request headers; 0 = no limit")
	fs.Float64Var(&o.bodyS, "body-timeout", 30, "`seconds` a client gets to send its request body; slower is answered 408 and its connection closed; 0 = no limit")
	fs.Float64Var(&o.idleS, "idle-timeout", 120, "`seconds` a keep-alive client connection may sit idle between requests; 0 = no limit")
	fs.Float64Var(&o.connectS, "worker-connect-timeout", 3, "`seconds` to connect to a worker before it counts as unreachable; 0 = no limit")
	fs.Float64Var(&o.workerHeaderS, "worker-header-timeout", 0, "`seconds` a worker gets to send its response headers once a request is sent (a long prefill's first byte can take minutes); 0 = no limit")
	fs.IntVar(&o.contextTokens, "context-tokens", 0, "the model's context length in `tokens`: a prompt that with its max tokens does not fit is a 400 before any worker sees it; 0 = left to the workers")
	fs.StringVar(&o.modelConfig, "model-config", "", "the served model's Hugging Face config.json `file`: its context (max_position_embeddings, stretched by YaRN where the config says so) becomes --context-tokens unless that is given; the gateway makes no step-time or KV estimate of its own, so this is all it takes from a config (the workers take theirs with pdhybrid worker --model-config)")
	fs.StringVar(&o.model, "model", "", "model `name` GET /v1/models answers (default \"default\")")
	fs.StringVar(&o.relay, "relay", "direct", "how streamed /generate answers are relayed: direct (from the worker's socket to the client's on the gateway's own epoll loops; Linux, plain http:// workers, the ordinary relay elsewhere) or ordinary (net/http's client and server throughout); docs/gateway.md")
	fs.BoolVar(&o.logDebug, "log-debug", false, "also log debug events as JSON lines on stderr: each D→P sync's outcome, stage times and sizes (--d-to-p-sync; no prompt content)")
}

func (o *opsFlags) check(ck *checks) {
	ck.num("max-body-bytes", between(1024, 1<<34).is("a number of bytes"))
	ck.num("max-header-bytes", between(4096, 64<<20).is("a number of bytes"))
	ck.num("max-client-concurrency", between(1, 1e6).is("a number of requests").orZero("no limit"))
	ck.num("load-poll-interval", between(0.05, 3600).is("a number of seconds").orZero("never poll"))
	ck.oneOf("log-level", "debug", "info", "warn", "error")
	ck.oneOf("log-format", "json", "text")
	ck.num("max-inflight-bytes", between(1024, 1<<40).is("a number of bytes").orZero("no limit"))
	ck.num("max-client-bytes", between(1024, 1<<40).is("a number of bytes").orZero("no limit"))
	for _, n := range []string{"header-timeout", "body-timeout", "idle-timeout", "worker-connect-timeout", "worker-header-timeout"} {
		ck.num(n, between(0.001, 86400).is("a number of seconds").orZero("no limit"))
	}
	ck.num("context-tokens", between(0, 1<<30).is("a number of tokens").orZero("left to the workers"))
	ck.oneOf("relay", "ordinary", "direct")
}

// servedContext is the context the front door holds prompts to:
// --context-tokens where given, else the context --model-config's file
// serves, else 0 (left to the workers). It is the one figure of a model
// the gateway uses itself.
func (o *opsFlags) servedContext() (int, error) {
	if o.contextTokens > 0 || o.modelConfig == "" {
		return o.contextTokens, nil
	}
	a, err := model.LoadHF(o.modelConfig)
	if err != nil {
		return 0, usagef("--model-config: %v", err)
	}
	return a.MaxContext, nil
}

// seconds turns a timeout flag into a duration: 0 (no limit) is Ops'
// negative duration, as Ops reads 0 as its default.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return -1
	}
	return time.Duration(s * float64(time.Second))
}

// orNone is bytes for Ops: 0 (no limit) is negative there.
func orNone(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

func (o *opsFlags) apply(cfg *gateway.Config, e *env) {
	cfg.MaxBodyBytes = o.maxBody
	cfg.MaxHeaderBytes = o.maxHeader
	cfg.MaxClientConcurrency = o.maxClient
	cfg.ClientHeader = o.clientHeader
	cfg.AdminToken = o.adminToken
	if cfg.AdminToken == "" {
		cfg.AdminToken = os.Getenv(adminTokenEnv)
	}
	cfg.LoadPoll = time.Duration(o.pollS * float64(time.Second))
	if o.pollS == 0 {
		cfg.LoadPoll = -1
	}
	cfg.LogLevel, cfg.LogText = o.logLevel, o.logFormat == "text"
	cfg.MaxInflightBytes, cfg.MaxClientBytes = orNone(o.maxInflight), orNone(o.maxClientB)
	cfg.HeaderTimeout, cfg.BodyTimeout, cfg.IdleTimeout = seconds(o.headerS), seconds(o.bodyS), seconds(o.idleS)
	cfg.WorkerConnectTimeout, cfg.WorkerHeaderTimeout = seconds(o.connectS), seconds(o.workerHeaderS)
	cfg.ContextTokens, cfg.Model = o.contextTokens, o.model
	cfg.LogPrompts = o.logPrompts
	cfg.LogDebug = o.logDebug
	cfg.RelayDirect = o.relay == "direct"
	cfg.Log = e.stderr
}
