package sim

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/synth"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// The seed's failure stories (seed-inventory §3), each reproduced on a
// generated workload: the test asserts the direction and rough size of the
// effect the seed reported, and that our default avoids it.

func smallAppendCfg(sessions, turns, initial, appendTok, shared int) synth.SmallAppend {
	c := synth.DefaultSmallAppend()
	c.Sessions, c.Turns, c.InitialTokens, c.AppendTokens, c.SharedPrefixTokens = sessions, turns, initial, appendTok, shared
	return c
}

func runSA(t *testing.T, cfg Config, c synth.SmallAppend) []metrics.Record {
	t.Helper()
	g, err := synth.NewSmallAppend(c)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if _, err := runSource(t, cfg, g, sink); err != nil {
		t.Fatal(err)
	}
	return sink.recs
}

// dChanges counts, per session, how often consecutive turns changed decoder.
func dChanges(recs []metrics.Record) map[string]int {
	sorted := append([]metrics.Record(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ChatID < sorted[j].ChatID })
	last, out := map[string]string{}, map[string]int{}
	for _, r := range sorted {
		if p, ok := last[r.SessionID]; ok && p != r.DecodeWorker {
			out[r.SessionID]++
		}
		last[r.SessionID] = r.DecodeWorker
	}
	return out
}

// F3, the cold decoder: sessions sharing ~50 blocks of boilerplate make
// kv-aware routing with K = 0 pile them onto the decoder that saw the
// boilerplate first; the load-floor bonus K = 200 gives each a fair share.
func TestSeedF3ColdDecoder(t *testing.T) {
	c := smallAppendCfg(12, 4, 8000, 256, 3200) // 50 shared blocks
	perD := func(k float64) map[string]int {
		cfg := kvcConfig(t)
		cfg.FloorK = k
		seen := map[string]map[string]bool{}
		for _, r := range runSA(t, cfg, c) {
			if seen[r.DecodeWorker] == nil {
				seen[r.DecodeWorker] = map[string]bool{}
			}
			seen[r.DecodeWorker][r.SessionID] = true
		}
		out := map[string]int{}
		for d, ss := range seen {
			out[d] = len(ss)
		}
		return out
	}
	cold := perD(0)
	if len(cold) == 3 && cold["decode-1"] > 0 && cold["decode-2"] > 0 {
		t.Fatalf("K=0: sessions per decoder %v, want a decoder left cold", cold)
	}
	fair := perD(200)
	for _, d := range []string{"decode-0", "decode-1", "decode-2"} {
		if fair[d] < 3 {
			t.Fatalf("K=200: sessions per decoder %v, want each a fair share of 12", fair)
		}
	}
}

// F21, eviction granularity: under memory pressure a revisit after an
// eviction rebuilds the whole session on D at session granularity (a reseed:
// the whole prompt's KV arrives again), and only what LRU took at block
// granularity (a direct append over the rest). Tokens D must rebuild per
// follow-up turn: the prompt for a seed, the uncached tokens for a direct
// append. (TTFT is another matter: with P's radix cache warm and RDMA, a
// reseed costs P little, while a direct append re-prefills the lost tail on
// D itself; docs/simulator.md.)
func TestSeedF21EvictionGranularity(t *testing.T) {
	c := smallAppendCfg(6, 8, 24000, 512, 0)
	c.GapS = 20
	p := profile(t)
	kvb := p.Model.KVBytesPerToken()
	// Decoders of 56K tokens: two sessions of 24–28K each, just too many.
	frac := float64(p.Model.WeightBytes+p.Hardware.WorkspaceBytes+56000*kvb) / float64(p.Hardware.HBMBytes)
	rebuilt := func(ev string) int {
		cfg := kvcConfig(t)
		cfg.DecodeMemFraction = frac
		cfg.KVC.Eviction = ev
		tok := 0
		for _, r := range runSA(t, cfg, c) {
			switch {
			case r.Turn == 1:
			case strings.HasPrefix(r.ExecutionMode, "kvcache-direct"):
				tok += r.UncachedTokens
			default:
				tok += r.InputLength
			}
		}
		return tok
	}
	sess, block := rebuilt("session"), rebuilt("block")
	if block*4 > sess {
		t.Fatalf("tokens rebuilt on D by follow-up turns: %d at session granularity, %d at block; want block ≤ a quarter", sess, block)
	}
}

// F1, time scale: the same trace at --time-scale 10 shows far worse tails.
func TestSeedF1TimeScale(t *testing.T) {
	g := func() Source {
		c := synth.DefaultAgentic()
		c.Sessions, c.ArrivalRate = 30, 0.02
		st, err := synth.NewAgentic(c)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	p99 := func(scale float64) float64 {
		cfg := kvcConfig(t)
		cfg.TimeScale = scale
		res, err := runSource(t, cfg, g(), nil)
		if err != nil {
			t.Fatal(err)
		}
		st := res.Summary.TTFTStats
		t.Logf("scale %g: mean %.2f p50 %.2f p90 %.2f p99 %.2f fails %d", scale, st.Mean, st.P50, st.P90, st.P99, res.Summary.Requests-res.Summary.Completed)
		return st.P99
	}
	a, b := p99(1), p99(10)
	if b < 3*a {
		t.Fatalf("TTFT p99 %.2f s at time scale 1, %.2f s at 10; want far worse compressed", a, b)
	}
}

var _ = trace.Request{}

// F4/F5, the cascade and the hair-trigger: on the seed's TCP-loopback
// transport with mooncake's behaviour, a couple of transfer timeouts mark
// P→D peers dead for the run and most later requests fail (peer-dead); on
// our settings (RDMA, windowed breaker) nothing times out.
func TestSeedF5HairTrigger(t *testing.T) {
	causes := func(link, mode string) (map[string]int, int) {
		c := synth.DefaultAgentic()
		c.Sessions, c.ArrivalRate = 30, 0.1
		st, err := synth.NewAgentic(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg := kvcConfig(t)
		cfg.Link, cfg.TransferTimeoutS, cfg.PeerFailure = link, 10, mode
		sink := &memSink{}
		if _, err := runSource(t, cfg, st, sink); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range sink.recs {
			if r.Error != "" {
				out[strings.SplitN(r.Error, ":", 2)[0]]++
			}
		}
		return out, len(sink.recs)
	}
	seed, n := causes("tcp-loopback", PeerHairTrigger)
	if seed["kv-transfer-timeout"] == 0 || seed["peer-dead"] < n/2 || seed["peer-dead"] < 50*seed["kv-transfer-timeout"] {
		t.Fatalf("seed settings: failures %v of %d requests, want a few timeouts cascading into peer-dead for most", seed, n)
	}
	ours, _ := causes("rdma-400g", PeerWindowed)
	if ours["kv-transfer-timeout"]+ours["peer-dead"] != 0 {
		t.Fatalf("our settings: transport failures %v, want none", ours)
	}
}

// F28, D→P sync: reseeds follow evictions, so a passive sync (from the
// decoder that last held the session, at reseed time) rarely finds the
// session there (the seed: 0 ok of 102); pushing on eviction or after direct
// appends leaves P holding the grown session, so reseeds prefill little.
// After direct appends (active) the push is done long before the reseed and
// its TTFT drops; on eviction the decoder keeps the session's KV pinned
// until the dump has landed, so the reseed that made the trim waits for
// that KV on D (the pin's price) and gains less.
func TestSeedF28DToPSync(t *testing.T) {
	p := profile(t)
	kvb := p.Model.KVBytesPerToken()
	frac := float64(p.Model.WeightBytes+p.Hardware.WorkspaceBytes+80000*kvb) / float64(p.Hardware.HBMBytes)
	type reseeds struct{ ttft, prefill, dWait float64 }
	run := func(mode string) (reseeds, map[string]int) {
		c := synth.DefaultSmallAppend()
		c.Sessions, c.Turns, c.InitialTokens, c.AppendTokens, c.GapS = 8, 12, 16000, 2000, 5
		g, err := synth.NewSmallAppend(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg := kvcConfig(t)
		cfg.DecodeMemFraction = frac
		cfg.KVC.DToP = mode
		sink := &memSink{}
		res, err := runSource(t, cfg, g, sink)
		if err != nil {
			t.Fatal(err)
		}
		checkSyncLog(t, sink.events, res.Summary.DToPSync)
		var m reseeds
		n := 0
		for _, r := range sink.recs {
			if strings.Contains(r.ExecutionMode, "reseed") {
				m.ttft += r.TTFTS
				m.prefill += r.Breakdown.PrefillS
				m.dWait += r.Breakdown.PreallocWaitS
				n++
			}
		}
		if n < 10 {
			t.Fatalf("%s: %d reseeds, the scenario needs evictions", mode, n)
		}
		f := float64(n)
		return reseeds{m.ttft / f, m.prefill / f, m.dWait / f}, res.Summary.DToPSync
	}
	off, _ := run(DToPOff)
	_, passive := run(DToPPassive)
	if ok, tried := passive["ok: finalize"], passive["ok: finalize"]+passive["skipped: entry: session-not-resident"]; tried == 0 || ok*10 > tried {
		t.Fatalf("passive sync outcomes %v: want it to find the session rarely", passive)
	}
	active, outcomes := run(DToPActive)
	if active.ttft > 0.8*off.ttft || outcomes["ok: finalize"] == 0 {
		t.Errorf("active: reseed TTFT %.3f s against %.3f s with sync off (%v); want ≥ 20%% lower", active.ttft, off.ttft, outcomes)
	}
	evict, outcomes := run(DToPOnEvict)
	if evict.prefill > 0.6*off.prefill || outcomes["ok: finalize"] == 0 {
		t.Errorf("on-evict: reseed prefill %.3f s against %.3f s with sync off (%v); want ≥ 40%% less", evict.prefill, off.prefill, outcomes)
	}
	if evict.dWait <= off.dWait+0.01 || evict.ttft > off.ttft {
		t.Errorf("on-evict: reseeds waited %.3f s for D's KV (off %.3f s), TTFT %.3f s (off %.3f s); want the pin's wait, and no loss overall",
			evict.dWait, off.dWait, evict.ttft, off.ttft)
	}
}

// F31, the fallback chain: with the seed's E4 settings (τ_reject 1, decoder
// memory fraction 0.55, K = 200, concurrency 32, 300 s timeout, and its
// seed-min-turn 1 — which counted turns from 0, so each session's first turn
// went plain PD: our --seed-min-turn 2) on seed-inferact, KVC beats naive PD
// (E1: kv-aware) at mean, p50 and p90 TTFT and loses p99, and fallbacks make
// most of the p95+ tail (the seed: −35 %, −65 %, −9 %, +8 %; 88 % of the
// tail). Measured with CUDA-graph prefill: −29 %, −64 %, −12 %, +2 %; 97 %.
// The p99 loss is small and sensitive (docs/kvc.md has the neighbourhood:
// behind in 19 of 27 nearby settings, by up to 10 %); with prefill and
// mixed steps charged eagerly, as SGLang runs them (docs/calibration.md),
// p99 is −3.7 %, so the test holds p99 level within that 10 %, not its sign.
func TestSeedF31FallbackChain(t *testing.T) {
	run := func(cfg Config) (*Result, []metrics.Record) {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedInferact())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Profile, cfg.Prefill, cfg.Decode, cfg.Concurrency, cfg.TimeoutS = profile(t), 1, 3, 32, 300
		sink := &memSink{}
		res, err := runSource(t, cfg, g, sink)
		if err != nil {
			t.Fatal(err)
		}
		return res, sink.recs
	}
	e1, _ := run(Config{Mechanism: PDDisaggregation, Policy: kvc.PolicyKVAware})
	cfg := Config{Mechanism: KVCacheCentric, FloorK: 200, DecodeMemFraction: 0.55}
	cfg.KVC.TauReject, cfg.KVC.SeedMinTurn = 1, 2
	e4, recs := run(cfg)
	a, b := e1.Summary.TTFTStats, e4.Summary.TTFTStats
	t.Logf("TTFT mean/p50/p90/p99: E1 %.1f/%.1f/%.1f/%.1f s, E4 %.1f/%.1f/%.1f/%.1f s", a.Mean, a.P50, a.P90, a.P99, b.Mean, b.P50, b.P90, b.P99)
	if b.Mean >= a.Mean || b.P50 >= a.P50 || b.P90 >= a.P90 {
		t.Fatalf("E4 TTFT mean/p50/p90 %.1f/%.1f/%.1f s, E1 %.1f/%.1f/%.1f s: want KVC ahead", b.Mean, b.P50, b.P90, a.Mean, a.P50, a.P90)
	}
	if math.Abs(b.P99/a.P99-1) > 0.10 {
		t.Fatalf("E4 TTFT p99 %.1f s against E1 %.1f s: want them level within 10 %% (the seed's KVC lost the tail by 8 %%)", b.P99, a.P99)
	}
	var tail, fallback int
	for _, r := range recs {
		if r.Status == metrics.StatusCompleted && r.TTFTS >= b.P95 {
			tail++
			if strings.Contains(r.ExecutionMode, "fallback") {
				fallback++
			}
		}
	}
	if fallback*4 < tail*3 {
		t.Fatalf("%d of %d requests at or above TTFT p95 are fallbacks; want them to dominate the tail (≥ 75 %%)", fallback, tail)
	}
}

// F4 with F6, the E2 cascade: on seed-inferact with the seed's decoders
// trimming sessions on their scheduler loop (a stall of about 0.27 ms per
// freed token: two trims of 114K tokens blocked it 30+ s) and mooncake's 30 s
// timeout with its hair-trigger, transfers landing on a stalled decoder time
// out, the peers die, and a cascade of requests fails; with trims off the
// scheduler loop and a windowed breaker, none does.
func TestSeedF4Cascade(t *testing.T) {
	failures := func(stallPerToken float64, mode string) (map[string]int, int) {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedInferact())
		if err != nil {
			t.Fatal(err)
		}
		cfg := kvcConfig(t)
		cfg.Concurrency, cfg.TimeoutS, cfg.TransferTimeoutS, cfg.PeerFailure = 32, 300, 30, mode
		cfg.KVC.TrimStallPerTokenS = stallPerToken
		sink := &memSink{}
		if _, err := runSource(t, cfg, g, sink); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range sink.recs {
			if r.Error != "" {
				out[strings.SplitN(r.Error, ":", 2)[0]]++
			}
		}
		return out, len(sink.recs)
	}
	seed, n := failures(0.00027, PeerHairTrigger)
	if seed["kv-transfer-timeout"] == 0 || seed["peer-dead"] < 10*seed["kv-transfer-timeout"] || seed["peer-dead"] < n/10 {
		t.Fatalf("seed settings: failures %v of %d requests; want timeouts behind stalled decoders cascading into peer-dead", seed, n)
	}
	if ours, _ := failures(0, PeerWindowed); len(ours) != 0 {
		t.Fatalf("our settings: failures %v, want none", ours)
	}
}
