package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// An SSE event's data lines are joined with a newline (the WHATWG event
// stream rules): a batch split at a field boundary reads as one JSON
// object, while a number split across two lines is two tokens, so the
// batch is garbled (not seq 12). The stream's two batches: seq 1 split
// between its fields (applied), then `"seq":1` / `2,…` (dropped garbled).
func TestKVEventsDataLinesJoinedWithNewline(t *testing.T) {
	split := "data: {\"seq\":1,\ndata: \"ts\":1,\"events\":[{\"type\":\"SessionEvicted\",\"session_id\":\"a\",\"tier\":\"none\"}]}\n\n" +
		"data: {\"seq\":1\ndata: 2,\"ts\":1,\"events\":[]}\n\n"
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{split})
	d0 := g.cfg.Decode[0]
	waitFor(t, func() bool { return metricOf(g.kvm.dropped.WithLabelValues(d0, kvDropGarbled)) == 1 }, "the split number dropped as garbled")
	if n := metricOf(g.kvm.received.WithLabelValues(d0, kvEvSessionEvicted)); n != 1 {
		t.Fatalf("the batch split between fields: %v events applied, want 1", n)
	}
	var last int64
	g.locked(func() { last = g.kvOrder.read[0] })
	if last != 1 {
		t.Fatalf("the stream's last applied batch is %d, want 1 (a split number is not seq 12)", last)
	}
}

// A decoder sending garbled batches is logged at its first and every
// 100th after (so_far 1, 101, 201, …), and every one is counted.
func TestKVEventsGarbledLogSampled(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""})
	d0 := g.cfg.Decode[0]
	r := &kvEventReader{s: g, d: 0, worker: d0}
	for range 201 {
		r.batch([]byte("not json"))
	}
	if n := metricOf(g.kvm.dropped.WithLabelValues(d0, kvDropGarbled)); n != 201 {
		t.Fatalf("garbled counted %v, want 201", n)
	}
	var got []int64
	for _, l := range strings.Split(log.String(), "\n") {
		var e struct {
			Garbled string `json:"garbled"`
			SoFar   int64  `json:"so_far"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Garbled != "" {
			got = append(got, e.SoFar)
		}
	}
	if want := []int64{1, 101, 201}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("garbled batches logged at %v, want %v:\n%s", got, want, log.String())
	}
}

// The lag is the gateway's clock less the batch's ts, never below 0: a
// batch stamped an hour ahead (a worker's clock ahead of the gateway's)
// is observed as 0 exactly, one stamped at ts 1 (1970) as the seconds
// since, which are more than 1.7e9 (it is past 2023) and fewer than 1e10.
func TestKVEventsLagValue(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""}, []string{""})
	d0, d1 := g.cfg.Decode[0], g.cfg.Decode[1]
	ahead := time.Now().Unix() + 3600
	(&kvEventReader{s: g, d: 0, worker: d0}).batch([]byte(fmt.Sprintf(`{"seq":1,"ts":%d,"events":[]}`, ahead)))
	(&kvEventReader{s: g, d: 1, worker: d1}).batch([]byte(`{"seq":1,"ts":1,"events":[]}`))
	if n, sum := lagOf(t, g, d0); n != 1 || sum != 0 {
		t.Fatalf("a batch stamped an hour ahead: %d observations summing %v s, want 1 of 0 s", n, sum)
	}
	if n, sum := lagOf(t, g, d1); n != 1 || !(sum > 1.7e9 && sum < 1e10) {
		t.Fatalf("a batch stamped at ts 1: %d observations summing %v s, want 1 of the seconds since 1970", n, sum)
	}
}

// lagOf is decoder w's lag histogram: its count and sum.
func lagOf(t *testing.T, g *Server, w string) (uint64, float64) {
	t.Helper()
	var d dto.Metric
	if err := g.kvm.lag.WithLabelValues(w).(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	h := d.GetHistogram()
	if math.IsNaN(h.GetSampleSum()) {
		t.Fatal("lag sum is NaN")
	}
	return h.GetSampleCount(), h.GetSampleSum()
}

// A decoder removed through the admin API no longer moves the belief: its
// reports are read but not applied (nor counted received), while another
// decoder's are. d0 is removed; the prefill worker shares its index 0 and
// d1 is not removed, so a lookup that matched either would apply d0's.
func TestKVEventsRemovedDecoderIgnored(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""}, []string{""})
	d0, d1 := g.cfg.Decode[0], g.cfg.Decode[1]
	g.locked(func() {
		if code, msg := g.changeWorker(g.findWorker(d0), "remove"); code != 200 {
			t.Fatalf("remove d0: %d %s", code, msg)
		}
		g.disp.Resident("b", 1, []uint64{3, 4}, 128)
	})
	ev := func(s string) []byte {
		return []byte(fmt.Sprintf(`{"seq":1,"ts":1,"events":[{"type":"SessionEvicted","session_id":%q,"tier":"none"}]}`, s))
	}
	(&kvEventReader{s: g, d: 0, worker: d0}).batch(ev("a"))
	(&kvEventReader{s: g, d: 1, worker: d1}).batch(ev("b"))
	if n := metricOf(g.kvm.received.WithLabelValues(d0, kvEvSessionEvicted)); n != 0 {
		t.Fatalf("the removed d0's report applied (%v counted), want none", n)
	}
	var pinned bool
	g.locked(func() { pinned = g.disp.Pinned("b") })
	if n := metricOf(g.kvm.received.WithLabelValues(d1, kvEvSessionEvicted)); n != 1 || pinned {
		t.Fatalf("d1's report: %v counted, b pinned %v; want 1 applied, b forgotten", n, pinned)
	}
}

// One decoder keeps at most kvAdmittedMax admission entries: the
// 65,537th session is not kept (its late reports are applied, as before
// revision 1.3), a session already kept is still updated, and another
// decoder's entries are its own.
func TestKVAdmittedCap(t *testing.T) {
	var o kvEventOrder
	for i := range kvAdmittedMax {
		o.admit(0, fmt.Sprint("s", i), 5)
	}
	o.admit(0, "late", 5)
	o.admit(0, "s0", 7)
	o.admit(1, "late", 5)
	if n := len(o.admitted[0]); n != kvAdmittedMax {
		t.Fatalf("d0 keeps %d entries, want %d", n, kvAdmittedMax)
	}
	if o.superseded(0, "late", 4) {
		t.Fatal("the session past the cap was kept")
	}
	if !o.superseded(0, "s0", 7) || o.superseded(0, "s0", 8) {
		t.Fatalf("s0's entry %d, want updated to 7", o.admitted[0]["s0"])
	}
	if !o.superseded(1, "late", 5) {
		t.Fatal("d1's entry was not kept")
	}
}
