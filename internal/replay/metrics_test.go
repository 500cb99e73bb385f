package replay

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/gateway"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// The gateway's /metrics agrees with the replay's summary (what
// summary.json is written from) of the same bounded live run: per
// execution mode, the requests counted equal the summary's, the ok ones
// and the e2e and TTFT histogram counts equal the completed requests (the
// replay streams every request), and the one whole-context prompt the
// worker refuses is a worker_error.
func TestGatewayMetricsAgreeWithTheReplaySummary(t *testing.T) {
	p := emulatortest.Start(t, engine.RolePrefill, false, emulator.Faults{})
	d0, d1 := emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{}), emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{})
	cfg := gateway.Config{Dispatch: kvc.Defaults(kvc.MechKVC),
		Prefill: []gateway.Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}}, Decode: []string{d0.URL(), d1.URL()}}
	cfg.LoadPoll = -1
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ts := httptest.NewServer(g.Handler())
	defer ts.Close()
	emulatortest.WaitHealthy(t, p.URL(), d0.URL(), d1.URL())

	reqs := sessions(3, 3)
	long := make([]uint64, 262144/64)
	for i := range long {
		long[i] = uint64(900000 + i)
	}
	reqs = append(reqs, trace.Request{SessionID: "long", ChatID: 99, ParentChatID: -1, Turn: 1, InputLength: 262144, OutputLength: 4, HashIDs: long})
	var mu sync.Mutex
	col := metrics.NewCollector(metrics.SLO{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Run(ctx, Config{URL: ts.URL, BlockSize: 64, TimeScale: 20, Concurrency: 4, TimeoutS: 30}, reqs, func(r *metrics.Record) {
		mu.Lock()
		defer mu.Unlock()
		col.Add(r)
	}); err != nil {
		t.Fatal(err)
	}
	sum := col.Summary(1)
	if sum.Completed != len(reqs)-1 || sum.Failures != 1 {
		t.Fatalf("summary: %d completed, %d failed; want %d and 1", sum.Completed, sum.Failures, len(reqs)-1)
	}

	fams := promtest.Scrape(t, ts.URL+"/metrics")
	counted := map[string]float64{} // mode → requests, any outcome
	ok := map[string]float64{}
	workerErrors := 0.0
	for _, m := range fams["pdhybrid_requests_total"].GetMetric() {
		l := promtest.Labels(m)
		counted[l["mode"]] += m.GetCounter().GetValue()
		switch l["outcome"] {
		case "ok":
			ok[l["mode"]] += m.GetCounter().GetValue()
		case "worker_error":
			workerErrors += m.GetCounter().GetValue()
		}
	}
	hist := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			out[promtest.Labels(m)["mode"]] = float64(m.GetHistogram().GetSampleCount())
		}
		return out
	}
	e2e, ttft := hist("pdhybrid_e2e_request_latency_seconds"), hist("pdhybrid_time_to_first_token_seconds")
	if len(counted) != len(sum.ExecutionModes) {
		t.Errorf("/metrics modes %v, summary modes %v", counted, sum.ExecutionModes)
	}
	for mode, n := range sum.ExecutionModes {
		if counted[mode] != float64(n) {
			t.Errorf("mode %s: /metrics counted %v requests, the summary %d", mode, counted[mode], n)
		}
	}
	t.Logf("summary modes %v; /metrics ok %v, worker errors %v", sum.ExecutionModes, ok, workerErrors)
	okTotal := 0.0
	for mode, n := range ok {
		okTotal += n
		if e2e[mode] != n || ttft[mode] != n {
			t.Errorf("mode %s: %v ok, e2e count %v, TTFT count %v; want equal (every request streamed)", mode, n, e2e[mode], ttft[mode])
		}
	}
	if okTotal != float64(sum.Completed) || workerErrors != float64(sum.Failures) {
		t.Errorf("/metrics: %v ok, %v worker errors; the summary %d completed, %d failed", okTotal, workerErrors, sum.Completed, sum.Failures)
	}
}
