package model

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestQwenKVBytesPerToken(t *testing.T) {
	p, err := Builtin("qwen3-30b-a3b", "h100-80g")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Model.KVBytesPerToken(); got != 98304 {
		t.Fatalf("KV bytes/token = %d, want 48·4·128·2·2 = 98304", got)
	}
	// The seed measured 92,104 tokens per H100 at mem_fraction 0.835.
	if got := p.KVPoolTokens(0); got != 92104 {
		t.Fatalf("H100 pool = %d tokens, want 92104", got)
	}
}

func TestBuiltinsLoadAndRoundTrip(t *testing.T) {
	names := BuiltinNames()
	if len(names) < 2 {
		t.Fatalf("built-in profiles = %v, want at least h100 and h200", names)
	}
	for _, n := range names {
		m, hw, _ := strings.Cut(n, "/")
		p, err := Builtin(m, hw)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := p.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := Decode(&buf, "roundtrip")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.Timing, p.Timing) || q.Model != p.Model || q.Hardware != p.Hardware {
			t.Fatalf("%s: round trip changed the profile", n)
		}
		if (q.Server == nil) != (p.Server == nil) || (p.Server != nil && *q.Server != *p.Server) {
			t.Fatalf("%s: round trip changed the server limits: %+v -> %+v", n, p.Server, q.Server)
		}
	}
}

func TestDecodeRejectsUnknownAndInvalid(t *testing.T) {
	if _, err := Decode(strings.NewReader(`{"timing":{"prefil_per_token_s":1}}`), "x"); err == nil {
		t.Fatal("misspelt field accepted")
	}
	if _, err := Decode(strings.NewReader(`{"name":"empty"}`), "x"); err == nil {
		t.Fatal("empty profile accepted")
	}
}

func TestPrefillTerms(t *testing.T) {
	tm := Timing{PrefillOverheadS: 0.01, PrefillPerTokenS: 1e-5, PrefillAttnS: 1e-9}
	// n=1000 after p=2000: 0.01 + 1000e-5 + 1e-9·1000·(2000+500)
	want := 0.01 + 0.01 + 1e-9*1000*2500
	if got := tm.PrefillS(1000, 2000); math.Abs(got-want) > 1e-12 {
		t.Fatalf("PrefillS = %v, want %v", got, want)
	}
	if tm.PrefillS(0, 5000) != 0 {
		t.Fatal("prefill of nothing must cost nothing")
	}
}

func TestExpertFraction(t *testing.T) {
	m := Model{Experts: 128, TopK: 8}
	if got := m.ExpertFraction(1); math.Abs(got-8.0/128) > 1e-12 {
		t.Fatalf("batch 1 fraction = %v", got)
	}
	prev := 0.0
	for b := 1; b <= 256; b++ {
		f := m.ExpertFraction(b)
		if f < prev || f > 1 {
			t.Fatalf("fraction not monotone in [0,1] at batch %d: %v", b, f)
		}
		prev = f
	}
}

func TestServerLimitsOptional(t *testing.T) {
	base, err := Builtin("qwen3-30b-a3b", "h100-80g")
	if err != nil {
		t.Fatal(err)
	}
	encode := func(p *Profile) string {
		var buf bytes.Buffer
		if err := p.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	// A profile without the server object loads, and encodes without it.
	q := *base
	q.Server = nil
	js := encode(&q)
	if strings.Contains(js, `"server"`) {
		t.Fatalf("nil server encoded: %s", js)
	}
	got, err := Decode(strings.NewReader(js), "no-server")
	if err != nil || got.Server != nil {
		t.Fatalf("profile without server: %v, server %+v", err, got.Server)
	}
	// Partly stated limits keep their zeros as "not stated".
	q.Server = &Server{MaxRunningRequests: 2048}
	js = encode(&q)
	if strings.Contains(js, "chunked_prefill_size") {
		t.Fatalf("zero chunked_prefill_size encoded: %s", js)
	}
	got, err = Decode(strings.NewReader(js), "server")
	if err != nil || got.Server == nil || *got.Server != (Server{MaxRunningRequests: 2048}) {
		t.Fatalf("server round trip: %v, %+v", err, got.Server)
	}
	// Negative limits are refused, and so are unknown server fields.
	q.Server = &Server{ChunkedPrefillSize: -1}
	if _, err := Decode(strings.NewReader(encode(&q)), "neg"); err == nil ||
		!strings.Contains(err.Error(), "server.chunked_prefill_size") {
		t.Fatalf("negative chunked_prefill_size: err = %v", err)
	}
	q.Server = nil
	bad := strings.Replace(encode(&q), `"links"`, `"server": {"max_running": 5}, "links"`, 1)
	if _, err := Decode(strings.NewReader(bad), "unknown"); err == nil {
		t.Fatal("misspelt server field accepted")
	}
}

// The H200 profile states SGLang's own limits, each with its source.
func TestH200ServerLimitsHaveSources(t *testing.T) {
	p, err := Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	if p.Server == nil || p.Server.MaxRunningRequests <= 0 || p.Server.ChunkedPrefillSize <= 0 {
		t.Fatalf("h200 server limits = %+v", p.Server)
	}
	for _, k := range []string{"server.max_running_requests", "server.chunked_prefill_size",
		"server.cuda_graph_max_bs", "hardware.mem_fraction"} {
		if p.Sources[k] == "" {
			t.Errorf("no source for %s", k)
		}
	}
}

// A sliding-window cost needs its window and a window its cost: half of
// the pair would be charged as nothing (or the window ignored).
func TestProfileSlidingWindowPair(t *testing.T) {
	p, err := Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cost   float64
		window int
		ok     bool
	}{{0, 0, true}, {1e-8, 4096, true}, {1e-8, 0, false}, {0, 4096, false}} {
		q := *p
		q.Timing.DecodePerWindowCtxTokenS, q.Timing.SlidingWindow = c.cost, c.window
		err := q.Validate()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "sliding_window")) {
			t.Errorf("cost %v, window %d: %v; want ok=%v", c.cost, c.window, err, c.ok)
		}
	}
}
