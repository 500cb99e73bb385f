package emulator

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// kvStream opens GET /kvc/kv_events[?after] and returns its batches as
// they come (the SSE comment that opens the stream is read first, so the
// stream is live when this returns) and the `id:` of each.
func kvStream(t *testing.T, base, query string) (<-chan KVEventBatch, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/kvc/kv_events"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("kv_events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	if l, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(l, ":") {
		cancel()
		t.Fatalf("kv_events opened with %q, %v; want an SSE comment", l, err)
	}
	out := make(chan KVEventBatch, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		id := ""
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			l = strings.TrimRight(l, "\n")
			switch {
			case strings.HasPrefix(l, "id: "):
				id = l[4:]
			case strings.HasPrefix(l, "data: "):
				var b KVEventBatch
				if json.Unmarshal([]byte(l[6:]), &b) != nil || id != strconv.FormatInt(b.Seq, 10) {
					return // garbled, or an id that is not the batch's seq: the stream "ends"
				}
				out <- b
			}
		}
	}()
	return out, cancel
}

func nextBatch(t *testing.T, c <-chan KVEventBatch) KVEventBatch {
	t.Helper()
	select {
	case b, ok := <-c:
		if !ok {
			t.Fatal("the KV event stream ended")
		}
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no KV event batch in 10 s")
	}
	return KVEventBatch{}
}

// A KVC decoder with --kv-events publishes its session evictions: S's
// 3,000 tokens seeded, B's 4,000-token seed trims S from a 6,000-token
// pool, and the stream says so (seq 1, SessionEvicted S, tier none, or
// tier host with a write_through host tier, the tokens freed). A consumer
// that reconnects after seq 0 gets the batch again (the ring), one that
// names a seq the worker never reached reads from the next batch; a flush
// publishes AllBlocksCleared. Without the flag the path is 404 and the
// feature is not advertised.
func TestKVEventsStreamEvictions(t *testing.T) {
	for _, tiers := range []bool{false, true} {
		p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
		cfg := Config{Role: engine.RoleDecode, TimeScale: 20, PoolTokens: 6000, KVEvents: true,
			Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}}
		want := "none"
		if tiers {
			cfg.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: engine.WriteThrough}
			want = "host"
		}
		d := start(t, cfg)
		events, stop := kvStream(t, d.URL(), "")
		seed(t, p, d, "S", ids(1, 3000), 8)
		seed(t, p, d, "B", ids(2, 4000), 8)
		b := nextBatch(t, events)
		if b.Seq != 1 || len(b.Events) != 1 || math.Abs(b.TS-float64(time.Now().Unix())) > 3600 {
			t.Fatalf("tiers %v: first batch %+v, want seq 1 with one event and a wall time", tiers, b)
		}
		if e := b.Events[0]; e.Type != KVEventSessionEvicted || e.SessionID != "S" || e.Tier != want || e.Tokens < 3000 {
			t.Fatalf("tiers %v: event %+v, want SessionEvicted S tier %s of ≥ 3,000 tokens", tiers, e, want)
		}
		stop()
		again, stop := kvStream(t, d.URL(), "?after=0")
		if r := nextBatch(t, again); r.Seq != 1 || r.Events[0].SessionID != "S" {
			t.Fatalf("tiers %v: replay after 0 gave %+v, want seq 1 again", tiers, r)
		}
		stop()
		later, stop := kvStream(t, d.URL(), "?after=99")
		if st, body := post(t, d.URL()+"/flush_cache", map[string]any{}); st != http.StatusOK {
			t.Fatalf("flush: %d %s", st, body)
		}
		if r := nextBatch(t, later); r.Seq != 2 || r.Events[0].Type != KVEventAllBlocksCleared {
			t.Fatalf("tiers %v: after a seq the worker never reached, %+v; want seq 2, AllBlocksCleared", tiers, r)
		}
		stop()
		// A replay of two batches in one read: each with its own id, in order.
		both, stop := kvStream(t, d.URL(), "?after=0")
		if r1, r2 := nextBatch(t, both), nextBatch(t, both); r1.Seq != 1 || r2.Seq != 2 {
			t.Fatalf("tiers %v: replay after 0 gave seq %d, %d; want 1, 2", tiers, r1.Seq, r2.Seq)
		}
		stop()
		// An admission reply names the last batch published before it
		// (revision 1.3), so the gateway can tell a report it supersedes.
		st, body := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "S", "input_ids": ids(1, 100), "max_new_tokens": 8})
		var rep AdmitResponse
		if st != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.KVEventsSeq != 2 {
			t.Fatalf("tiers %v: admission after seq 2: %d %s, want kv_events_seq 2", tiers, st, body)
		}
	}
	off := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}})
	if st, _ := get(t, off.URL()+"/kvc/kv_events"); st != http.StatusNotFound {
		t.Fatalf("without --kv-events: HTTP %d, want 404", st)
	}
	if st, b := post(t, off.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": "S", "input_ids": ids(1, 100), "max_new_tokens": 8}); st != http.StatusOK || strings.Contains(string(b), "kv_events_seq") {
		t.Fatalf("without --kv-events the admission reply is %d %s, want no kv_events_seq", st, b)
	}
	_, body := get(t, off.URL()+"/server_info")
	if strings.Contains(string(body), FeatureKVEvents) {
		t.Fatalf("without --kv-events the feature is advertised: %s", body)
	}
}

// The log's edges by hand: it keeps the last kvEventRing batches, so a
// consumer after 0 once 4,100 were published gets seq 5 on (the gap
// shows in the numbers), and a bad after is refused 400.
func TestKVEventLogRing(t *testing.T) {
	l := newKVEventLog()
	for range kvEventRing + 4 {
		l.publish(1, KVEvent{Type: KVEventSessionEvicted, SessionID: "x", Tier: "none"})
	}
	out, last, _, _ := l.since(0)
	var first KVEventBatch
	if err := json.Unmarshal(out[0], &first); err != nil || len(out) != kvEventRing || last != kvEventRing+4 || first.Seq != 5 {
		t.Fatalf("after 0: %d batches, last %d, first seq %d (%v); want %d, %d, 5", len(out), last, first.Seq, err, kvEventRing, kvEventRing+4)
	}
	if out, _, _, _ := l.since(last); len(out) != 0 {
		t.Fatalf("after the last: %d batches, want none", len(out))
	}
	if out, _, _, _ := l.since(last - 2); len(out) != 2 {
		t.Fatalf("after last − 2: %d batches, want 2", len(out))
	}
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, KVEvents: true, Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}})
	for _, q := range []string{"?after=-1", "?after=x"} {
		if st, body := get(t, d.URL()+"/kvc/kv_events"+q); st != http.StatusBadRequest || !strings.Contains(string(body), "after") {
			t.Fatalf("%s: %d %s, want 400 naming after", q, st, body)
		}
	}
	if _, err := New(Config{Role: engine.RoleDecode, Profile: testProfile(t), KVEvents: true}); err == nil {
		t.Fatal("KV events without the session cache were accepted")
	}
}

// Where a stream starts, by hand: after a seq the worker published, from
// the next; a new consumer (−1), or one naming the next seq or beyond (a
// stream of an earlier start), from the next batch published — the last
// one's seq, resolved before the stream opens.
func TestKVEventLogFrom(t *testing.T) {
	l := newKVEventLog()
	if l.lastSeq() != 0 || (*kvEventLog)(nil).lastSeq() != 0 {
		t.Fatal("an empty or absent log has a last seq")
	}
	l.publish(1)
	l.publish(1)
	for _, c := range []struct{ after, want int64 }{{-1, 2}, {0, 0}, {1, 1}, {2, 2}, {3, 2}, {99, 2}} {
		if got := l.from(c.after); got != c.want {
			t.Errorf("from(%d) = %d, want %d", c.after, got, c.want)
		}
	}
	for _, after := range []int64{-1, 3, 99} {
		if out, last, _, _ := l.since(after); len(out) != 0 || last != 2 {
			t.Errorf("since(%d): %d batches, last %d; want none, 2", after, len(out), last)
		}
	}
	if l.lastSeq() != 2 {
		t.Errorf("last seq %d, want 2", l.lastSeq())
	}
}
