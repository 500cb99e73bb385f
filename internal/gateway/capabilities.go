package gateway

// Capability discovery: what each worker offers, learnt at start and on
// every health round, so that the gateway routes each request only to
// paths its workers support (docs/worker-protocol.md, docs/gateway.md).
//
// Two sources. /server_info (or the older /get_server_info) is SGLang's
// dump of its server arguments: the role (disaggregation_mode), the page
// size, and, on a decoder, disaggregation_decode_enable_radix_cache and
// (draft PR #34773) disaggregation_decode_enable_conditional_agg; a worker
// implementing the KVC contract adds kvc_protocol {version, features}.
// Then a probe of each extension path with an empty body, which no
// implementation may act on: 404 means the path does not exist (stock
// SGLang, FastAPI's 404), any other answer means it does (an empty body is
// refused 400), and no answer means nothing was learnt — the previous
// belief stays. So a 404 is never mistaken for an error, nor an error for
// a 404. A worker's protocol-level refusal of a live request corrects the
// belief between rounds (correct).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// tri is a capability as far as the gateway knows it.
type tri int8

const (
	unknown tri = iota // never learnt: nothing answered yet
	absent             // the worker does not offer it
	present            // it does
)

func (t tri) String() string {
	return [...]string{"unknown", "no", "yes"}[t]
}

// MarshalJSON shows a tri as yes, no or unknown.
func (t tri) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads yes, no or unknown back.
func (t *tri) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	switch s {
	case "yes":
		*t = present
	case "no":
		*t = absent
	case "unknown":
		*t = unknown
	default:
		return fmt.Errorf("capability %q: want yes, no or unknown", s)
	}
	return nil
}

// Capabilities is what one worker offers, as the gateway last learnt it.
type Capabilities struct {
	// From /server_info.
	Info        tri    `json:"server_info"`
	Mode        string `json:"disaggregation_mode,omitempty"` // prefill, decode or null
	PageSize    int    `json:"page_size,omitempty"`
	DecodeRadix tri    `json:"decode_radix_cache"`
	CondAgg     tri    `json:"conditional_agg"`
	KVCVersion  int    `json:"kvc_protocol_version"` // 0: none advertised
	ServeWhole  tri    `json:"serve_whole"`          // prefill: kvc_protocol feature serve_whole
	// From the probes (and live refusals).
	SessionCache tri `json:"session_cache"`   // /session_cache/admit_direct_append, lookup; direct appends
	SnapshotDump tri `json:"snapshot_dump"`   // decode: /_snapshot/dump
	SnapshotSink tri `json:"snapshot_ingest"` // prefill: prepare_receive, finalize_ingest, release
	// Error is the last round's failure to learn something ("" when it
	// learnt all it asked).
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"discovered_at,omitzero"`
}

// The KVC paths on a decoder, best first (kvc/decoderpath.go,
// docs/gateway.md).
const (
	PathExtension    = kvc.PathExtension
	PathLocalPrefill = kvc.PathLocalPrefill
	PathDeltaPD      = kvc.PathDeltaPD
	PathPlainPD      = kvc.PathPlainPD
)

// KVCPath is the path a KVC request to this decoder takes, chosen as the
// simulator chooses it (kvc.DecoderCaps.Path). Unknown capabilities count
// as offered for the session cache — its admission RPC is itself a probe,
// and its 404 corrects the belief — and as absent for the upstream flags.
func (c Capabilities) KVCPath() string {
	return kvc.DecoderCaps{SessionCache: c.SessionCache != absent, DecodeRadix: c.DecodeRadix == present, CondAgg: c.CondAgg == present}.Path()
}

// capField is one capability under the name the startup line,
// /admin/workers and /metrics all give it.
type capField struct {
	name string
	t    tri
}

// fields lists the capabilities that apply to a worker of role, in a
// fixed order. Discovery asks a decoder only for the decode modes and the
// decoder's extension paths, a prefill worker only for the whole-request
// and snapshot-ingest features, and a colocated worker for none (it has
// no PD legs and the KVC paths run on decoders), so a capability outside
// its role's list is not "unknown" but not applicable, and is shown
// nowhere.
func (c Capabilities) fields(role string) []capField {
	switch role {
	case roleDecode:
		return []capField{{"decode_radix_cache", c.DecodeRadix}, {"conditional_agg", c.CondAgg},
			{"session_cache", c.SessionCache}, {"snapshot_dump", c.SnapshotDump}}
	case rolePrefill:
		return []capField{{"serve_whole", c.ServeWhole}, {"snapshot_ingest", c.SnapshotSink}}
	}
	return nil
}

// Summary is the capabilities of a worker of role in one line (startup,
// logs): those its role has that it offers (yes) or that were not yet
// learnt (unknown), or "stock" when it offers none of them.
func (c Capabilities) Summary(role string) string {
	var on []string
	for _, f := range c.fields(role) {
		if f.t != absent {
			on = append(on, f.name+"="+f.t.String())
		}
	}
	if len(on) == 0 {
		on = []string{"stock"}
	}
	s := fmt.Sprintf("mode=%s page_size=%d %s", orDash(c.Mode), c.PageSize, strings.Join(on, ","))
	if c.KVCVersion > 0 {
		s += fmt.Sprintf(" kvc_protocol=%d", c.KVCVersion)
	}
	return s
}

// forRole is the capabilities as /admin/workers shows a worker of role:
// what server_info said, and the capabilities its role has (yes, no or
// unknown), without those that do not apply to it.
func (c Capabilities) forRole(role string) map[string]any {
	m := map[string]any{"server_info": c.Info, "kvc_protocol_version": c.KVCVersion}
	if c.Mode != "" {
		m["disaggregation_mode"] = c.Mode
	}
	if c.PageSize != 0 {
		m["page_size"] = c.PageSize
	}
	if c.Error != "" {
		m["error"] = c.Error
	}
	if !c.At.IsZero() {
		m["discovered_at"] = c.At
	}
	for _, f := range c.fields(role) {
		m[f.name] = f.t
	}
	return m
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// serverInfo is what discovery reads of /server_info.
type serverInfo struct {
	Mode        string `json:"disaggregation_mode"`
	PageSize    int    `json:"page_size"`
	DecodeRadix *bool  `json:"disaggregation_decode_enable_radix_cache"`
	CondAgg     *bool  `json:"disaggregation_decode_enable_conditional_agg"`
	KVC         *struct {
		Version  int      `json:"version"`
		Features []string `json:"features"`
	} `json:"kvc_protocol"`
}

// discover learns one worker's capabilities; prev is the last belief,
// kept for what this round could not learn.
func (s *Server) discover(ctx context.Context, base, role string, prev Capabilities) Capabilities {
	c := prev
	c.At = time.Now()
	var errs []string
	info, status, err := s.getInfo(ctx, base)
	switch {
	case err != nil:
		errs = append(errs, err.Error())
	case status != http.StatusOK:
		errs = append(errs, fmt.Sprintf("/server_info answered %d", status))
	default:
		c.Info, c.Mode, c.PageSize = present, info.Mode, info.PageSize
		c.DecodeRadix, c.CondAgg, c.KVCVersion, c.ServeWhole = fromBool(info.DecodeRadix), fromBool(info.CondAgg), 0, absent
		if info.KVC != nil {
			c.KVCVersion = info.KVC.Version
			if slices.Contains(info.KVC.Features, "serve_whole") {
				c.ServeWhole = present
			}
		}
	}
	probe := func(path string, t *tri) {
		switch got, err := s.probe(ctx, base+path); {
		case err != nil:
			errs = append(errs, path+": "+err.Error())
		default:
			*t = got
		}
	}
	switch role {
	case roleDecode:
		probe("/session_cache/lookup", &c.SessionCache)
		probe("/_snapshot/dump", &c.SnapshotDump)
	case rolePrefill:
		probe("/_snapshot/release", &c.SnapshotSink)
	}
	c.Error = strings.Join(errs, "; ")
	return c
}

func fromBool(b *bool) tri {
	if b != nil && *b {
		return present
	}
	return absent // SGLang without the flag, or too old to know it
}

// getInfo reads /server_info, or /get_server_info where the first is 404
// (older SGLang).
func (s *Server) getInfo(ctx context.Context, base string) (serverInfo, int, error) {
	var info serverInfo
	status := 0
	for _, p := range []string{"/server_info", "/get_server_info"} {
		resp, err := s.get(ctx, base+p)
		if err != nil {
			return info, 0, err
		}
		status = resp.StatusCode
		if status == http.StatusOK {
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info)
			resp.Body.Close()
			if err != nil {
				return info, 0, fmt.Errorf("%s: %v", p, err)
			}
			return info, status, nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if status != http.StatusNotFound {
			break
		}
	}
	return info, status, nil
}

// probe POSTs an empty JSON object to an extension path: 404 is absent,
// any other status present; no answer is an error.
func (s *Server) probe(ctx context.Context, u string) (tri, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Health.timeout())
	defer cancel()
	resp, err := s.send(cctx, u, map[string]any{})
	if err != nil {
		return unknown, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return absent, nil
	case resp.StatusCode >= 500:
		return unknown, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return present, nil
}

func (s *Server) get(ctx context.Context, u string) (*http.Response, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Health.timeout())
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Discover learns every worker's capabilities now (all at once) and
// returns them by URL.
func (s *Server) Discover(ctx context.Context) map[string]Capabilities {
	var ws []*workerInfo
	var prev []Capabilities
	s.locked(func() {
		for _, w := range s.workers {
			if !w.removed {
				ws, prev = append(ws, w), append(prev, w.caps)
			}
		}
	})
	got := make([]Capabilities, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = s.discover(ctx, w.URL, w.Role, prev[i])
		}()
	}
	wg.Wait()
	out := map[string]Capabilities{}
	s.locked(func() {
		for i, w := range ws {
			w.caps = got[i]
			out[w.URL] = got[i]
		}
	})
	return out
}

// WorkerCapabilities is one worker's capabilities and, on a decoder of a
// kvcache-centric gateway, the KVC path its requests take.
type WorkerCapabilities struct {
	URL          string
	Role         string
	Capabilities Capabilities
	KVCPath      string // "" where none applies
}

// Capabilities lists every worker's last-learnt capabilities, prefill
// workers first, in pool order.
func (s *Server) Capabilities() []WorkerCapabilities {
	var out []WorkerCapabilities
	s.locked(func() {
		for _, w := range s.workers {
			if !w.removed {
				out = append(out, WorkerCapabilities{URL: w.URL, Role: w.Role, Capabilities: w.caps, KVCPath: s.kvcPath(w)})
			}
		}
	})
	order := map[string]int{rolePrefill: 0, roleDecode: 1, roleColo: 2}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Role] < order[out[j].Role] })
	return out
}

// kvcPath is the KVC path of a decoder (held lock); "" for other workers
// and other mechanisms.
func (s *Server) kvcPath(w *workerInfo) string {
	if w.Role != roleDecode || !s.kvc() {
		return ""
	}
	return w.caps.KVCPath()
}

// decoderCaps is decoder d's capabilities (held lock).
func (s *Server) decoderCaps(d int) Capabilities { return s.capsOf(roleDecode, d) }

// capsOf is the capabilities of worker i of a role's pool (held lock).
func (s *Server) capsOf(role string, i int) Capabilities {
	for _, w := range s.workers {
		if w.Role == role && w.idx == i && !w.removed {
			return w.caps
		}
	}
	return Capabilities{}
}

// correctPrefill records prefill worker p's refusal to serve a request
// whole (held lock).
func (s *Server) correctPrefill(p int) {
	for _, w := range s.workers {
		if w.Role == rolePrefill && w.idx == p && !w.removed && w.caps.ServeWhole != absent {
			w.caps.ServeWhole = absent
			s.log.Warn("worker capability corrected by its refusal", "worker", w.URL, "serve_whole", "no")
		}
	}
}

// correct records a decoder's protocol-level refusal of a live request:
// it does not offer what was asked of it (held lock).
func (s *Server) correct(d int, edit func(*Capabilities)) {
	for _, w := range s.workers {
		if w.Role == roleDecode && w.idx == d && !w.removed {
			before := w.caps.KVCPath()
			edit(&w.caps)
			if after := w.caps.KVCPath(); after != before {
				s.log.Warn("worker capability corrected by its refusal", "worker", w.URL, "kvc_path_was", before, "kvc_path", after)
			}
		}
	}
}

var (
	descCapability = prometheus.NewDesc("pdhybrid_worker_capability", "1 if the worker offers the capability, 0 if it does not, as discovery last learnt it (server_info, and probes of the extension paths that tell a 404 from an error); absent while unknown and for a capability the role does not have. Capabilities: decode_radix_cache, conditional_agg, session_cache, snapshot_dump (decode); serve_whole, snapshot_ingest (prefill).", []string{"role", "worker", "capability"}, nil)
	descKVCPath    = prometheus.NewDesc("pdhybrid_worker_kvc_path", "1 for the KVC path a kvcache-centric gateway's requests take on the decoder: extension, local-prefill, delta-pd or plain-pd (docs/gateway.md).", []string{"worker", "path"}, nil)
)

// capsCollector exposes the capabilities at scrape time.
type capsCollector struct{ s *Server }

func (capsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCapability
	ch <- descKVCPath
}

func (c capsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.s.Capabilities() {
		for _, f := range w.Capabilities.fields(w.Role) {
			if f.t == unknown {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descCapability, prometheus.GaugeValue, b2f(f.t == present), w.Role, w.URL, f.name)
		}
		if w.KVCPath != "" {
			ch <- prometheus.MustNewConstMetric(descKVCPath, prometheus.GaugeValue, 1, w.URL, w.KVCPath)
		}
	}
}
