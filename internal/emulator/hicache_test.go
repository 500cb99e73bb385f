package emulator

import (
	"encoding/json"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// TestHiCacheOverHTTP: a colocated worker whose 20,000-token pool cannot
// hold two 12,800-token prompts keeps the first on its host tier once the
// second evicts it, so a repeat of the first reports it cached (loaded
// back from host); without the tier the repeat recomputes it. /server_info
// reports the tier under SGLang's argument names.
func TestHiCacheOverHTTP(t *testing.T) {
	const n = 12800 // 200 blocks of 64
	a, b := ids(1, n), ids(2, n)
	for _, tiers := range []bool{false, true} {
		cfg := Config{Role: engine.RoleColocated, PoolTokens: 20000, TimeScale: 1000}
		if tiers {
			cfg.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: engine.WriteBack}
		}
		s := start(t, cfg)
		gen := func(rid string, prompt []int) int {
			st, body := post(t, s.URL()+"/generate", map[string]any{"input_ids": prompt, "rid": rid, "sampling_params": map[string]any{"max_new_tokens": 1}})
			if st != 200 {
				t.Fatalf("%s: %d %s", rid, st, body)
			}
			return decodeOut(t, body).MetaInfo.CachedTokens
		}
		gen("a", a)
		gen("b", b) // evicts a from HBM
		got := gen("a2", a)
		if want := map[bool]int{false: 0, true: n - 64}[tiers]; tiers && got < want || !tiers && got != want {
			t.Fatalf("tiers %v: repeat of a cached %d tokens, want %d", tiers, got, want)
		}
		st, body := get(t, s.URL()+"/server_info")
		var info map[string]any
		if st != 200 || json.Unmarshal(body, &info) != nil {
			t.Fatalf("/server_info: %d %s", st, body)
		}
		if info["enable_hierarchical_cache"] != tiers || (tiers && (info["hicache_write_policy"] != "write_back" || info["hicache_ratio"] != 3.0)) {
			t.Fatalf("tiers %v: /server_info says enable_hierarchical_cache=%v hicache_write_policy=%v hicache_ratio=%v",
				tiers, info["enable_hierarchical_cache"], info["hicache_write_policy"], info["hicache_ratio"])
		}
	}
}

// TestSeedAnswerNamesHostTokens: a session decoder with a write_through
// host tier seeds session S (3,000 tokens), then session B's admission
// trims S from HBM (6,000-token pool); S stays on host. S's next turn is
// over max_append_tokens, so the answer is a seed, and it names what a
// prefill here would load back from host: tier host, host_tokens of
// cached_tokens (protocol revision 1.1), S's whole 64-token pages. Without
// the tier the same seed names nothing.
func TestSeedAnswerNamesHostTokens(t *testing.T) {
	for _, tiers := range []bool{false, true} {
		p := start(t, Config{Role: engine.RolePrefill, TimeScale: 20})
		cfg := Config{Role: engine.RoleDecode, TimeScale: 20, PoolTokens: 6000,
			Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession}}
		if tiers {
			cfg.HiCache = engine.HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: engine.WriteThrough}
		}
		d := start(t, cfg)
		admit := func(session string, prompt []int, maxAppend int) AdmitResponse {
			st, b := post(t, d.URL()+"/session_cache/admit_direct_append", map[string]any{"session_id": session, "input_ids": prompt, "max_new_tokens": 8, "max_append_tokens": maxAppend})
			var a AdmitResponse
			if err := json.Unmarshal(b, &a); st != 200 || err != nil {
				t.Fatalf("admission: %d %s", st, b)
			}
			return a
		}
		turn1 := ids(1, 3000)
		o := seed(t, p, d, "S", turn1, 8)
		if a := admit("B", ids(2, 4000), 0); !a.CanAdmit || a.Mode != "seed" || a.TrimmedSessions != 1 {
			t.Fatalf("tiers %v: B's admission %+v, want a seed that trims S", tiers, a)
		}
		seed(t, p, d, "B", ids(2, 4000), 8)
		turn2 := append(append(append([]int{}, turn1...), o.OutputIDs...), ids(7, 1000)...)
		a := admit("S", turn2, 100)
		if a.Mode != "seed" {
			t.Fatalf("tiers %v: S's next turn %+v, want a seed (append over max_append_tokens)", tiers, a)
		}
		if !tiers {
			if a.HostTokens != 0 || a.Tier == engine.TierHost {
				t.Fatalf("no tier: the seed names %d host tokens, tier %q", a.HostTokens, a.Tier)
			}
			continue
		}
		if a.Tier != engine.TierHost || a.HostTokens < 3000/64*64 || a.HostTokens != a.CachedTokens {
			t.Fatalf("tier: the seed %+v, want tier host with host_tokens = cached_tokens ≥ %d", a, 3000/64*64)
		}
	}
}
