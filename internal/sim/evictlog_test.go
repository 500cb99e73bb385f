package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// evictions.jsonl says of each evicted session whether it was idle or hot
// (a request of it admitted or queued on that decoder). The seed's trim
// evicted idle sessions only (--trim idle); --trim any may take a hot one.
// At session granularity a session's pin is dropped as soon as its request
// reaches the head of the decoder's queue, so the hot sessions a trim can
// take are those queued behind others: seed-inferact at concurrency 32 on
// decoders at 0.55 of HBM with --max-running 4 queues enough of them.
func TestEvictionLogSaysIdleOrHot(t *testing.T) {
	states := func(trim string) map[string]int {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedInferact())
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: profile(t), Concurrency: 32,
			DecodeMemFraction: 0.55, MaxRunning: 4}
		cfg.KVC.Trim = trim
		dir := t.TempDir()
		sink, err := NewDirSink(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), cfg, g, sink, nil); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		log, err := os.ReadFile(filepath.Join(dir, "structural", EventFiles["eviction"]))
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, b := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
			var e struct {
				Kind  string  `json:"kind"`
				State *string `json:"state"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("--trim %s: evictions.jsonl: %v: %s", trim, err, b)
			}
			switch {
			case e.Kind != "eviction":
				t.Errorf("--trim %s: a %q line in evictions.jsonl: %s", trim, e.Kind, b)
			case e.State == nil:
				t.Errorf("--trim %s: an eviction without a state: %s", trim, b)
			case *e.State != "idle" && *e.State != "hot":
				t.Errorf("--trim %s: eviction state %q, want idle or hot: %s", trim, *e.State, b)
			default:
				n[*e.State]++
			}
		}
		return n
	}
	idle := states("idle")
	if idle["idle"] == 0 || idle["hot"] != 0 {
		t.Errorf("--trim idle: evictions %v, want some and every one idle", idle)
	}
	anyT := states("any")
	if anyT["hot"] == 0 || anyT["idle"] == 0 {
		t.Errorf("--trim any: evictions %v, want hot ones beside idle ones", anyT)
	}
	t.Logf("evictions: --trim idle %v, --trim any %v", idle, anyT)
}
