package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
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
}

func (o *opsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer `token` for /admin/ (default $"+adminTokenEnv+"); with neither the admin API is off (404)")
	fs.Int64Var(&o.maxBody, "max-body-bytes", 64<<20, "largest request body in `bytes`; larger is answered 413")
	fs.IntVar(&o.maxHeader, "max-header-bytes", 1<<20, "largest request header block in `bytes`; larger is answered 431")
	fs.IntVar(&o.maxClient, "max-client-concurrency", 0, "`requests` one client may have in flight; more are answered 429 with Retry-After; 0 = no limit")
	fs.StringVar(&o.clientHeader, "client-header", "", "`header` naming the client for --max-client-concurrency (an API key header, say); without one, or when a request lacks it, the client is its remote IP")
	fs.Float64Var(&o.pollS, "load-poll-interval", 1, "`seconds` between polls of each worker's /v1/loads for the pdhybrid_worker_* metrics; 0 = never poll")
	fs.BoolVar(&o.logPrompts, "log-prompts", false, "log every request, its prompt included, as a JSON line on stderr (default off: nothing of requests is logged)")
	fs.BoolVar(&o.logDebug, "log-debug", false, "also log debug events as JSON lines on stderr: each D→P sync's outcome, stage times and sizes (--d-to-p-sync; no prompt content)")
}

func (o *opsFlags) check(ck *checks) {
	ck.num("max-body-bytes", between(1024, 1<<34).is("a number of bytes"))
	ck.num("max-header-bytes", between(4096, 64<<20).is("a number of bytes"))
	ck.num("max-client-concurrency", between(1, 1e6).is("a number of requests").orZero("no limit"))
	ck.num("load-poll-interval", between(0.05, 3600).is("a number of seconds").orZero("never poll"))
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
	cfg.LogPrompts = o.logPrompts
	cfg.LogDebug = o.logDebug
	cfg.Log = e.stderr
}
