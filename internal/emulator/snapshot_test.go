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
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20, SnapshotSync: true})
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
	p2 := start(t, Config{Role: engine.RolePrefill, TimeScale: 20, SnapshotSync: true})

	if st, out := snap(p2.URL()+"/_snapshot/prepare_receive", map[string]any{"session_id": "S", "num_tokens": 3050}); st != 200 || !out.OK || out.BufCapacityBytes != engine.DefaultSnapshotBufBytes {
		t.Fatalf("prepare_receive: %d %+v", st, out)
	}
	if st, out := snap(p.URL()+"/_snapshot/prepare_receive", map[string]any{"session_id": "S", "num_tokens": int64(1) << 40}); st != 200 || out.OK || out.Reason != engine.ReasonSnapshotBufFull ||
		out.AvailableTokens == nil || *out.AvailableTokens != engine.DefaultSnapshotBufBytes/testProfile(t).Model.KVBytesPerToken() {
		t.Fatalf("prepare_receive beyond the 8 GiB buffer: %d %+v", st, out)
	}
	st, dump := snap(d.URL()+"/_snapshot/dump", map[string]any{"session_id": "S"})
	// The session's pinned path: its prompt, the partial last block
	// included (its output becomes blocks when the next turn names them).
	if st != 200 || !dump.OK || dump.NumTokens != 3000 || len(dump.Blocks) != (3000+63)/64 || dump.TransferS <= 0 ||
		dump.BytesPushed != 3000*testProfile(t).Model.KVBytesPerToken() {
		t.Fatalf("dump: %d %+v", st, dump)
	}
	st, ing := snap(p2.URL()+"/_snapshot/finalize_ingest", map[string]any{"session_id": "S", "blocks": dump.Blocks})
	if st != 200 || !ing.OK || ing.InsertedPrefixLen < 3000 {
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
		{p.URL() + "/_snapshot/finalize_ingest", map[string]any{"session_id": "S", "blocks": []int{1}}, 200, engine.ReasonNoPendingIngest},
		{p2.URL() + "/_snapshot/finalize_ingest", map[string]any{"session_id": "S", "blocks": dump.Blocks}, 200, engine.ReasonNoPendingIngest}, // ingested already
	} {
		st, out := snap(c.url, c.body)
		if st != c.status || out.Reason != c.reason || (st == 200 && out.OK) {
			t.Errorf("%s %v: %d %+v, want %d %q", c.url, c.body, st, out, c.status, c.reason)
		}
	}
}

// The prefill worker's snapshot buffer over HTTP is the engine's store with
// the configured capacity: a reservation that does not fit is refused with
// snapshot-buf-full and the tokens left; a session's second prepare_receive
// replaces its first; finalize_ingest gives the space back (so a refused
// snapshot then fits) and files the blocks in P's cache; a turn of the
// session P is asked to prefill while the snapshot is in flight, with a
// rewritten prompt, makes finalize_ingest answer stale and file nothing.
func TestSnapshotBufferOverHTTP(t *testing.T) {
	kvb := testProfile(t).Model.KVBytesPerToken()
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20, SnapshotSync: true, ServeWhole: true, SnapshotBufBytes: 4000 * kvb})
	snap := snapshotRPC(t, p.URL())
	promptA := ids(11, 3000)
	if out := snap("prepare_receive", map[string]any{"session_id": "A", "num_tokens": 3000}); !out.OK || out.BufCapacityBytes != 4000*kvb {
		t.Fatalf("prepare A: %+v", out)
	}
	out := snap("prepare_receive", map[string]any{"session_id": "B", "num_tokens": 1001})
	if out.OK || out.Reason != engine.ReasonSnapshotBufFull || out.AvailableTokens == nil || *out.AvailableTokens != 1000 {
		t.Fatalf("prepare B with 1,000 tokens left: %+v", out)
	}
	if out := snap("prepare_receive", map[string]any{"session_id": "A", "num_tokens": 3000}); !out.OK {
		t.Fatalf("prepare A again (replacing its first): %+v", out)
	}
	if out := snap("finalize_ingest", map[string]any{"session_id": "B", "blocks": []int{1}}); out.OK || out.Reason != engine.ReasonNoPendingIngest {
		t.Fatalf("finalize B, refused at prepare: %+v", out)
	}
	if out := snap("finalize_ingest", map[string]any{"session_id": "A", "blocks": BlockHashes(promptA, 64)}); !out.OK || out.InsertedPrefixLen < 2944 {
		t.Fatalf("finalize A: %+v", out)
	}
	if out := snap("prepare_receive", map[string]any{"session_id": "B", "num_tokens": 1001}); !out.OK {
		t.Fatalf("prepare B once A was ingested: %+v", out)
	}
	// A's whole blocks are in P's cache: a request over A's prompt hits them.
	body := map[string]any{"input_ids": append(append([]int{}, promptA...), ids(5, 100)...), "sampling_params": map[string]any{"max_new_tokens": 1}}
	st, b := post(t, p.URL()+"/generate", body)
	if st != 200 || decodeOut(t, b).MetaInfo.CachedTokens != 2944 {
		t.Fatalf("a request over A's prompt after the ingest: %d %s, want 2944 cached tokens", st, b)
	}

	// Stale: C's snapshot is in flight when P is asked to prefill C's turn
	// over a rewritten prompt.
	promptC := ids(21, 1000)
	if out := snap("prepare_receive", map[string]any{"session_id": "C", "num_tokens": 1000}); !out.OK {
		t.Fatalf("prepare C: %+v", out)
	}
	st, b = post(t, p.URL()+"/generate", map[string]any{"input_ids": ids(41, 500), "session_id": "C", "sampling_params": map[string]any{"max_new_tokens": 1}})
	if st != 200 {
		t.Fatalf("C's rewritten turn on P: %d %s", st, b)
	}
	if out := snap("finalize_ingest", map[string]any{"session_id": "C", "blocks": BlockHashes(promptC, 64)}); out.OK || out.Reason != engine.ReasonStale {
		t.Fatalf("finalize C after a rewritten turn: %+v", out)
	}
	st, b = post(t, p.URL()+"/generate", map[string]any{"input_ids": promptC, "sampling_params": map[string]any{"max_new_tokens": 1}})
	if st != 200 || decodeOut(t, b).MetaInfo.CachedTokens != 0 {
		t.Fatalf("a stale snapshot reached P's cache: %d %s", st, b)
	}
}

// release gives a reservation's space back (its dump failed): another
// session can take it, and the released session has nothing to ingest.
func TestSnapshotRelease(t *testing.T) {
	kvb := testProfile(t).Model.KVBytesPerToken()
	p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20, SnapshotSync: true, ServeWhole: true, SnapshotBufBytes: 4000 * kvb})
	snap := snapshotRPC(t, p.URL())
	if out := snap("prepare_receive", map[string]any{"session_id": "A", "num_tokens": 3000}); !out.OK {
		t.Fatalf("prepare A: %+v", out)
	}
	if out := snap("prepare_receive", map[string]any{"session_id": "B", "num_tokens": 3000}); out.OK {
		t.Fatalf("prepare B while A holds 3,000 of 4,000 tokens: %+v", out)
	}
	if out := snap("release", map[string]any{"session_id": "A"}); !out.OK {
		t.Fatalf("release A: %+v", out)
	}
	if out := snap("release", map[string]any{"session_id": "A"}); out.OK || out.Reason != engine.ReasonNoPendingIngest {
		t.Fatalf("release A twice: %+v", out)
	}
	if out := snap("finalize_ingest", map[string]any{"session_id": "A", "blocks": []int{1}}); out.OK || out.Reason != engine.ReasonNoPendingIngest {
		t.Fatalf("finalize A after its release: %+v", out)
	}
	if out := snap("prepare_receive", map[string]any{"session_id": "B", "num_tokens": 3000}); !out.OK {
		t.Fatalf("prepare B once A's space came back: %+v", out)
	}
	d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20, Session: engine.SessionConfig{Enabled: true}})
	if st, b := post(t, d.URL()+"/_snapshot/release", map[string]any{"session_id": "B"}); st != 400 {
		t.Fatalf("release on a KVC decoder: %d %s, want 400", st, b)
	}
	stock := start(t, Config{Role: engine.RoleDecode, TimeScale: 20})
	if st, b := post(t, stock.URL()+"/_snapshot/release", map[string]any{"session_id": "B"}); st != 404 {
		t.Fatalf("release on a stock decoder: %d %s, want 404 (no such route)", st, b)
	}
}

// snapshotRPC posts one /_snapshot/ RPC to the worker at url and decodes a
// 200 answer.
func snapshotRPC(t *testing.T, url string) func(rpc string, body map[string]any) SnapshotResponse {
	return func(rpc string, body map[string]any) SnapshotResponse {
		t.Helper()
		st, b := post(t, url+"/_snapshot/"+rpc, body)
		var out SnapshotResponse
		if err := json.Unmarshal(b, &out); err != nil || st != 200 {
			t.Fatalf("%s %v: %d %s", rpc, body, st, b)
		}
		return out
	}
}
