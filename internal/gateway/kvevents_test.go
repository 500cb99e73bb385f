package gateway

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The parser takes the contract's batches and names the field of a bad
// one.
func TestParseKVEventBatch(t *testing.T) {
	good := `{"seq":3,"ts":1.5,"events":[{"type":"SessionEvicted","session_id":"a","tier":"host","tokens":640},{"type":"AllBlocksCleared"},{"type":"BlockStored","block_hashes":[1]}]}`
	if b, err := parseKVEventBatch([]byte(`{"seq":1,"ts":0,"events":[]}`)); err != nil || b.TS != 0 {
		t.Fatalf("ts 0 (the epoch): %+v, %v; want accepted", b, err)
	}
	b, err := parseKVEventBatch([]byte(good))
	if err != nil || b.Seq != 3 || b.TS != 1.5 || len(b.Events) != 3 || b.Events[0].SessionID != "a" || b.Events[0].Tier != "host" || b.Events[0].Tokens != 640 {
		t.Fatalf("good batch: %+v, %v", b, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`not json`, "kv event batch"},
		{`[]`, "kv event batch"},
		{`{"ts":1,"events":[]}`, "seq missing"},
		{`{"seq":0,"ts":1,"events":[]}`, "below 1"},
		{`{"seq":1,"events":[]}`, "ts missing"},
		{`{"seq":1,"ts":-1,"events":[]}`, "ts missing"},
		{`{"seq":1,"ts":1}`, "no events array"},
		{`{"seq":1,"ts":1,"events":{}}`, "events:"},
		{`{"seq":1,"ts":1,"events":[{}]}`, "event 0: no type"},
		{`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","tier":"none"}]}`, "without session_id"},
		{`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":"a"}]}`, `tier ""`},
		{`{"seq":2,"ts":1,"events":[{"type":"AllBlocksCleared"},{"type":"SessionEvicted","session_id":"a","tier":"disk"}]}`, `seq 2: event 1: tier "disk", want host, storage or none`},
	} {
		if _, err := parseKVEventBatch([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.in, err, tc.want)
		}
	}
}

// Whatever a worker sends, the parser answers a batch or an error, never
// panics, and a batch it accepts is one the gateway can apply: seq ≥ 1,
// a finite ts ≥ 0, and every SessionEvicted names a session and a tier.
func FuzzParseKVEventBatch(f *testing.F) {
	f.Add([]byte(`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":"a","tier":"none"}]}`))
	f.Add([]byte(`{"seq":9,"ts":0,"events":[{"type":"AllBlocksCleared"}]}`))
	f.Add([]byte(`{"seq":1,"ts":1e400,"events":[]}`))
	f.Add([]byte(`{"seq":-1}`))
	f.Add([]byte(`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":"","tier":"host"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := parseKVEventBatch(in)
		if err != nil {
			return
		}
		if b.Seq < 1 || !(b.TS >= 0) || math.IsInf(b.TS, 0) {
			t.Fatalf("accepted %q as seq %d ts %v", in, b.Seq, b.TS)
		}
		for _, e := range b.Events {
			if e.Type == "" || e.Type == kvEvSessionEvicted && (e.SessionID == "" || (e.Tier != "host" && e.Tier != "storage" && e.Tier != "none")) {
				t.Fatalf("accepted %q with event %+v", in, e)
			}
		}
	})
}

// fakeStream is a decoder that serves only a KV event stream: each
// connection gets the next script (its raw SSE text) and then stays open
// until the test ends; it records each connection's query.
type fakeStream struct {
	mu      sync.Mutex
	scripts []string
	queries []string
	done    chan struct{}
}

func (f *fakeStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != kvEventsPath {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	script := ""
	if n := len(f.queries); n <= len(f.scripts) {
		script = f.scripts[n-1]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, script)
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

func (f *fakeStream) connections() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// kvGateway is a kvcache-centric gateway with eviction reports on, over a
// stand-in prefill worker and decoders that serve only the given stream
// scripts (one per connection); its log lines go to log.
func kvGateway(t *testing.T, log *syncBuffer, scripts ...[]string) (*Server, []*fakeStream) {
	t.Helper()
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechKVC), KVEvents: true, Health: HealthConfig{Interval: -1}}
	cfg.Log = log
	p := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(p.Close)
	cfg.Prefill = []Prefill{{URL: p.URL, BootstrapPort: 1}}
	var fakes []*fakeStream
	for _, s := range scripts {
		f := &fakeStream{scripts: s, done: make(chan struct{})}
		d := httptest.NewServer(f)
		t.Cleanup(d.Close)
		t.Cleanup(func() { close(f.done) })
		cfg.Decode = append(cfg.Decode, d.URL)
		fakes = append(fakes, f)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, fakes
}

func sse(data string) string { return "data: " + data + "\n\n" }

// A report moves the belief through the simulator's entry points: a's
// pin on d0 (as a residency probe would leave it) is kept at the host
// tier by a host report, at storage by a storage one, and forgotten by a
// plain eviction; b's, on d1, by d1's flush. Each event is counted under
// its decoder and type, and the lag is observed.
func TestKVEventsMoveTheBelief(t *testing.T) {
	ev := func(seq int, tier string) string {
		return sse(fmt.Sprintf(`{"seq":%d,"ts":%d,"events":[{"type":"SessionEvicted","session_id":"a","tier":%q}]}`, seq, time.Now().Unix(), tier))
	}
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""}, []string{""})
	g.locked(func() {
		g.disp.Resident("a", 0, []uint64{1, 2}, 128)
		g.disp.Resident("b", 1, []uint64{3, 4}, 128)
	})
	d0, d1 := g.cfg.Decode[0], g.cfg.Decode[1]
	// The scripts are served per connection; feed d0's events one at a
	// time through a stream of its own.
	for i, step := range []struct{ tier, want string }{{"host", kvc.TierHost}, {"storage", kvc.TierStorage}, {"none", kvc.TierNone}} {
		r := &kvEventReader{s: g, d: 0, worker: d0, last: int64(i)}
		r.batch([]byte(strings.TrimSuffix(strings.TrimPrefix(ev(i+1, step.tier), "data: "), "\n\n")))
		var tier string
		g.locked(func() { tier = g.disp.Tier("a") })
		if tier != step.want {
			t.Fatalf("after a %s report a's tier is %q, want %q", step.tier, tier, step.want)
		}
	}
	r := &kvEventReader{s: g, d: 1, worker: d1}
	r.batch([]byte(`{"seq":1,"ts":1,"events":[{"type":"AllBlocksCleared"}]}`))
	var pinned bool
	g.locked(func() { pinned = g.disp.Pinned("b") })
	if pinned {
		t.Fatal("b is still pinned to d1 after its flush")
	}
	if n := metricOf(g.kvm.received.WithLabelValues(d0, kvEvSessionEvicted)); n != 3 {
		t.Fatalf("d0's SessionEvicted counted %v, want 3", n)
	}
	if n := metricOf(g.kvm.received.WithLabelValues(d1, kvEvAllCleared)); n != 1 {
		t.Fatalf("d1's AllBlocksCleared counted %v, want 1", n)
	}
	if n := series(g.kvm.lag); n != 2 {
		t.Fatalf("lag series %d, want one per decoder", n)
	}
}

// A lost or garbled stream degrades to the belief without reports: no
// crash, each loss logged and counted. d0's first connection sends a
// batch that is not JSON (garbled), a good one (seq 1, applied), seq 5
// (3 batches lost: a gap), then a line over the 1 MiB bound (the stream
// is cut); the gateway reconnects asking for what follows seq 5. A
// decoder that does not offer the stream (d1: 404) is counted and
// retried, and the gateway keeps answering.
func TestKVEventsLostStreamDegrades(t *testing.T) {
	good := func(seq int) string {
		return sse(fmt.Sprintf(`{"seq":%d,"ts":1,"events":[{"type":"SessionEvicted","session_id":"x","tier":"none"}]}`, seq))
	}
	first := sse(`{"seq":` /* cut short */) + good(1) + good(5) + "data: " + strings.Repeat("x", kvEventMaxLine+1) + "\n\n"
	var log syncBuffer
	g, fakes := kvGateway(t, &log, []string{first, good(6)})
	d0 := g.cfg.Decode[0]
	waitFor(t, func() bool { return len(fakes[0].connections()) >= 2 }, "reconnection")
	if q := fakes[0].connections(); q[0] != "" || q[1] != "after=5" {
		t.Fatalf("connections asked %q, want none then after=5", q)
	}
	waitFor(t, func() bool { return metricOf(g.kvm.received.WithLabelValues(d0, kvEvSessionEvicted)) == 3 }, "seq 6 applied")
	for _, c := range []struct {
		reason string
		want   float64
	}{{kvDropGarbled, 1}, {kvDropGap, 3}} {
		if n := metricOf(g.kvm.dropped.WithLabelValues(d0, c.reason)); n != c.want {
			t.Errorf("dropped %s: %v, want %v", c.reason, n, c.want)
		}
	}
	if n := metricOf(g.kvm.errs.WithLabelValues(d0, kvErrRead)); n < 1 {
		t.Errorf("stream errors (read): %v, want ≥ 1", n)
	}
	for _, want := range []string{"garbled", "gap_after", "token too long"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log.String())
		}
	}
	if metricOf(g.kvm.connected.WithLabelValues(d0)) != 1 {
		t.Error("d0's stream is not shown connected after the reconnection")
	}
	if rec := httptest.NewRecorder(); true {
		g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("/health after the lost stream: %d", rec.Code)
		}
	}
}

// A decoder without the stream (stock SGLang, or a worker started without
// --kv-events) answers 404: counted as a status error and retried with
// backoff, nothing else changes.
func TestKVEventsNotOffered(t *testing.T) {
	var log syncBuffer
	cfg := Config{Dispatch: kvc.Defaults(kvc.MechKVC), KVEvents: true, Health: HealthConfig{Interval: -1}}
	cfg.Log = &log
	stock := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(stock.Close)
	cfg.Prefill, cfg.Decode = []Prefill{{URL: stock.URL, BootstrapPort: 1}}, []string{stock.URL}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	waitFor(t, func() bool { return metricOf(g.kvm.errs.WithLabelValues(stock.URL, kvErrStatus)) >= 2 }, "second refused connection")
	if n := strings.Count(log.String(), "HTTP 404"); n != 1 {
		t.Fatalf("the log names the 404 %d times, want once (a decoder that keeps refusing is logged once):\n%s", n, log.String())
	}
}

// metricOf is a counter's or gauge's value.
func metricOf(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// series is how many series a collector has.
func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// A decoder the pool gains through the admin API is streamed too: its
// reports reach the belief under its own index.
func TestKVEventsAddedDecoder(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""})
	f := &fakeStream{scripts: []string{sse(`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":"a","tier":"none"}]}`)}, done: make(chan struct{})}
	d := httptest.NewServer(f)
	t.Cleanup(d.Close)
	t.Cleanup(func() { close(f.done) })
	g.cfg.AdminToken = token
	gw := serveGateway(g)
	t.Cleanup(gw.Close)
	if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/add", token, map[string]any{"url": d.URL, "role": "decode"}, nil); st != http.StatusCreated {
		t.Fatalf("add: %d %s", st, b)
	}
	waitFor(t, func() bool { return metricOf(g.kvm.received.WithLabelValues(d.URL, kvEvSessionEvicted)) == 1 }, "the added decoder's report")
}

// A worker's restart (its sequence back to 1) clears the gateway's belief
// about that decoder, as a flush does: the restarted worker's cache is
// empty. a's pin on d0 goes; b's on d1 stays; the reset is counted.
func TestKVEventsResetForgetsDecoder(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""}, []string{""})
	g.locked(func() {
		g.disp.Resident("a", 0, []uint64{1, 2}, 128)
		g.disp.Resident("b", 1, []uint64{3, 4}, 128)
	})
	d0 := g.cfg.Decode[0]
	r := &kvEventReader{s: g, d: 0, worker: d0, last: 7}
	r.batch([]byte(`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":"z","tier":"none"}]}`))
	var a, b bool
	g.locked(func() { a, b = g.disp.Pinned("a"), g.disp.Pinned("b") })
	if a || !b {
		t.Fatalf("after d0's restart a pinned %v (want false), b pinned %v (want true)", a, b)
	}
	if n := metricOf(g.kvm.errs.WithLabelValues(d0, kvErrReset)); n != 1 {
		t.Fatalf("resets counted %v, want 1", n)
	}
	if r.last != 1 {
		t.Fatalf("last seq %d after the reset, want 1", r.last)
	}
	if !strings.Contains(log.String(), "reset_after") {
		t.Fatalf("the log does not name the reset:\n%s", log.String())
	}
}

// Reports are ordered against admission replies per session and decoder
// by the reply's kv_events_seq (revision 1.3): a is re-seeded on d0 by an
// admission that answered at seq 5 while the stream had read only seq 3;
// a's eviction in batch 4 (published before the answer) arrives late and
// is not applied — a stays pinned, counted superseded — while its
// eviction in batch 6 (after the answer) is. An admission the stream has
// already passed keeps nothing; d1's entries are d1's own.
func TestKVEventsOrderedAgainstAdmission(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""}, []string{""})
	d0 := g.cfg.Decode[0]
	evict := func(seq int) []byte {
		return []byte(fmt.Sprintf(`{"seq":%d,"ts":1,"events":[{"type":"SessionEvicted","session_id":"a","tier":"none"}]}`, seq))
	}
	pinned := func() (p bool) { g.locked(func() { p = g.disp.Pinned("a") }); return }
	r := &kvEventReader{s: g, d: 0, worker: d0}
	for seq := 1; seq <= 3; seq++ {
		r.batch([]byte(fmt.Sprintf(`{"seq":%d,"ts":1,"events":[]}`, seq)))
	}
	g.locked(func() { g.disp.Resident("a", 0, []uint64{1, 2}, 128) })
	g.kvAdmitted(0, "a", 5)
	g.kvAdmitted(1, "a", 9) // another decoder's reply orders only its reports
	r.batch(evict(4))
	if !pinned() {
		t.Fatal("a report older than a's admission reply forgot the re-seeded session")
	}
	g.locked(func() {
		if g.kvOrder.admitted[0]["a"] != 5 {
			t.Errorf("after batch 4 d0 keeps %v, want a at 5", g.kvOrder.admitted[0])
		}
	})
	r.batch(evict(5)) // the answer's own seq: before it too
	if !pinned() {
		t.Fatal("a report in the batch the admission reply named forgot the session")
	}
	if n := metricOf(g.kvm.dropped.WithLabelValues(d0, kvDropSuperseded)); n != 2 {
		t.Fatalf("superseded %v, want 2", n)
	}
	g.locked(func() {
		if n := len(g.kvOrder.admitted[0]); n != 0 {
			t.Errorf("d0 keeps %d entries once its stream read seq 5, want 0", n)
		}
	})
	r.batch(evict(6))
	if pinned() {
		t.Fatal("a report newer than a's admission reply was not applied")
	}
	g.locked(func() {
		if n := len(g.kvOrder.admitted[0]); n != 0 {
			t.Errorf("d0 keeps %d entries after its stream passed them, want 0", n)
		}
		if g.kvOrder.admitted[1]["a"] != 9 {
			t.Errorf("d1's entry %v, want 9", g.kvOrder.admitted[1])
		}
	})
	g.kvAdmitted(0, "a", 6) // the stream already read seq 6
	g.locked(func() {
		if _, ok := g.kvOrder.admitted[0]["a"]; ok {
			t.Error("an admission the stream has passed is kept")
		}
	})
	g.kvAdmitted(0, "", 9)
	g.kvAdmitted(0, "b", 0)
	g.locked(func() {
		if n := len(g.kvOrder.admitted[0]); n != 0 {
			t.Errorf("a reply without a session or seq kept %d entries", n)
		}
	})
}

// The sequence's edges: a first batch at any seq loses nothing, the next
// seq loses nothing, one skipped is one lost, and a seq equal to the last
// is a restart (the new start's batch, not a duplicate: a stream never
// sends one batch twice).
func TestKVEventsSequenceEdges(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""})
	d0 := g.cfg.Decode[0]
	r := &kvEventReader{s: g, d: 0, worker: d0}
	empty := func(seq int) []byte { return []byte(fmt.Sprintf(`{"seq":%d,"ts":1,"events":[]}`, seq)) }
	for _, c := range []struct {
		seq         int
		gap, resets float64
	}{{5, 0, 0}, {6, 0, 0}, {8, 1, 0}, {8, 1, 1}, {9, 1, 1}} {
		r.batch(empty(c.seq))
		gap, resets := metricOf(g.kvm.dropped.WithLabelValues(d0, kvDropGap)), metricOf(g.kvm.errs.WithLabelValues(d0, kvErrReset))
		if gap != c.gap || resets != c.resets {
			t.Fatalf("after seq %d: gap %v, resets %v; want %v, %v", c.seq, gap, resets, c.gap, c.resets)
		}
		if c.seq == 6 && strings.Contains(log.String(), "gap_after") {
			t.Fatalf("seq 5 then 6 is logged as a gap:\n%s", log.String())
		}
	}
}
