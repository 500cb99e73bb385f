package sim

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/synth"
)

// F8, migration v1's thrashing: with a reject count that never resets, a
// session whose decoder refuses it τ_reject times over its whole life is
// blacklisted there; once every decoder is, the least-rejected fallback
// sends each turn after a new refusal to another decoder, and the session
// bounces (the seed: mean 26 D changes per session, max 116). Resetting the
// count on success (direct, the seed's v2 code, or any, the spec) keeps a
// session home through isolated refusals.
//
// The refusals must be isolated for the reset to matter. The settings are the
// seed's v1 code where it differed from the spec: its router-side gate with a
// residency belief that never shrinks (so a session trimmed off its decoder
// is still believed there, asked for a direct append and refused
// session-not-resident: 85 % of the seed's v1 rejects), one admission per
// request (the retry loop existed only in the spec: with ε ≥ 1 every refusal
// at home moves the request to another decoder, with or without reset), and
// τ_append 2048; on seed-swe with H100 decoders at 0.78 of HBM so that
// sessions are trimmed.
func TestSeedF8Thrashing(t *testing.T) {
	p, err := model.Builtin("qwen3-30b-a3b", "h100-80g")
	if err != nil {
		t.Fatal(err)
	}
	changes := func(reset kvc.RejectReset) (mean float64, most int) {
		g, err := synth.NewSeedWorkload(synth.DefaultSeedSWE())
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Mechanism: KVCacheCentric, Prefill: 1, Decode: 3, Profile: p, Concurrency: 32, DecodeMemFraction: 0.78}
		cfg.KVC.Gate, cfg.KVC.Belief, cfg.KVC.MaxAttempts, cfg.KVC.TauAppend = string(kvc.GateRouter), string(kvc.BeliefNeverShrink), 1, 2048
		cfg.KVC.Reset = string(reset)
		sink := &memSink{}
		if _, err := runSource(t, cfg, g, sink); err != nil {
			t.Fatal(err)
		}
		sessions := map[string]bool{}
		for _, r := range sink.recs {
			sessions[r.SessionID] = true
		}
		total := 0
		for _, n := range dChanges(sink.recs) {
			total += n
			most = max(most, n)
		}
		return float64(total) / float64(len(sessions)), most
	}
	off, offMax := changes(kvc.ResetOff)
	if off < 2 || offMax < 15 {
		t.Fatalf("reset off: %.2f D changes per session (max %d); want sessions bouncing", off, offMax)
	}
	direct, _ := changes(kvc.ResetDirect)
	anyR, _ := changes(kvc.ResetAny)
	t.Logf("D changes per session: off %.2f (max %d), direct %.2f, any %.2f", off, offMax, direct, anyR)
	if anyR*5 > off || direct*4 > off {
		t.Fatalf("D changes per session: off %.2f, direct %.2f, any %.2f; want any ≥ 5× and direct ≥ 4× fewer", off, direct, anyR)
	}
}
