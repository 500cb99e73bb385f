package emulator

import (
	"encoding/json"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// D→P snapshot: a session seeded on a decoder is dumped from it (after the
// modelled transfer) and ingested by a prefill worker whose cache was
// flushed; the session's next prompt then hits P's cache over the
// session's prompt and output. Wrong roles, a session the decoder does not
// hold and bad bodies are refused with reasons.
func TestSnapshotDumpAndIngest(t *testing.T) {
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: engine.SessionConfig{Enabled: true}})
	snap := func(url string, body map[string]any) (int, SnapshotResponse) {
		st, b := post(t, url, body)
		var out SnapshotResponse
		json.Unmarshal(b, &out)
		return st, out
	}
	turn1 := ids(1, 3000)
	o := seed(t, p, d, "S", turn1, 50)
	// A second prefill worker that never saw the session takes the snapshot.
	p2 := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})

	if st, out := snap(p2.URL()+"/_snapshot/prepare_receive", map[string]any{"session_id": "S", "num_tokens": 3050}); st != 200 || !out.OK {
		t.Fatalf("prepare_receive: %d %+v", st, out)
	}
	if st, out := snap(p.URL()+"/_snapshot/prepare_receive", map[string]any{"session_id": "S", "num_tokens": int64(1) << 40}); st != 200 || out.OK || out.Reason != engine.ReasonNoSpace {
		t.Fatalf("prepare_receive beyond the pool: %d %+v", st, out)
	}
	st, dump := snap(d.URL()+"/_snapshot/dump", map[string]any{"session_id": "S"})
	// The session's pinned path: its prompt, the partial last block
	// included (its output becomes blocks when the next turn names them).
	if st != 200 || !dump.OK || dump.NumTokens != 3000 || len(dump.Blocks) != (3000+63)/64 || dump.TransferS <= 0 {
		t.Fatalf("dump: %d %+v", st, dump)
	}
	st, ing := snap(p2.URL()+"/_snapshot/finalize_ingest", map[string]any{"session_id": "S", "blocks": dump.Blocks})
	if st != 200 || !ing.OK || ing.NumTokens < 3000 {
		t.Fatalf("finalize_ingest: %d %+v", st, ing)
	}
	// The next turn's prefill on the new P finds the session's prompt, up
	// to its last whole block (the partial one has grown since).
	turn2 := append(append(append([]int{}, turn1...), o.OutputIDs...), ids(7, 200)...)
	body2 := pdBody(p2, "turn-2", 2, turn2, 4)
	go postQuiet(t, d.URL()+"/generate", copyBody(body2))
	st, b := post(t, p2.URL()+"/generate", copyBody(body2))
	if st != 200 {
		t.Fatalf("turn 2 on P: %d %s", st, b)
	}
	if c := decodeOut(t, b).MetaInfo.CachedTokens; c != 3000/64*64 {
		t.Fatalf("turn 2 found %d tokens in the new P's cache after the snapshot, want %d", c, 3000/64*64)
	}

	for _, c := range []struct {
		url    string
		body   map[string]any
		status int
		reason string
	}{
		{d.URL() + "/_snapshot/dump", map[string]any{"session_id": "nobody"}, 200, engine.ReasonNotResident},
		{p.URL() + "/_snapshot/dump", map[string]any{"session_id": "S"}, 400, ""},
		{d.URL() + "/_snapshot/finalize_ingest", map[string]any{"session_id": "S", "blocks": []int{1}}, 400, ""},
		{p.URL() + "/_snapshot/finalize_ingest", map[string]any{"session_id": "S"}, 400, ""},
		{p.URL() + "/_snapshot/prepare_receive", map[string]any{"num_tokens": 5}, 400, ""},
	} {
		st, out := snap(c.url, c.body)
		if st != c.status || out.Reason != c.reason || (st == 200 && out.OK) {
			t.Errorf("%s %v: %d %+v, want %d %q", c.url, c.body, st, out, c.status, c.reason)
		}
	}
}
