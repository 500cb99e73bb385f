package sim

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// burst is n sessions that each send a cold prompt of input tokens, gap
// seconds apart from t=0, and 60 s later the same prompt plus 500 tokens.
func burst(n, input int, gap float64) []trace.Request {
	var first, second []trace.Request
	think := 60.0
	for i := 0; i < n; i++ {
		b := blocks(uint64(i+1), trace.BlocksFor(input+500, 64))
		s := string(rune('a' + i))
		first = append(first, trace.Request{SessionID: s, ChatID: int64(2*i + 1), ParentChatID: -1, Turn: 1, Timestamp: gap * float64(i), InputLength: input,
			OutputLength: 20, HashIDs: b[:trace.BlocksFor(input, 64)]})
		second = append(second, trace.Request{SessionID: s, ChatID: int64(2*i + 2), ParentChatID: int64(2*i + 1), Turn: 2, Timestamp: 60 + gap*float64(i),
			InputLength: input + 500, OutputLength: 20, HashIDs: b, ThinkTimeS: &think})
	}
	return append(first, second...)
}

// TestV3ColdBurst, by hand: four 30,016-token cold prompts at once on 1P3D
// with a 65,536-token budget, margin 0 and cold routing. The first three go
// to the three idle decoders (each queue 30,016 ≤ P's 30,016) and prefill
// there; the fourth finds every decoder at 60,032 > P's 30,016 and seeds
// through P. All four prefill at once, so the slowest first token comes
// after about one 30K prefill, where v2 (every seed through the one P)
// waits for four. Each session's turn 2 is a direct append on its decoder.
func TestV3ColdBurst(t *testing.T) {
	base := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: profile(t), Policy: kvc.PolicyKVAware}
	v3 := base
	v3.KVC.V3 = KVCv3{DBudgetTokens: 65536, ColdRoute: true}
	maxTTFT := func(cfg Config) (float64, map[string]int) {
		_, sink := run(t, cfg, burst(4, 30016, 0), 64)
		modes := map[string]int{}
		worst := 0.0
		for _, r := range sink.recs {
			if r.Status != metrics.StatusCompleted {
				t.Fatalf("%+v: %s %s", cfg.KVC.V3, r.Status, r.Error)
			}
			modes[r.ExecutionMode]++
			if r.Turn == 1 {
				worst = max(worst, r.TTFTS)
			}
		}
		return worst, modes
	}
	w2, m2 := maxTTFT(base)
	w3, m3 := maxTTFT(v3)
	if m2["pd-router-turn1-seed"] != 4 {
		t.Fatalf("v2 modes %v, want 4 seeds through P", m2)
	}
	if m3[kvc.ModeLocalSeed] != 3 || m3["pd-router-turn1-seed"] != 1 || m3["kvcache-direct-to-d-session"] != 4 {
		t.Fatalf("v3 modes %v, want 3 local seeds, 1 seed through P, 4 direct appends", m3)
	}
	if w3 > 0.4*w2 {
		t.Fatalf("slowest first token: v3 %.2f s, v2 %.2f s; want v3 ≤ 0.4 × v2", w3, w2)
	}
	t.Logf("slowest turn-1 TTFT: v2 %.2f s, v3 %.2f s", w2, w3)
}

// TestV3InlineSavesTheRoundTrip: with inline admission a direct append's
// TTFT is the admission round trip shorter than v2's; everything else is
// the same run.
func TestV3InlineSavesTheRoundTrip(t *testing.T) {
	base := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 1, Profile: profile(t)}
	v3 := base
	v3.KVC.V3 = KVCv3{Inline: true}
	turn2 := func(cfg Config) float64 {
		_, sink := run(t, cfg, burst(1, 8000, 0), 64)
		if r := sink.recs[1]; r.ExecutionMode != "kvcache-direct-to-d-session" {
			t.Fatalf("%+v: turn 2 went %s", cfg.KVC.V3, r.ExecutionMode)
		}
		return sink.recs[1].TTFTS
	}
	if d := turn2(base) - turn2(v3); !near(d, 0.006) {
		t.Fatalf("inline admission saved %.6f s of a direct append's TTFT, want the 6 ms round trip", d)
	}
}

// TestV3WholeOnPAndLocalFallback: one decoder of 45,000 tokens, two
// 30,016-token sessions 0.3 s apart: the second arrives while the first is
// running there, the decoder refuses it for space, and it queues on the
// decoder (local fallback) or, with whole-on-p and P idle, is served whole
// on P; every request completes either way.
func TestV3WholeOnPAndLocalFallback(t *testing.T) {
	p := profile(t)
	frac := (45000*float64(p.Model.KVBytesPerToken()) + float64(p.Model.WeightBytes) + float64(p.Hardware.WorkspaceBytes)) / float64(p.Hardware.HBMBytes)
	for _, tc := range []struct {
		whole   bool
		prefill string // the prefill workers' kind (decoderkind.go)
		want    string
	}{{false, "", kvc.ModeLocalFall}, {true, "", kvc.ModeWholeOnP}, {true, kvc.KindStock, kvc.ModeLocalFall}} {
		cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 1, Profile: p, DecodeMemFraction: frac,
			KVC: KVC{V3: KVCv3{DBudgetTokens: 1 << 20, LocalFallback: true, WholeOnP: tc.whole}, PrefillWorkerKind: tc.prefill}}
		_, sink := run(t, cfg, burst(2, 30016, 0.3), 64)
		modes := map[string]int{}
		for _, r := range sink.recs {
			if r.Status != metrics.StatusCompleted {
				t.Fatalf("whole-on-p %t: %s %s (%s)", tc.whole, r.Status, r.Error, r.ExecutionMode)
			}
			modes[r.ExecutionMode]++
		}
		if modes[tc.want] == 0 || tc.prefill == kvc.KindStock && modes[kvc.ModeWholeOnP] > 0 {
			t.Fatalf("whole-on-p %t, prefill workers %q: modes %v, want some %s", tc.whole, tc.prefill, modes, tc.want)
		}
	}
}

// transferTokens is the link's time per token of KV over the prefill's time
// per token: for the built-in H200 profile over rdma-400g a fraction of a
// prefill token, and 0 without a usable link.
func TestTransferTokens(t *testing.T) {
	p := profile(t)
	c := Config{Profile: p, Link: "rdma-400g"}
	l := p.Links["rdma-400g"]
	want := float64(p.Model.KVBytesPerToken()) / l.BandwidthBytes / p.Timing.PrefillPerTokenS
	if got := c.transferTokens(); !near(got, want) || got <= 0 || got >= 1 {
		t.Fatalf("transferTokens %v, want %v in (0, 1)", got, want)
	}
	if got := (&Config{Profile: p, Link: "none"}).transferTokens(); got != 0 {
		t.Fatalf("no such link: %v, want 0", got)
	}
}
