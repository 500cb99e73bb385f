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
