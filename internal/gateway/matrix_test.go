package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/promtest"
)

// The live matrix: every mechanism on every kind of worker, each cell a
// short multi-turn session through the gateway (docs/gateway.md, "Every
// mechanism on every worker kind").

// matrixMechs are the mechanisms of the matrix; v3 is KVC v3's options on
// kvcache-centric (TestGatewayKVCv3's).
var matrixMechs = []struct {
	name string
	mech kvc.Mechanism
	v3   bool
}{
	{"naive-pd", kvc.MechPD, false},
	{"dp", kvc.MechColo, false},
	{"kvc-v2", kvc.MechKVC, false},
	{"kvc-v3", kvc.MechKVC, true},
	{"pd-conditional", kvc.MechConditional, false},
	{"pd-prefix-decider", kvc.MechPrefixDecider, false},
	{"pd-decode-radix", kvc.MechDecodeRadix, false},
}

// matrixTurns is each cell's session length.
const matrixTurns = 3

// matrixWant is the execution mode of each turn (X-Pdhybrid-Mode) of a
// cell: mechanism name → decoder kind → turns 1, 2 and on. A kind not
// listed takes the mechanism's "*" row.
var matrixWant = map[string]map[string][2]string{
	"naive-pd": {"*": {"pd-disaggregation-router", "pd-disaggregation-router"}},
	"dp":       {"*": {"dp-colo-router", "dp-colo-router"}},
	"kvc-v2": {
		"stock":                        {"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-plain-pd"},
		"decode-radix":                 {"pd-router-turn1-seed-via-delta-pd", "pd-router-d-session-reseed-via-delta-pd"},
		"conditional-agg":              {"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-plain-pd"},
		"conditional-agg+decode-radix": {"pd-router-turn1-seed-via-local-prefill", "kvcache-direct-to-d-session-via-local-prefill"},
		"extended":                     {"pd-router-turn1-seed", "kvcache-direct-to-d-session"},
	},
	"kvc-v3": {
		"stock":                        {"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-plain-pd"},
		"decode-radix":                 {"pd-router-turn1-seed-via-delta-pd", "pd-router-d-session-reseed-via-delta-pd"},
		"conditional-agg":              {"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-plain-pd"},
		"conditional-agg+decode-radix": {kvc.ModeLocalSeed + "-via-local-prefill", "kvcache-direct-to-d-session-via-local-prefill"},
		"extended":                     {kvc.ModeLocalSeed, "kvcache-direct-to-d-session"},
	},
	"pd-conditional": {
		"*":                            {kvc.ModeCondPD, kvc.ModeCondPD},
		"conditional-agg+decode-radix": {kvc.ModeCondPD, kvc.ModeCondLocal},
	},
	"pd-prefix-decider": {
		"*":                            {kvc.ModeDeciderPD, kvc.ModeDeciderPD},
		"conditional-agg+decode-radix": {kvc.ModeDeciderPD, kvc.ModeDeciderLocal},
	},
	"pd-decode-radix": {"*": {kvc.ModeDecodeRadixPD, kvc.ModeDecodeRadixPD}},
}

// TestMechanismMatrix replays a three-turn session through the gateway
// for every mechanism on every decoder kind (stock SGLang, with its
// decode radix cache, with conditional aggregation alone and with the
// radix cache, the KVC extension; DP on stock colocated workers, which
// have no decoder kind): no turn answers an error, each turn runs in the
// mode the mechanism and the workers allow, each request is counted once,
// and from turn 2 every turn finds the conversation cached (on the
// decoder where it can keep it, else in the prefill worker's radix
// cache). The workers of a kind are shared by the mechanisms; each cell's
// conversation has its own tokens, so no cell finds another's.
func TestMechanismMatrix(t *testing.T) {
	type pair struct{ p, d *emulator.Server }
	workers := map[string]pair{}
	for _, k := range decoderKinds {
		pEdit := emulatortest.Stock
		if k.path == PathExtension {
			pEdit = func(c *emulator.Config) { c.ServeWhole = true } // the extension on P too
		}
		workers[k.name] = pair{emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, pEdit),
			emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, k.edit)}
	}
	colo := emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleColocated, emulatortest.Stock)
	cell := 0
	for _, m := range matrixMechs {
		for _, k := range decoderKinds {
			if m.mech == kvc.MechColo && k.name != "stock" {
				continue // colocated workers have no decoder kind
			}
			cell++
			base := 1000 + cell*10000
			t.Run(m.name+"/"+k.name, func(t *testing.T) {
				w := workers[k.name]
				ps, ds := []*emulator.Server{w.p}, []*emulator.Server{w.d}
				if m.mech == kvc.MechColo {
					ps, ds = nil, []*emulator.Server{colo}
				}
				gw, g := gatewayServer(t, m.mech, ps, ds, func(c *Config) {
					c.Health.Interval = -1
					if m.v3 {
						c.Dispatch.V3 = kvc.V3Config{DBudgetTokens: 131072, ColdRoute: true, ColdInflightTokens: 6144,
							LocalFallback: true, TypedRejects: true, WholeOnP: true, PHosts: true}
					}
				})
				g.Discover(context.Background())
				want, ok := matrixWant[m.name][k.name]
				if !ok {
					want = matrixWant[m.name]["*"]
				}
				checkCell(t, gw.URL, fmt.Sprintf("cell-%d", cell), base, want)
			})
		}
	}
}

// checkCell replays one cell's session and checks each turn.
func checkCell(t *testing.T, gw, session string, base int, want [2]string) {
	t.Helper()
	prompt := ids(base, 1500)
	for turn := 1; turn <= matrixTurns; turn++ {
		a := generate(t, gw, map[string]any{"input_ids": prompt, "session_id": session, "sampling_params": map[string]any{"max_new_tokens": 8}})
		w := want[min(turn-1, 1)]
		if a.status != http.StatusOK || len(a.outputIDs) != 8 {
			t.Fatalf("turn %d: %+v, want 200 with 8 tokens", turn, a)
		}
		if a.mode != w {
			t.Errorf("turn %d: mode %s, want %s", turn, a.mode, w)
		}
		if turn > 1 && a.cached < 1500/64*64 {
			t.Errorf("turn %d: %d tokens cached, want at least the first prompt's whole blocks (1472)", turn, a.cached)
		}
		prompt = append(append(prompt, a.outputIDs...), ids(base+5000+300*turn, 200)...)
	}
	fams := promtest.Scrape(t, gw+"/metrics")
	var total, ok float64
	for _, m := range fams["pdhybrid_requests_total"].GetMetric() {
		total += m.GetCounter().GetValue()
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "ok" {
				ok += m.GetCounter().GetValue()
			}
		}
	}
	if total != matrixTurns || ok != matrixTurns {
		t.Errorf("pdhybrid_requests_total: %v counted, %v ok; want each of the %d requests once, ok", total, ok, matrixTurns)
	}
}
