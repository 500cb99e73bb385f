package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

func TestGuardTurnsPanicIntoExit70(t *testing.T) {
	var b bytes.Buffer
	code := guard(&b, func() int { panic("boom") })
	if code != exitInternal || strings.Count(b.String(), "\n") != 2 || !strings.Contains(b.String(), "internal error: boom") || strings.Contains(b.String(), "goroutine") {
		t.Fatalf("code %d, output %q", code, b.String())
	}
	if guard(&b, func() int { return 3 }) != 3 {
		t.Fatal("guard changed a normal status")
	}
}

// TestProgressLines: percent and time left against the trace's span; plain
// lines (no carriage return) when stderr is not a terminal.
func TestProgressLines(t *testing.T) {
	clock := time.Unix(0, 0)
	now := func() time.Time { return clock }
	var b bytes.Buffer
	e := &env{stderr: &b, now: now}
	w := &workload{src: &watchSource{}, lastTS: 1000}
	w.src.first.Timestamp, w.src.held = 0, true
	p := newProgress(e, "run 1/2: dp-x4", w, 2) // scaled span 0..500 s
	cb := p.callback()
	clock = clock.Add(5 * time.Second)
	cb(100, 250) // too soon for a log line
	clock = clock.Add(10 * time.Second)
	cb(2048, 125)
	clock = clock.Add(10 * time.Second)
	cb(4096, 600)
	p.finish()
	out := b.String()
	if strings.Contains(out, "\r") {
		t.Errorf("carriage return on a non-terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "run 1/2: dp-x4: 2048 requests done, simulated 125 s: 25% of the trace's time span, 15s elapsed, about 45s left") ||
		!strings.Contains(lines[1], "all requests arrived") {
		t.Errorf("progress lines:\n%s", out)
	}
	b.Reset()
	e.tty = true
	p = newProgress(e, "sim", &workload{src: &watchSource{}, requests: 1000}, 1)
	cb = p.callback()
	clock = clock.Add(2 * time.Second)
	cb(500, 10)
	p.finish()
	if !strings.HasPrefix(b.String(), "\r") || !strings.Contains(b.String(), "50% of the requests") || !strings.HasSuffix(b.String(), "\n") {
		t.Errorf("terminal progress %q", b.String())
	}
}

// TestThinSinkBoundsSamples: however long the run, at most limit samples
// are written, evenly spaced, first instant kept.
func TestThinSinkBoundsSamples(t *testing.T) {
	m := &memSink{}
	th := newThinSink(m, 100)
	for i := 0; i < 1000; i++ {
		for _, w := range []string{"a", "b"} {
			th.Worker(&metrics.WorkerSample{TimeS: float64(i), Worker: w})
		}
	}
	if err := th.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(m.samples); n > 100 || n < 50 || th.factor() != 32 {
		t.Fatalf("%d samples kept, factor %d", n, th.factor())
	}
	for i, s := range m.samples {
		if want := float64(i/2) * 32; s.TimeS != want {
			t.Fatalf("sample %d at t=%v, want %v", i, s.TimeS, want)
		}
	}
}

type memSink struct{ samples []metrics.WorkerSample }

func (m *memSink) Request(*metrics.Record) error { return nil }
func (m *memSink) Worker(w *metrics.WorkerSample) error {
	m.samples = append(m.samples, *w)
	return nil
}
func (m *memSink) Event(*metrics.Event) error { return nil }

func TestLastTimestamp(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]float64{
		"{\"pdhybrid_trace\":1,\"block_size\":4}\n{\"timestamp\":1.5}\n{\"timestamp\":42.25,\"x\":1}\n\n": 42.25,
		"{\"pdhybrid_trace\":1,\"block_size\":4}\n":                                                       0,
		"":                  0,
		"{\"timestamp\":7}": 7,
		// a last line longer than the first tail read, and one past its
		// end only by trailing blank lines
		"{\"timestamp\":1}\n{\"timestamp\":3,\"pad\":\"" + strings.Repeat("x", 40<<10) + "\"}\n":                         3,
		"{\"timestamp\":1}\n{\"timestamp\":5}\n" + strings.Repeat(" \n", 20<<10):                                         5,
		strings.Repeat("{\"timestamp\":1}\n", 3000) + "{\"timestamp\":9,\"pad\":\"" + strings.Repeat("y", 5<<20) + "\"}": 0,
	} {
		p := filepath.Join(dir, "t.jsonl")
		os.WriteFile(p, []byte(body), 0o644)
		f, _ := os.Open(p)
		if got := lastTimestamp(f); got != want {
			t.Errorf("%q: %v, want %v", body, got, want)
		}
		if off, _ := f.Seek(0, 1); off != 0 {
			t.Error("file not rewound")
		}
		f.Close()
	}
}

func TestParseGoodput(t *testing.T) {
	slo, err := parseGoodput("ttft:300,tpot:50 e2el:10000")
	if err != nil || slo != (metrics.SLO{TTFTS: 0.3, TPOTS: 0.05, LatencyS: 10}) {
		t.Fatalf("%+v %v", slo, err)
	}
	if slo, err := parseGoodput("none"); err != nil || slo != (metrics.SLO{}) {
		t.Fatalf("none: %+v %v", slo, err)
	}
	for _, bad := range []string{"", "ttft", "ttft:0", "ttft:NaN", "ttft:Inf", "itl:5", "ttft:1,ttft:2", "ttft:-1"} {
		if _, err := parseGoodput(bad); err == nil || !strings.Contains(err.Error(), "--goodput") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
