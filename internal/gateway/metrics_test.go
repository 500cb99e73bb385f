package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
)

// testConfig is the gateway() helper's configuration, for tests that set
// more of it.
func testConfig(mech kvc.Mechanism, prefill, decode []*emulator.Server) Config {
	cfg := Config{Dispatch: kvc.Defaults(mech)}
	for _, p := range prefill {
		cfg.Prefill = append(cfg.Prefill, Prefill{URL: p.URL(), BootstrapPort: p.BootstrapPort()})
	}
	for _, d := range decode {
		if mech == kvc.MechColo {
			cfg.Colo = append(cfg.Colo, d.URL())
		} else {
			cfg.Decode = append(cfg.Decode, d.URL())
		}
	}
	return cfg
}

// start runs a gateway of cfg on loopback once its workers answer /health
// (serve).
func start(t *testing.T, cfg Config) (*httptest.Server, *Server) {
	t.Helper()
	var urls []string
	for _, p := range cfg.Prefill {
		urls = append(urls, p.URL)
	}
	urls = append(append(urls, cfg.Decode...), cfg.Colo...)
	emulatortest.WaitHealthy(t, urls...)
	return serve(t, cfg)
}

// serve runs a gateway of cfg on loopback (its HTTPServer, so the header
// cap applies), stopped at the end of the test, without waiting for its
// workers: for tests whose workers are stand-ins that stall or fail.
func serve(t *testing.T, cfg Config) (*httptest.Server, *Server) {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = io.Discard // the gateway's log lines: tests that read them set their own
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts := httptest.NewUnstartedServer(g.Handler())
	ts.Config = g.HTTPServer()
	if g.direct != nil {
		ts.Listener = directListener{ts.Listener} // as Serve listens
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, g
}

// scrape reads the gateway's /metrics with Prometheus' own parser.
func scrape(t testing.TB, gw string) map[string]*dto.MetricFamily {
	t.Helper()
	return promtest.Scrape(t, gw+"/metrics")
}

// sample and value are promtest's: the family's series whose labels
// include want, and its counter's or gauge's value (0 when absent).
var sample, value = promtest.Sample, promtest.Value

func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		if m.Counter != nil {
			total += m.Counter.GetValue()
		} else if m.Gauge != nil {
			total += m.Gauge.GetValue()
		}
	}
	return total
}

func histCount(fams map[string]*dto.MetricFamily, name, mode string) uint64 {
	m, ok := sample(fams, name, map[string]string{"mode": mode})
	if !ok {
		return 0
	}
	return m.Histogram.GetSampleCount()
}

// A bounded live run through the KVC mechanism (1 P, 2 session-keeping
// D; 3 sessions of 3 turns, the third streamed): every count /metrics
// reports agrees with the run's own answers — requests per mode, e2e per
// completed request, TTFT and TPOT per completed stream, admission
// replies per direct append and seed — and the worker gauges show the
// workers' polled loads and the sessions they hold.
func TestMetricsAgreeWithTheRun(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	cfg := testConfig(kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	cfg.LoadPoll = 50 * time.Millisecond
	gw, g := start(t, cfg)

	modes, streamed := map[string]int{}, map[string]int{}
	for s := range 3 {
		sess := string(rune('a' + s))
		prompt := ids(1000*(s+1)*7, 600)
		for turn := 1; turn <= 3; turn++ {
			body := map[string]any{"input_ids": prompt, "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 8}}
			if turn == 3 {
				body["stream"] = true
			}
			a := generate(t, gw.URL, body)
			if a.status != http.StatusOK || len(a.outputIDs) != 8 {
				t.Fatalf("session %s turn %d: %+v", sess, turn, a)
			}
			modes[a.mode]++
			if turn == 3 {
				streamed[a.mode]++
			}
			prompt = append(append(prompt, a.outputIDs...), ids(90000+100*turn, 100)...)
		}
	}
	if modes["pd-router-turn1-seed"] != 3 || modes["kvcache-direct-to-d-session"] != 6 {
		t.Fatalf("modes %v: want 3 seeds and 6 direct appends", modes)
	}

	fams := scrape(t, gw.URL)
	total := 0
	for mode, n := range modes {
		got := value(fams, "pdhybrid_requests_total", map[string]string{"mechanism": "kvcache-centric", "mode": mode, "outcome": "ok"})
		if got != float64(n) {
			t.Errorf("pdhybrid_requests_total{mode=%q,outcome=ok} = %v, the run answered %d", mode, got, n)
		}
		if c := histCount(fams, "pdhybrid_e2e_request_latency_seconds", mode); c != uint64(n) {
			t.Errorf("e2e histogram count for %s = %d, want %d completed", mode, c, n)
		}
		if c := histCount(fams, "pdhybrid_time_to_first_token_seconds", mode); c != uint64(streamed[mode]) {
			t.Errorf("TTFT histogram count for %s = %d, want %d streamed", mode, c, streamed[mode])
		}
		if c := histCount(fams, "pdhybrid_time_per_output_token_seconds", mode); c != uint64(streamed[mode]) {
			t.Errorf("TPOT histogram count for %s = %d, want %d streamed", mode, c, streamed[mode])
		}
		total += n
	}
	if got := sum(fams, "pdhybrid_requests_total"); got != float64(total) {
		t.Errorf("pdhybrid_requests_total sums to %v, the run sent %d", got, total)
	}
	if got := sum(fams, "pdhybrid_admissions_total"); got != 9 {
		t.Errorf("%v admission replies counted, want 9 (one per request)", got)
	}
	if got := value(fams, "pdhybrid_admissions_total", map[string]string{"result": "direct"}); got != 6 {
		t.Errorf("%v direct admissions, want 6", got)
	}
	if got := sum(fams, "pdhybrid_dp_syncs_total"); got != 0 {
		t.Errorf("D→P syncs %v, want 0 (--d-to-p-sync off)", got)
	}
	if _, ok := sample(fams, "pdhybrid_dp_syncs_total", nil); !ok {
		t.Error("pdhybrid_dp_syncs_total not exposed")
	}
	if got := sum(fams, "pdhybrid_worker_sessions"); got != 3 {
		t.Errorf("%v sessions bound to decoders, want 3", got)
	}
	if got := sum(fams, "pdhybrid_worker_inflight_requests"); got != 0 {
		t.Errorf("%v requests in flight after the run", got)
	}
	// The poller reports every worker up, and the decoders' KV holds the
	// sessions (used tokens > 0 on at least one).
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, gw.URL)
		if sum(fams, "pdhybrid_worker_up") == 3 && sum(fams, "pdhybrid_worker_kv_used_tokens") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker load gauges after 5 s: up %v, kv used %v", sum(fams, "pdhybrid_worker_up"), sum(fams, "pdhybrid_worker_kv_used_tokens"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Names, units and help follow Prometheus' conventions (promlint).
	if problems, err := promlint.NewWithMetricFamilies(gathered(t, g)).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
	for _, name := range []string{"pdhybrid_worker_running_requests", "pdhybrid_worker_waiting_requests", "pdhybrid_worker_kv_usage_ratio", "pdhybrid_worker_breaker_open", "pdhybrid_worker_draining"} {
		if _, ok := sample(fams, name, map[string]string{"worker": d0.URL()}); !ok {
			t.Errorf("%s has no series for %s", name, d0.URL())
		}
	}
}

// residentSessions is the decoder's own count of the sessions it holds,
// read from its /v1/loads (the emulator's num_resident_sessions).
func residentSessions(t *testing.T, d *emulator.Server) float64 {
	t.Helper()
	resp, err := http.Get(d.URL() + "/v1/loads?include=core")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Loads []struct {
			Sessions *float64 `json:"num_resident_sessions"`
		} `json:"loads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Loads) != 1 || v.Loads[0].Sessions == nil {
		t.Fatalf("%s /v1/loads: %v %+v, want one load with num_resident_sessions", d.URL(), err, v)
	}
	return *v.Loads[0].Sessions
}

// After KVC turns through the gateway, the sessions each decoder reports
// holding reach /metrics as pdhybrid_worker_reported_sessions, equal to
// what the decoder's own /v1/loads says, beside the gateway's belief
// (pdhybrid_worker_sessions), which agrees here since nothing was evicted;
// the prefill worker, which reports no sessions, has no such series.
func TestMetricsReportedSessions(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	cfg := testConfig(kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	cfg.LoadPoll = 50 * time.Millisecond
	gw, _ := start(t, cfg)
	for s := range 4 {
		sess := string(rune('a' + s))
		prompt := ids(5000*(s+1), 400)
		for turn := 1; turn <= 2; turn++ {
			a := generate(t, gw.URL, map[string]any{"input_ids": prompt, "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 6}})
			if a.status != http.StatusOK {
				t.Fatalf("session %s turn %d: %+v", sess, turn, a)
			}
			prompt = append(append(prompt, a.outputIDs...), ids(70000+100*turn, 80)...)
		}
	}
	own := map[string]float64{d0.URL(): residentSessions(t, d0), d1.URL(): residentSessions(t, d1)}
	t.Logf("resident sessions by decoder: %v", own)
	if own[d0.URL()]+own[d1.URL()] != 4 {
		t.Fatalf("the decoders report %v resident sessions, want the run's 4 in all", own)
	}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, gw.URL)
		agree := true
		for u, n := range own {
			m, ok := sample(fams, "pdhybrid_worker_reported_sessions", map[string]string{"role": "decode", "worker": u})
			agree = agree && ok && m.Gauge.GetValue() == n
		}
		if agree {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pdhybrid_worker_reported_sessions after 5 s: %v, the decoders say %v", fams["pdhybrid_worker_reported_sessions"].GetMetric(), own)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for u, n := range own {
		if got := value(fams, "pdhybrid_worker_sessions", map[string]string{"worker": u}); got != n {
			t.Errorf("the gateway believes %v sessions on %s, the decoder reports %v", got, u, n)
		}
	}
	if _, ok := sample(fams, "pdhybrid_worker_reported_sessions", map[string]string{"worker": p.URL()}); ok {
		t.Errorf("the prefill worker %s has a reported-sessions series; it reports none", p.URL())
	}
}

// Failures are counted by what happened: a dead decoder's request is
// unavailable (no mode) and its prefill leg aborted as the other leg; a
// failing colocated worker's requests are retried and still ok.
func TestMetricsFailures(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	cfg := testConfig(kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d})
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	d.Kill()
	if a := generate(t, gw.URL, map[string]any{"input_ids": ids(1, 100), "sampling_params": map[string]any{"max_new_tokens": 4}}); a.status != http.StatusServiceUnavailable {
		t.Fatalf("dead decoder: %+v", a)
	}
	fams := scrape(t, gw.URL)
	if got := value(fams, "pdhybrid_requests_total", map[string]string{"mode": "none", "outcome": "unavailable"}); got != 1 {
		t.Errorf("unavailable requests %v, want 1", got)
	}
	// The decoder could not be reached: the abort went to the prefill
	// worker, and is counted against it.
	if got := value(fams, "pdhybrid_aborts_total", map[string]string{"reason": "other_leg", "worker": p.URL()}); got != 1 {
		t.Errorf("other-leg aborts to %s %v, want 1", p.URL(), got)
	}
	if got := sum(fams, "pdhybrid_aborts_total"); got != 1 {
		t.Errorf("aborts sum to %v, want the one to the prefill worker", got)
	}
	for _, w := range []string{p.URL(), d.URL()} {
		for _, r := range []string{abortOtherLeg, abortRetry, abortDisconnect} {
			if _, ok := sample(fams, "pdhybrid_aborts_total", map[string]string{"reason": r, "worker": w}); !ok {
				t.Errorf("pdhybrid_aborts_total{reason=%q,worker=%q} not registered", r, w)
			}
		}
	}

	bad := workerWith(t, engine.RoleColocated, emulator.Faults{ErrorRate: 1, Seed: 1})
	good := worker(t, engine.RoleColocated, false)
	cfg = testConfig(kvc.MechColo, nil, []*emulator.Server{bad, good})
	cfg.LoadPoll = -1
	gwc, _ := start(t, cfg)
	for i := range 4 {
		if a := generate(t, gwc.URL, map[string]any{"input_ids": ids(100*i, 200), "sampling_params": map[string]any{"max_new_tokens": 4}}); a.status != http.StatusOK {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
	fams = scrape(t, gwc.URL)
	if got := value(fams, "pdhybrid_requests_total", map[string]string{"mode": "dp-colo-router", "outcome": "ok"}); got != 4 {
		t.Errorf("ok colocated requests %v, want 4", got)
	}
	if got := value(fams, "pdhybrid_retries_total", map[string]string{"worker": bad.URL()}); got < 1 || got > 4 {
		t.Errorf("retries caused by %s %v, want 1 to 4 (each request at most once on the failing worker, at least one there)", bad.URL(), got)
	}
	if got, ok := sample(fams, "pdhybrid_retries_total", map[string]string{"worker": good.URL()}); !ok || got.Counter.GetValue() != 0 {
		t.Errorf("retries caused by the good worker %s: %v (registered %v), want 0", good.URL(), got, ok)
	}
}

// A client that leaves mid-stream is counted as a disconnect, not ok, and
// the abort sent to its worker is counted against that worker.
func TestMetricsClientDisconnect(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	resp := post(t, gw.URL+"/generate", map[string]any{"input_ids": ids(5, 100), "stream": true, "sampling_params": map[string]any{"max_new_tokens": 4000}}, nil)
	firstLine(t, resp)
	resp.Body.Close()
	waitFor(t, func() bool {
		fams := scrape(t, gw.URL)
		return value(fams, "pdhybrid_requests_total", map[string]string{"mode": "dp-colo-router", "outcome": "client_disconnect"}) == 1 &&
			value(fams, "pdhybrid_aborts_total", map[string]string{"reason": abortDisconnect, "worker": c.URL()}) == 1
	}, "a client_disconnect outcome and its abort to "+c.URL())
}

// Under PD a decoder that answers 500 is retried on the other decoder:
// the retries are counted against the failing decoder, and the prefill
// leg each one abandons is aborted (reason retry) and counted against the
// prefill worker it went to.
func TestMetricsRetriesAndAbortsPerWorker(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	bad := workerWith(t, engine.RoleDecode, emulator.Faults{ErrorRate: 1, Seed: 1})
	good := worker(t, engine.RoleDecode, false)
	cfg := testConfig(kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{bad, good})
	cfg.LoadPoll = -1
	gw, _ := start(t, cfg)
	for i := range 3 {
		if a := generate(t, gw.URL, map[string]any{"input_ids": ids(1000*(i+1), 200), "sampling_params": map[string]any{"max_new_tokens": 4}}); a.status != http.StatusOK || a.worker != good.URL() {
			t.Fatalf("request %d: %+v, want it answered by %s", i, a, good.URL())
		}
	}
	fams := scrape(t, gw.URL)
	retries := value(fams, "pdhybrid_retries_total", map[string]string{"worker": bad.URL()})
	if retries < 1 || retries > 3 {
		t.Fatalf("retries caused by %s %v, want 1 to 3", bad.URL(), retries)
	}
	if got := sum(fams, "pdhybrid_retries_total"); got != retries {
		t.Errorf("retries sum to %v, want only the failing decoder's %v", got, retries)
	}
	if got := value(fams, "pdhybrid_aborts_total", map[string]string{"reason": abortRetry, "worker": p.URL()}); got != retries {
		t.Errorf("retry aborts to %s %v, want one per retry (%v)", p.URL(), got, retries)
	}
	for _, w := range []string{bad.URL(), good.URL()} {
		if got := value(fams, "pdhybrid_aborts_total", map[string]string{"reason": abortRetry, "worker": w}); got != 0 {
			t.Errorf("retry aborts to decoder %s %v, want 0 (the prefill leg is the one aborted)", w, got)
		}
	}
}

// post sends a JSON body with extra headers; the caller closes the answer.
func post(t *testing.T, u string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	j, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// firstLine reads an SSE answer up to its first data event.
func firstLine(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream answered %d: %s", resp.StatusCode, b)
	}
	buf := make([]byte, 1)
	var line []byte
	for !strings.HasPrefix(string(line), "data: ") || !strings.HasSuffix(string(line), "\n") {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("stream ended before its first event: %v (%q)", err, line)
		}
		line = append(line, buf[0])
		if buf[0] == '\n' && !strings.HasPrefix(string(line), "data: ") {
			line = line[:0]
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gathered(t *testing.T, g *Server) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
