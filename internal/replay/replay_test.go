package replay

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/gateway"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

func TestTokensShareWhatHashIDsShare(t *testing.T) {
	a := Tokens([]uint64{7, 8, 9}, 40, 16)
	b := Tokens([]uint64{7, 8, 10}, 48, 16)
	if len(a) != 40 || len(b) != 48 {
		t.Fatalf("lengths %d, %d; want 40, 48", len(a), len(b))
	}
	for i := 0; i < 32; i++ {
		if a[i] != b[i] {
			t.Fatalf("token %d differs inside shared blocks", i)
		}
	}
	same := 0
	for i := 32; i < 40; i++ {
		if a[i] == b[i] {
			same++
		}
	}
	if same == 8 {
		t.Fatal("different hash ids gave the same block")
	}
	for _, x := range b {
		if x < 0 || x >= 151936 {
			t.Fatalf("token %d outside the vocabulary", x)
		}
	}
}

// sessions builds n sessions of turns that each append to the last.
func sessions(n, turns int) []trace.Request {
	var reqs []trace.Request
	id := int64(0)
	think := 0.5
	for s := 0; s < n; s++ {
		var hashes []uint64
		for k := 1; k <= turns; k++ {
			for b := 0; b < 8; b++ {
				hashes = append(hashes, uint64(s*1000+len(hashes)+1))
			}
			r := trace.Request{SessionID: "s" + string(rune('a'+s)), ChatID: id, ParentChatID: id - 1, Turn: k,
				Timestamp: float64(s) * 0.2, InputLength: len(hashes) * 64, OutputLength: 20,
				HashIDs: append([]uint64(nil), hashes...)}
			if k == 1 {
				r.ParentChatID = -1
			} else {
				r.ThinkTimeS = &think
			}
			reqs = append(reqs, r)
			id++
		}
	}
	return reqs
}

// TestReplayAgainstLiveKVC replays a small multi-turn trace through a
// real gateway in front of emulated workers on loopback, 20× faster than
// real time: every request is accounted for exactly once, completes, and
// later turns of a session run in a KVC direct mode with a cache hit.
func TestReplayAgainstLiveKVC(t *testing.T) {
	p, d := emulatortest.Start(t, engine.RolePrefill, false, emulator.Faults{}), emulatortest.Start(t, engine.RoleDecode, true, emulator.Faults{})
	cfg := gateway.Config{Dispatch: kvc.Defaults(kvc.MechKVC),
		Prefill: []gateway.Prefill{{URL: p.URL(), BootstrapPort: p.BootstrapPort()}}, Decode: []string{d.URL()}}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ts := httptest.NewServer(g.Handler())
	defer ts.Close()
	emulatortest.WaitHealthy(t, p.URL(), d.URL())

	reqs := sessions(3, 4)
	// One prompt of the whole context: SGLang refuses it with an error
	// event, which the record must carry as its cause.
	long := make([]uint64, 262144/64)
	for i := range long {
		long[i] = uint64(900000 + i)
	}
	reqs = append(reqs, trace.Request{SessionID: "long", ChatID: 99, ParentChatID: -1, Turn: 1, InputLength: 262144, OutputLength: 4, HashIDs: long})
	var mu sync.Mutex
	got := map[int64]*metrics.Record{}
	progress := 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = Run(ctx, Config{URL: ts.URL, BlockSize: 64, TimeScale: 20, Concurrency: 4, TimeoutS: 30,
		Progress: func(done, total int) { progress = done }}, reqs, func(r *metrics.Record) {
		mu.Lock()
		defer mu.Unlock()
		if got[r.ChatID] != nil {
			t.Errorf("chat %d recorded twice", r.ChatID)
		}
		got[r.ChatID] = r
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) || progress != len(reqs) {
		t.Fatalf("%d records, progress %d; want %d", len(got), progress, len(reqs))
	}
	direct := 0
	if rec := got[99]; rec.Status != metrics.StatusFailed || !strings.Contains(rec.Error, "worker-error: The input (262144 tokens) is longer than the model's context length") {
		t.Errorf("whole-context prompt: %s %q; want failed with the worker's refusal", rec.Status, rec.Error)
	}
	for _, r := range reqs[:len(reqs)-1] {
		rec := got[r.ChatID]
		if rec.Status != metrics.StatusCompleted {
			t.Fatalf("chat %d: %s (%s)", r.ChatID, rec.Status, rec.Error)
		}
		if rec.OutputLength != r.OutputLength || rec.TTFTS <= 0 || rec.LatencyS < rec.TTFTS {
			t.Errorf("chat %d: output %d ttft %.3f latency %.3f", r.ChatID, rec.OutputLength, rec.TTFTS, rec.LatencyS)
		}
		if r.Turn > 1 && strings.Contains(rec.ExecutionMode, "direct") {
			direct++
			if rec.CachedTokens == 0 {
				t.Errorf("chat %d ran %s without a cache hit", r.ChatID, rec.ExecutionMode)
			}
		}
	}
	if direct == 0 {
		t.Error("no later turn ran in a direct mode")
	}
}

func TestReplayRecordsAnUnreachableGateway(t *testing.T) {
	reqs := sessions(1, 2)
	var recs []*metrics.Record
	err := Run(context.Background(), Config{URL: "http://127.0.0.1:1", BlockSize: 64, TimeScale: 100}, reqs,
		func(r *metrics.Record) { recs = append(recs, r) })
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records; want 2", len(recs))
	}
	for _, r := range recs {
		if r.Status != metrics.StatusFailed || !strings.HasPrefix(r.Error, "transport-error") {
			t.Errorf("chat %d: %s %q; want failed with a transport error", r.ChatID, r.Status, r.Error)
		}
	}
}
