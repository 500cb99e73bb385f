package gateway

// The front door shared by every API: the fields only the gateway may set
// on a worker request, SGLang's /generate checks (run before any worker
// sees the request), JSON 404 and 405 in each API's own shape, and the
// small routes clients call before their first request (GET /v1/models,
// /version, /health_generate).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Version is the gateway's version, answered at /version (set by the
// command from its build).
var Version = "dev"

// routingFields are the /generate fields that steer a worker: the PD
// protocol's bootstrap address and room (a client's would make a decoder
// dial the client's host), the request id (a duplicate would collide with
// another request's), the DP ranks and the session cache's own fields.
// The gateway sets the ones a request needs itself; a client's are dropped.
var routingFields = []string{
	"bootstrap_host", "bootstrap_port", "bootstrap_room", "rid",
	"data_parallel_rank", "routed_dp_rank", "disagg_prefill_dp_rank", "dp_rank",
	"session_id", "session_params", "max_append_tokens", "force_seed",
}

// stripRouting removes every client-set routing field from a /generate
// body (after its session was resolved: session_id and session_params are
// identity sources, identity.go).
func stripRouting(body map[string]any) {
	for _, k := range routingFields {
		delete(body, k)
	}
}

// maxNewTokensCap is the largest max_new_tokens accepted (the emulated
// worker's bound; no model generates more).
const maxNewTokensCap = 1 << 30

// checkGenerate refuses a /generate body SGLang would refuse, naming the
// field: a non-boolean stream, sampling_params that is not an object, a
// max_new_tokens that is not an integer in [0, 2^30], an empty prompt or a
// token id outside [0, 2^31-1] (the ids themselves are checked as they are
// read, newRequest).
func checkGenerate(body map[string]any) error {
	if v, ok := body["stream"]; ok && v != nil {
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("stream: want a boolean, got %s", jsonText(v))
		}
	}
	if v, ok := body["sampling_params"]; ok && v != nil {
		sp, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("sampling_params: want an object, got %s", jsonText(v))
		}
		if m, ok := sp["max_new_tokens"]; ok && m != nil {
			if _, err := boundedInt("sampling_params.max_new_tokens", m, 0, maxNewTokensCap); err != nil {
				return err
			}
		}
	}
	return nil
}

// boundedInt reads a JSON integer in [lo, hi]; floats, exponents, strings
// and out-of-range values are refused with the field's name.
func boundedInt(field string, v any, lo, hi int64) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s: want an integer in [%d, %d], got %s", field, lo, hi, jsonText(v))
	}
	x, err := n.Int64()
	if err != nil || x < lo || x > hi {
		return 0, fmt.Errorf("%s: want an integer in [%d, %d], got %s", field, lo, hi, n)
	}
	return x, nil
}

// checkContext refuses a prompt that does not fit the model's context
// (Config.ContextTokens; 0 = unknown, unchecked), in SGLang's words.
func (s *Server) checkContext(q *request) error {
	c := s.cfg.ContextTokens
	if c <= 0 {
		return nil
	}
	if q.tokens >= c {
		return fmt.Errorf("The input (%d tokens) is longer than the model's context length (%d tokens).", q.tokens, c)
	}
	if q.tokens+q.output >= c { // SGLang's >= (tokenizer_manager.py:650 at 0025436)
		return fmt.Errorf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			c, q.tokens+q.output, q.tokens, q.output)
	}
	return nil
}

// checkTokenID refuses a token id outside what any vocabulary holds.
func checkTokenID(i int, id int64) error {
	if id < 0 || id > math.MaxInt32 {
		return fmt.Errorf("input_ids[%d] = %d: want a token id in [0, %d]", i, id, math.MaxInt32)
	}
	return nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 64 {
		return fmt.Sprintf("a %T", v)
	}
	return string(b)
}

// apiError answers in the error shape of the API a path belongs to:
// Anthropic's for /v1/messages, OpenAI's for the other /v1/ routes,
// SGLang's otherwise.
func apiError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/v1/messages"):
		writeAnthropicError(w, &anthError{status: status, msg: msg})
	case strings.HasPrefix(p, "/v1/"):
		writeOpenAIError(w, status, msg)
	default:
		writeError(w, status, msg)
	}
}

// postOnly lets only POST through to h; any other method is a 405 with Allow,
// in the route's API shape.
func postOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			apiError(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+"; use POST")
			return
		}
		h(w, r)
	}
}

// getOnly is postOnly for the read-only routes (GET and HEAD).
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			apiError(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+"; use GET")
			return
		}
		h(w, r)
	}
}

// handleNotFound answers every path the gateway does not serve.
func handleNotFound(w http.ResponseWriter, r *http.Request) {
	apiError(w, r, http.StatusNotFound, "no route "+r.URL.Path)
}

// handleModels is OpenAI's GET /v1/models: the model the workers serve
// (Config.Model; "default" when unset, as SGLang names an unnamed one).
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	m := map[string]any{"id": s.modelName(), "object": "model", "created": s.start.Unix(), "owned_by": "pdhybrid"}
	if s.cfg.ContextTokens > 0 {
		m["max_model_len"] = s.cfg.ContextTokens
	}
	if strings.HasSuffix(r.URL.Path, "/models") {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{m}})
		return
	}
	if id := strings.TrimPrefix(r.URL.Path, "/v1/models/"); id != s.modelName() {
		apiError(w, r, http.StatusNotFound, "The model `"+id+"` does not exist.")
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) modelName() string {
	if s.cfg.Model != "" {
		return s.cfg.Model
	}
	return "default"
}

// handleVersion is SGLang's GET /version.
func handleVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": Version, "server": "pdhybrid-gateway"})
}

// handleHealthGenerate is SGLang's /health_generate: healthy only if a
// one-token request goes through the whole path (dispatch, workers,
// relay), so a gateway whose workers are all down answers 503.
func (s *Server) handleHealthGenerate(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "draining")
		return
	}
	body := map[string]any{"input_ids": []any{json.Number("0")}, "sampling_params": map[string]any{"max_new_tokens": json.Number("1")}}
	q, err := s.newRequest(body, identity{})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rec := &statusOnly{header: http.Header{}}
	s.serveRequest(r.Context(), rec, q)
	if rec.status != http.StatusOK {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("a one-token request failed with %d", rec.status))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// statusOnly is a ResponseWriter that keeps only the status.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) WriteHeader(c int) {
	if s.status == 0 {
		s.status = c
	}
}
func (s *statusOnly) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// errNotJSON is the answer to a body sent as something else than JSON.
var errNotJSON = errors.New("Content-Type must be application/json")

// checkContentType refuses a body declared as something other than JSON
// (an absent Content-Type is taken as JSON, as curl -d sends one anyway).
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		return nil
	}
	return fmt.Errorf("%w, got %q", errNotJSON, mt)
}

// shortHash names a secret (an API key) in logs and session namespaces
// without showing it: 16 hex digits of its SHA-256.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// public is a cause as a client may read it: each worker's URL replaced by
// its role and index ("decode 1"), so no internal address leaves the
// gateway (logs keep the URLs).
func (s *Server) public(msg string) string {
	var ws []*workerInfo
	s.locked(func() { ws = append(ws, s.workers...) })
	// Longest URLs first: http://h:80 must not eat into http://h:8000.
	slices.SortFunc(ws, func(a, b *workerInfo) int { return len(b.URL) - len(a.URL) })
	for _, w := range ws {
		name := w.Role + " " + itoa(w.idx)
		msg = strings.ReplaceAll(msg, w.URL, name)
		if u, err := url.Parse(w.URL); err == nil && u.Host != "" {
			msg = strings.ReplaceAll(msg, u.Host, name) // as a dial error names it
		}
	}
	return msg
}
