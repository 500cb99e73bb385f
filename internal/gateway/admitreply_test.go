package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// storage_queue_ms (revision 1.4) is read as seconds when it is a finite
// number ≥ 0; absent or null is nothing booked; anything else is read as
// absent and is an error naming the field.
func TestStorageQueueParse(t *testing.T) {
	for _, c := range []struct {
		body string
		want float64
		bad  bool
	}{
		{`{}`, 0, false},
		{`{"storage_queue_ms":null}`, 0, false},
		{`{"storage_queue_ms":0}`, 0, false},
		{`{"storage_queue_ms":12.106}`, 0.012106, false},
		{`{"storage_queue_ms":150}`, 0.15, false},
		{`{"storage_queue_ms":1e3}`, 1, false},
		{`{"storage_queue_ms":-0.5}`, 0, true},
		{`{"storage_queue_ms":"NaN"}`, 0, true},
		{`{"storage_queue_ms":"12"}`, 0, true},
		{`{"storage_queue_ms":true}`, 0, true},
		{`{"storage_queue_ms":[1]}`, 0, true},
		{`{"storage_queue_ms":{"ms":1}}`, 0, true},
		{`{"storage_queue_ms":1e400}`, 0, true},
		{`{"storage_queue_ms":-1e400}`, 0, true},
	} {
		var w admitWire
		if err := json.Unmarshal([]byte(c.body), &w); err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		rep, err := w.reply()
		if (err != nil) != c.bad || math.Abs(rep.StorageQueueS-c.want) > 1e-12 {
			t.Errorf("%s: %v s, error %v; want %v s, bad %v", c.body, rep.StorageQueueS, err, c.want, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "storage_queue_ms") {
			t.Errorf("%s: the error %q does not name the field", c.body, err)
		}
	}
}

// The rest of a reply is read as before beside a bad storage_queue_ms: a
// wrong optional field costs only itself.
func TestAdmitReplyBesideBadQueue(t *testing.T) {
	var w admitWire
	body := `{"can_admit":true,"mode":"direct_append","cached_tokens":1280,"tier":"storage","host_tokens":0,"storage_tokens":1280,"kv_events_seq":3,"storage_queue_ms":"soon"}`
	if err := json.Unmarshal([]byte(body), &w); err != nil {
		t.Fatal(err)
	}
	rep, err := w.reply()
	if err == nil || !rep.CanAdmit || !rep.Direct || rep.CachedTokens != 1280 || rep.Tier != "storage" || rep.StorageTokens != 1280 || rep.StorageQueueS != 0 || w.KVSeq != 3 {
		t.Fatalf("got %+v (seq %d), error %v; want the reply read whole, the queue absent and an error", rep, w.KVSeq, err)
	}
}

// Whatever a decoder answers, the reply the dispatcher sees has a finite
// queue ≥ 0, never a panic; a queue read without error is the field's
// milliseconds ÷ 1000.
func FuzzAdmitReply(f *testing.F) {
	for _, s := range []string{`{}`, `{"storage_queue_ms":12.5}`, `{"storage_queue_ms":-1}`, `{"storage_queue_ms":"x"}`,
		`{"storage_queue_ms":1e308}`, `{"storage_queue_ms":null,"storage_tokens":3}`, `{"storage_queue_ms":-0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var w admitWire
		if json.Unmarshal([]byte(body), &w) != nil {
			return
		}
		rep, err := w.reply()
		q := rep.StorageQueueS
		if !(q >= 0) || math.IsInf(q, 0) {
			t.Fatalf("%q: queue %v s", body, q)
		}
		if err != nil && q != 0 {
			t.Fatalf("%q: a bad field read as %v s, want absent", body, q)
		}
		var ms float64
		if err == nil && json.Unmarshal(w.StorageQueue, &ms) == nil && math.Abs(q-ms/1000) > 1e-12*max(1, ms) {
			t.Fatalf("%q: %v s from %v ms", body, q, ms)
		}
	})
}

// A decoder's bad field is counted every time and logged at its first and
// every 100th after (so_far 1, 101, 201), per decoder and field: another
// decoder's first is logged too.
func TestBadFieldLogSampled(t *testing.T) {
	var log syncBuffer
	g, _ := kvGateway(t, &log, []string{""})
	for range 201 {
		g.noteBadField("d0", fieldStorageQueue, errors.New("bad"))
	}
	g.noteBadField("d1", fieldStorageQueue, errors.New("bad"))
	if n := metricOf(g.badFields.total.WithLabelValues("d0", fieldStorageQueue)); n != 201 {
		t.Fatalf("d0's bad fields counted %v, want 201", n)
	}
	var got []string
	for _, l := range strings.Split(log.String(), "\n") {
		var e struct {
			Worker string `json:"worker"`
			Field  string `json:"field"`
			SoFar  int64  `json:"so_far"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Field == fieldStorageQueue {
			got = append(got, fmt.Sprint(e.Worker, ":", e.SoFar))
		}
	}
	if want := "[d0:1 d0:101 d0:201 d1:1]"; fmt.Sprint(got) != want {
		t.Fatalf("logged %v, want %s:\n%s", got, want, log.String())
	}
}
