package gateway

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The poller reads an older worker's /get_load when /v1/loads is missing,
// marks a worker that stops answering down while keeping its last
// figures, and stops polling when Close returns.
func TestLoadPollerFallbackAndClose(t *testing.T) {
	var polls atomic.Int64
	var broken atomic.Bool
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health":
		case broken.Load():
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == "/get_load":
			polls.Add(1)
			w.Write([]byte(`[{"dp_rank":0,"num_reqs":5,"num_waiting_reqs":2,"num_tokens":700},{"dp_rank":1,"num_reqs":1,"num_waiting_reqs":0,"num_tokens":300}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer old.Close()
	cfg := Config{Dispatch: kvc.DispatchConfig{Mechanism: kvc.MechColo, Policy: kvc.PolicyKVAware}, Colo: []string{old.URL}}
	cfg.LoadPoll = 10 * time.Millisecond
	gw, g := start(t, cfg)
	lv := map[string]string{"role": "colo", "worker": old.URL}
	// A poll may time out on a loaded machine (10 ms): wait for a good one.
	waitFor(t, func() bool { return polls.Load() >= 2 && value(scrape(t, gw.URL), "pdhybrid_worker_up", lv) == 1 }, "two polls, the last good")
	fams := scrape(t, gw.URL)
	for name, want := range map[string]float64{"pdhybrid_worker_up": 1, "pdhybrid_worker_running_requests": 4,
		"pdhybrid_worker_waiting_requests": 2, "pdhybrid_worker_kv_used_tokens": 1000} {
		if got := value(fams, name, lv); got != want {
			t.Errorf("%s = %v, want %v (the two ranks of /get_load summed)", name, got, want)
		}
	}
	broken.Store(true)
	waitFor(t, func() bool { return value(scrape(t, gw.URL), "pdhybrid_worker_up", lv) == 0 }, "the worker marked down")
	fams = scrape(t, gw.URL)
	if got := value(fams, "pdhybrid_worker_kv_used_tokens", lv); got != 1000 {
		t.Errorf("after a failed poll kv_used_tokens = %v, want the last report's 1000", got)
	}
	if value(fams, "pdhybrid_worker_load_poll_errors_total", lv) < 1 {
		t.Error("no poll error counted")
	}
	broken.Store(false)
	waitFor(t, func() bool { return value(scrape(t, gw.URL), "pdhybrid_worker_up", lv) == 1 }, "the worker up again")
	g.Close()
	n := polls.Load()
	time.Sleep(50 * time.Millisecond) // five poll intervals
	if polls.Load() != n {
		t.Errorf("%d polls after Close returned", polls.Load()-n)
	}
}

// A decoder's reported sessions are summed over its DP ranks; a report
// without num_resident_sessions (a stock SGLang decoder) leaves no series,
// rather than a 0 that would read as "holds nothing".
func TestLoadPollerReportedSessions(t *testing.T) {
	var withSessions atomic.Bool
	withSessions.Store(true)
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/health":
		case r.URL.Path == "/v1/loads" && withSessions.Load():
			w.Write([]byte(`{"loads":[{"dp_rank":0,"num_running_reqs":1,"num_resident_sessions":3},{"dp_rank":1,"num_running_reqs":0,"num_resident_sessions":2}]}`))
		case r.URL.Path == "/v1/loads":
			w.Write([]byte(`{"loads":[{"dp_rank":0,"num_running_reqs":1},{"dp_rank":1,"num_running_reqs":0}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer d.Close()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/loads" {
			w.Write([]byte(`{"loads":[{"dp_rank":0,"num_running_reqs":0}]}`))
		}
	}))
	defer p.Close()
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechKVC), Prefill: []Prefill{{URL: p.URL, BootstrapPort: 8998}}, Decode: []string{d.URL}}
	cfg.LoadPoll = 10 * time.Millisecond
	gw, _ := start(t, cfg)
	lv := map[string]string{"role": "decode", "worker": d.URL}
	waitFor(t, func() bool { return value(scrape(t, gw.URL), "pdhybrid_worker_reported_sessions", lv) == 5 }, "5 reported sessions (3 + 2 over two ranks)")
	if _, ok := sample(scrape(t, gw.URL), "pdhybrid_worker_reported_sessions", map[string]string{"worker": p.URL}); ok {
		t.Error("a worker that reports no sessions has a reported-sessions series")
	}
	withSessions.Store(false)
	waitFor(t, func() bool {
		_, ok := sample(scrape(t, gw.URL), "pdhybrid_worker_reported_sessions", lv)
		return !ok
	}, "the series gone once the decoder stops reporting sessions")
}
