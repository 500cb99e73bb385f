package sim

import (
	"fmt"
	"os"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// The engine-fidelity scenarios of docs/engine.md, run through the
// simulator itself (not re-derived from formulas), so the table there is
// what a run would charge. `go test ./internal/sim -run TestScenarioTable -v`
// prints it for the built-in H200 profile; PDHYBRID_PROFILE=FILE prints it
// for another profile.

type scenario struct {
	name string
	s    float64
}

// followUp is a two-turn session: a prompt of cached tokens (whole blocks),
// then the same prompt plus add new tokens. It returns turn 2's TTFT.
func followUp(t testing.TB, cfg Config, cached, add int) float64 {
	t.Helper()
	const bs = 64
	cached = cached / bs * bs
	b := blocks(9, trace.BlocksFor(cached+add, bs))
	think := 600.0
	reqs := []trace.Request{
		{SessionID: "s", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: cached, OutputLength: 1, HashIDs: b[:cached/bs]},
		{SessionID: "s", ChatID: 2, ParentChatID: 1, Turn: 2, Timestamp: 1, InputLength: cached + add, OutputLength: 1, HashIDs: b, ThinkTimeS: &think},
	}
	_, sink := run(t, cfg, reqs, bs)
	r := sink.recs[1]
	if r.CachedTokens != cached {
		t.Fatalf("%s: turn 2 cached %d, want %d", cfg.Mechanism, r.CachedTokens, cached)
	}
	return r.TTFTS
}

func coldTTFT(t testing.TB, cfg Config, input int) float64 {
	t.Helper()
	_, sink := run(t, cfg, one(input, 1), 64)
	return sink.recs[0].TTFTS
}

func scenarios(t testing.TB, p *model.Profile) []scenario {
	colo := Config{Mechanism: PDColo, Colo: 1, Profile: p}
	pd := Config{Mechanism: PDDisaggregation, Prefill: 1, Decode: 1, Profile: p}
	tm, m := p.Timing, p.Model
	return []scenario{
		{"340-token append after 30K cached (TTFT, one worker)", followUp(t, colo, 30000, 340)},
		{"340-token append after 100K cached (TTFT, one worker)", followUp(t, colo, 100000, 340)},
		{"50K cold prefill (TTFT, 8K chunks)", coldTTFT(t, colo, 50000)},
		{"naive-PD turn, P holds 30K of 30,340 (TTFT, RDMA)", followUp(t, pd, 30000, 340)},
		{"naive-PD turn, cold P, 30,340 tokens (TTFT, RDMA)", coldTTFT(t, pd, 30340)},
		{"mixed step: 340-token chunk after 30K + decode batch 64 × 8K", tm.PrefillS(340, 30000) + tm.DecodePerSeqS*64 + tm.CtxSlope(64)*64*8192},
		{"decode step, batch 1, 8K context", tm.DecodeStepS(m, 1, 8192)},
		{"decode step, batch 128, 128 × 4K context", tm.DecodeStepS(m, 128, 128*4096)},
	}
}

// TestScenarioTable prints the table and holds the bench profile to the
// figures it is checked against (docs/engine.md): a 340-token append after
// 30K cached within the seed's 40 ms measured through real SGLang, and a
// batch-1 decode step within 7 ms (the seed's H200 log: 5.7 ms).
func TestScenarioTable(t *testing.T) {
	p := profile(t)
	if f := os.Getenv("PDHYBRID_PROFILE"); f != "" {
		var err error
		if p, err = model.Load(f); err != nil {
			t.Fatal(err)
		}
	}
	sc := scenarios(t, p)
	for _, s := range sc {
		t.Log(fmt.Sprintf("| %s | %.1f ms |", s.name, 1000*s.s))
	}
	if os.Getenv("PDHYBRID_PROFILE") != "" {
		return
	}
	if sc[0].s > 0.040 {
		t.Errorf("340-token append after 30K: %.1f ms, want ≤ 40 ms", 1000*sc[0].s)
	}
	if sc[6].s > 0.007 {
		t.Errorf("batch-1 decode step: %.2f ms, want ≤ 7 ms", 1000*sc[6].s)
	}
}
