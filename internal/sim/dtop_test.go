package sim

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// dtopTrace is one session: a 2,048-token seed, then direct appends of
// 3,072 tokens, each turn right after the last; rewrite replaces the last
// turn's prompt with new blocks (a compaction).
func dtopTrace(turns int, rewrite bool) []trace.Request {
	var out []trace.Request
	var ids []uint64
	input := 0
	for k := 1; k <= turns; k++ {
		add := 3072
		if k == 1 {
			add = 2048
		}
		for i := 0; i < add/64; i++ {
			ids = append(ids, uint64(len(ids)+1))
		}
		input = len(ids) * 64
		r := trace.Request{SessionID: "s", ChatID: int64(k), ParentChatID: int64(k - 1), Turn: k, InputLength: input, OutputLength: 4,
			HashIDs: append([]uint64(nil), ids...)}
		if k == 1 {
			r.ParentChatID = -1
		}
		if rewrite && k == turns {
			r.HashIDs = make([]uint64, 40)
			for i := range r.HashIDs {
				r.HashIDs[i] = 1<<40 | uint64(i)
			}
			r.InputLength = 40 * 64
		}
		out = append(out, r)
	}
	return out
}

func dtopRun(t *testing.T, cfg Config, reqs []trace.Request) (map[string]int, *memSink) {
	t.Helper()
	res, sink := run(t, cfg, reqs, 64)
	checkSyncLog(t, sink.events, res.Summary.DToPSync)
	return res.Summary.DToPSync, sink
}

// checkSyncLog checks the stages of every d-to-p-sync line: its outcome
// and stage are the detail's and the summary's count; it holds exactly the
// stages up to the one its outcome happened at (none at entry), in order
// (prepare ends as the dump starts, the dump ends as finalize starts), each
// with end ≥ start, ms = 1000·(end − start), the last ending at the line's
// time; a skip or failure names its reason; bytes crossed the link only when
// the dump landed; and the JSON line has the fields at its top level.
func checkSyncLog(t *testing.T, events []metrics.Event, outcomes map[string]int) {
	t.Helper()
	counted := map[string]int{}
	for _, e := range events {
		if e.Kind != "d-to-p-sync" {
			if e.SnapshotSync != nil {
				t.Fatalf("a %s event carries snapshot stages: %+v", e.Kind, e)
			}
			continue
		}
		y := e.SnapshotSync
		if y == nil {
			t.Fatalf("d-to-p-sync event without stages: %+v", e)
		}
		if !strings.HasPrefix(e.Detail, "event="+y.Outcome+" stage="+y.Stage+" ") {
			t.Fatalf("stages %+v disagree with the detail %q", y, e.Detail)
		}
		key := y.Outcome + ": " + y.Stage
		if y.Outcome != "ok" {
			if y.Reason == "" || !strings.Contains(e.Detail, " reason="+y.Reason) {
				t.Fatalf("a %s at %s without its reason: %+v (%q)", y.Outcome, y.Stage, y, e.Detail)
			}
			key += ": " + y.Reason
		}
		counted[key]++
		want := map[string]int{"entry": 0, "prepare": 1, "dump": 2, "finalize": 3}[y.Stage]
		stages := []*metrics.SyncStage{y.Prepare, y.Dump, y.Finalize}
		prev := math.Inf(-1)
		for i, st := range stages {
			if (st != nil) != (i < want) {
				t.Fatalf("outcome at %s: stage %d present %t: %+v", y.Stage, i, st != nil, y)
			}
			if st == nil {
				continue
			}
			if st.StartS < prev || st.EndS < st.StartS || st.MS < 0 || math.Abs(st.MS-1000*(st.EndS-st.StartS)) > 1e-6 {
				t.Fatalf("stage %d out of order or negative (previous ended %g): %+v", i, prev, st)
			}
			if i == want-1 && st.EndS != e.TimeS {
				t.Fatalf("the last stage ends at %g, the line's time is %g: %+v", st.EndS, e.TimeS, y)
			}
			prev = st.EndS
		}
		if y.Prepare != nil && y.Dump != nil && y.Prepare.EndS != y.Dump.StartS {
			t.Fatalf("the dump starts at %g, not as prepare ends (%g)", y.Dump.StartS, y.Prepare.EndS)
		}
		if landed := y.Stage == "finalize"; (y.BytesPushed == y.Bytes && y.Bytes > 0) != landed || (!landed && y.BytesPushed != 0) {
			t.Fatalf("%s at %s: %d bytes pushed of %d", y.Outcome, y.Stage, y.BytesPushed, y.Bytes)
		}
		if y.KVCommittedLen != e.Tokens || (y.InsertedPrefixLen != 0 && y.Outcome != "ok") {
			t.Fatalf("tokens %d, stages %+v", e.Tokens, y)
		}
		b, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		var line map[string]any
		if err := json.Unmarshal(b, &line); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"event", "stage", "to", "bytes", "bytes_pushed", "kv_committed_len"} {
			if _, ok := line[k]; !ok {
				t.Fatalf("the JSON line lacks %q: %s", k, b)
			}
		}
	}
	if len(counted) != len(outcomes) {
		t.Fatalf("the log counts %v, the summary %v", counted, outcomes)
	}
	for k, n := range outcomes {
		if counted[k] != n {
			t.Fatalf("the log counts %v, the summary %v", counted, outcomes)
		}
	}
}

// The D→P outcomes besides ok and session-not-resident (F28's test):
// snapshot-buf-full at prepare, transfer-failed at dump (a dump still on the
// link after the transfer timeout), stale at finalize (a later turn no longer
// extends the snapshot).
func TestDToPOutcomes(t *testing.T) {
	base := func() Config {
		cfg := kvcConfig(t)
		cfg.Decode, cfg.Link = 1, "tcp-loopback"
		cfg.KVC.DToP = DToPActive
		return cfg
	}
	ok, sink := dtopRun(t, base(), dtopTrace(4, false))
	if ok["ok: finalize"] == 0 || len(ok) != 1 {
		t.Fatalf("plain active sync outcomes %v, want only ok", ok)
	}
	// The dumps take longer than any P→D transfer (the seed's 2,048 tokens
	// against sessions of 5K–11K): a timeout between the two fails dumps only.
	var dumpS, xferS float64
	for _, e := range sink.events {
		if e.Kind == "d-to-p-sync" {
			var ms float64
			for _, f := range strings.Fields(e.Detail) {
				if strings.HasPrefix(f, "dump_ms=") {
					v, err := strconv.ParseFloat(strings.TrimPrefix(f, "dump_ms="), 64)
					if err != nil {
						t.Fatal(err)
					}
					ms = v
				}
			}
			if dumpS == 0 || ms/1000 < dumpS {
				dumpS = ms / 1000
			}
		}
	}
	for _, r := range sink.recs {
		xferS = max(xferS, r.Breakdown.TransferS)
	}
	if dumpS < 2*xferS || xferS <= 0 {
		t.Fatalf("shortest dump %.3f s, longest P→D transfer %.3f s: the scenario needs dumps well apart", dumpS, xferS)
	}
	cfg := base()
	cfg.TransferTimeoutS = (dumpS + xferS) / 2
	failed, sink := dtopRun(t, cfg, dtopTrace(4, false))
	if failed["failed: dump: transfer-failed"] == 0 || failed["ok: finalize"] != 0 {
		t.Fatalf("transfer timeout %.3f s: outcomes %v, want the dumps failed at dump", cfg.TransferTimeoutS, failed)
	}
	for _, r := range sink.recs {
		if r.Status != "completed" {
			t.Fatalf("a failed dump failed request %d: %s", r.ChatID, r.Error)
		}
	}
	cfg = base()
	cfg.KVC.SnapshotBufBytes = 1 << 20
	if full, _ := dtopRun(t, cfg, dtopTrace(4, false)); full["failed: prepare: snapshot-buf-full"] == 0 || full["ok: finalize"] != 0 {
		t.Fatalf("1 MiB snapshot buffer: outcomes %v, want snapshot-buf-full", full)
	}
	if stale, _ := dtopRun(t, base(), dtopTrace(4, true)); stale["skipped: finalize: stale"] == 0 {
		t.Fatalf("a rewritten last turn: outcomes %v, want the snapshots in flight stale", stale)
	}
}

// A dump to a prefill worker whose P↔D peer mooncake marked dead (the
// hair-trigger, F5) fails at once with transfer-failed, and an on-evict
// dump's pin still ends (the decoder frees the session's KV).
func TestDToPDeadPeer(t *testing.T) {
	cfg := kvcConfig(t)
	cfg.KVC.DToP, cfg.PeerFailure = DToPOnEvict, PeerHairTrigger
	sink := &memSink{}
	s, err := newSim(cfg, &SliceSource{H: trace.Header{Version: 1, BlockSize: 64}, Reqs: one(100, 1)}, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.deadPeer = map[[2]int]bool{{0, 1}: true}
	queued := len(s.events)
	s.startSync(&syncOp{session: "s", p: 0, d: 1, blocks: []uint64{1, 2, 3}, tokens: 192, held: true})
	if got := s.syncOutcomes["failed: dump: transfer-failed"]; got != 1 || len(s.syncOutcomes) != 1 {
		t.Fatalf("outcomes %v, want one transfer-failed at dump", s.syncOutcomes)
	}
	if st := s.snaps[0]; st.Pending() != 0 || st.HeldBytes() != 0 || len(s.events) != queued+1 {
		t.Fatalf("%d snapshots still in flight (%d bytes held), %d events queued; want none and the pin's release", st.Pending(), st.HeldBytes(), len(s.events)-queued)
	}
	checkSyncLog(t, sink.events, s.syncOutcomes)
}
