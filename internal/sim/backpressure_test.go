package sim

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// With backpressure off (the seed's default) no decoder's admission reply
// carries a pause, backpressure-events.jsonl stays empty and no request is
// labelled -d-backpressure; on (ours), the same run has all three.
func TestBackpressureOff(t *testing.T) {
	run := func(bp string) (pauses, events, labels int) {
		cfg := kvcConfig(t)
		cfg.KVC.Backpressure = bp
		sink := &memSink{}
		if _, err := runSource(t, cfg, agentic(t, 20, 0.1), sink); err != nil {
			t.Fatal(err)
		}
		for _, e := range sink.events {
			switch e.Kind {
			case "admission":
				if !strings.Contains(e.Detail, " pause_ms=0 ") {
					pauses++
				}
			case "backpressure":
				events++
			}
		}
		for _, r := range sink.recs {
			if strings.Contains(r.ExecutionMode, "d-backpressure") {
				labels++
			}
		}
		return
	}
	if p, e, l := run("on"); p == 0 || e == 0 || l == 0 {
		t.Fatalf("backpressure on: %d admission replies with a pause, %d backpressure events, %d -d-backpressure labels; want some of each", p, e, l)
	}
	if p, e, l := run("off"); p != 0 || e != 0 || l != 0 {
		t.Fatalf("backpressure off: %d admission replies with a pause, %d backpressure events, %d -d-backpressure labels; want none", p, e, l)
	}
}

// --backpressure-max-pause-ms bounds each wait the router makes after a
// refusal that carried a pause. A request's admission time is its RPCs'
// round trips plus its pauses, at most one per refusal; seed-inferact on
// decoders running 4 requests at most queues deep enough for pauses over
// 100 ms.
func TestBackpressureMaxPause(t *testing.T) {
	const rtt = 0.006
	run := func(capMs *float64) (worst float64, paused int) {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedInferact())
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: profile(t), Concurrency: 32,
			DecodeMemFraction: 0.55, MaxRunning: 4}
		cfg.KVC.AdmissionRTTS, cfg.KVC.BackpressureMaxPauseMs = rtt, capMs
		sink := &memSink{}
		if _, err := runSource(t, cfg, g, sink); err != nil {
			t.Fatal(err)
		}
		for _, r := range sink.recs {
			rejects, asks := 0, 0
			for _, step := range r.Path {
				switch {
				case strings.HasPrefix(step, "reject "):
					rejects++
					asks++
				case strings.HasPrefix(step, "admit "):
					asks++
				}
			}
			pause := r.Breakdown.AdmissionS - rtt*float64(asks)
			if pause > 1e-9 {
				paused++
				if rejects == 0 {
					t.Fatalf("request %s waited %.3f s with no refusal (path %v)", r.RequestID, pause, r.Path)
				}
			}
			if rejects > 0 {
				worst = max(worst, pause/float64(rejects))
			}
		}
		return
	}
	if worst, _ := run(nil); worst <= 0.1 {
		t.Fatalf("default cap (2 s): longest wait per refusal %.3f s; want one over 100 ms for the cap to bind", worst)
	}
	hundred := 100.0
	worst, paused := run(&hundred)
	if paused == 0 || worst > 0.1+1e-9 {
		t.Fatalf("cap 100 ms: %d requests waited, the longest %.3f s per refusal; want some, none over 0.1 s", paused, worst)
	}
	zero := 0.0
	if worst, paused := run(&zero); paused != 0 {
		t.Fatalf("cap 0: %d requests waited (the longest %.3f s per refusal); want none", paused, worst)
	}
}
