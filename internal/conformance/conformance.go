// Package conformance runs the KVC worker contract (docs/worker-protocol.md)
// against one live worker over HTTP and says, rule by rule, whether it
// holds: pass, fail (with what was seen), or not offered (the worker does
// not offer that part of the contract, which stock SGLang need not). The
// stock rules are what every SGLang worker of the role does and what the
// gateway relies on; the extension rules apply where the worker offers the
// extension, learnt as the gateway learns it (kvc_protocol in
// /server_info, or the path answering anything but 404).
//
// Every check sends small requests under session ids of its own
// (conformance-<run>-<n>), so a run leaves at most a few short sessions
// behind; nothing is sent that a worker may act on beyond serving a few
// tokens.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Status is a check's outcome.
type Status string

const (
	Pass       Status = "pass"
	Fail       Status = "fail"
	NotOffered Status = "not-offered"
)

// Result is one rule's outcome.
type Result struct {
	Rule   string `json:"rule"`
	Status Status `json:"status"`
	Reason string `json:"reason"`
}

// Roles a worker may be checked as.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleColo    = "colo"
)

// Options set a run up.
type Options struct {
	Client  *http.Client  // default: 30 s per call
	Timeout time.Duration // bounds each call (default 30 s)
}

// run is one conformance run against a worker.
type run struct {
	ctx      context.Context
	base     string
	role     string
	client   *http.Client
	tag      string
	n        int
	info     map[string]any // /server_info, nil when it could not be read
	resident string         // a session the checks made resident on a decoder
	out      []Result
}

// Run checks the worker at base as role and returns every rule's result in
// the order docs/worker-protocol.md lists them.
func Run(ctx context.Context, base, role string, opt Options) ([]Result, error) {
	switch role {
	case RolePrefill, RoleDecode, RoleColo:
	default:
		return nil, fmt.Errorf("role %q: want prefill, decode or colo", role)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: opt.Timeout}
	}
	var b [4]byte
	rand.Read(b[:])
	r := &run{ctx: ctx, base: strings.TrimRight(base, "/"), role: role, client: opt.Client, tag: hex.EncodeToString(b[:])}
	r.stock()
	switch role {
	case RoleDecode:
		r.decodeModes()
		r.sessionCache()
		r.snapshotDump()
		r.kvEvents()
	case RolePrefill:
		r.snapshotIngest()
	}
	return r.out, nil
}

func (r *run) add(rule string, st Status, format string, a ...any) {
	r.out = append(r.out, Result{Rule: rule, Status: st, Reason: fmt.Sprintf(format, a...)})
}

// session is a fresh session id for one check.
func (r *run) session() string {
	r.n++
	return fmt.Sprintf("conformance-%s-%d", r.tag, r.n)
}

// reply is one HTTP answer: its status and body (JSON decoded into v when
// it parses).
type reply struct {
	status int
	body   []byte
	v      map[string]any
	err    error
}

func (r *run) call(method, path string, body any) reply {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(r.ctx, method, r.base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	out := reply{status: resp.StatusCode, body: b, err: err}
	json.Unmarshal(b, &out.v)
	return out
}

func (r *run) post(path string, body any) reply { return r.call(http.MethodPost, path, body) }

// short is a body abridged for a reason.
func (p reply) short() string {
	if p.err != nil {
		return p.err.Error()
	}
	b := strings.TrimSpace(string(p.body))
	if len(b) > 160 {
		b = b[:160] + "…"
	}
	return fmt.Sprintf("%d %s", p.status, b)
}

// prompt is n small token ids, different for each seed.
func prompt(seed, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1000 + (seed*7919+i*31)%50000
	}
	return out
}

// num reads a JSON number field.
func num(v map[string]any, k string) (float64, bool) {
	f, ok := v[k].(float64)
	return f, ok
}

// advertised is the features kvc_protocol names in /server_info.
func (r *run) advertised() (version float64, features map[string]bool) {
	features = map[string]bool{}
	kp, _ := r.info["kvc_protocol"].(map[string]any)
	if kp == nil {
		return 0, features
	}
	version, _ = num(kp, "version")
	fs, _ := kp["features"].([]any)
	for _, f := range fs {
		if s, ok := f.(string); ok {
			features[s] = true
		}
	}
	return version, features
}

// offered tells whether the worker offers an extension path: advertised,
// or the path answers anything but 404 to an empty body. It also checks
// that both agree.
func (r *run) offered(rule, feature, path string) bool {
	_, fs := r.advertised()
	p := r.post(path, map[string]any{})
	if p.err != nil {
		r.add(rule, Fail, "probe of %s: %v", path, p.err)
		return false
	}
	exists := p.status != http.StatusNotFound
	switch {
	case fs[feature] && !exists:
		r.add(rule, Fail, "kvc_protocol advertises %s but %s answers 404", feature, path)
		return false
	case !fs[feature] && exists:
		r.add(rule, Fail, "%s answers %d, but kvc_protocol does not advertise %s (a path not offered must answer 404)", path, p.status, feature)
		return true
	case !exists:
		r.add(rule, NotOffered, "%s: 404 and not advertised (stock SGLang)", path)
		return false
	}
	if p.status != http.StatusBadRequest {
		r.add(rule, Fail, "%s with an empty body answered %s, want 400 (session_id is required)", path, p.short())
		return true
	}
	r.add(rule, Pass, "advertised as %s; an empty body is refused 400", feature)
	return true
}
