package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// With API keys, a plain-PD turn's cached_tokens (the prefill worker's
// prefix cache, shared by every caller) tell a caller only of its own
// prefixes: key B sending the prompt key A sent is told 0 cached, though P
// holds it; A, and then B the second time, are told what P holds.
func TestCachedTokensScopedByKey(t *testing.T) {
	p, d := worker(t, engine.RolePrefill, false), worker(t, engine.RoleDecode, false)
	gw := gatewayWith(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.ClientHeader = "X-Api-Key" })
	prompt := ids(7, 1000)
	ask := func(key string) int {
		resp := post(t, gw.URL+"/generate", map[string]any{"input_ids": prompt, "sampling_params": map[string]any{"max_new_tokens": 2}}, map[string]string{"X-Api-Key": key})
		defer resp.Body.Close()
		var out struct {
			MetaInfo struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"meta_info"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("key %s: status %d, %v", key, resp.StatusCode, err)
		}
		return out.MetaInfo.CachedTokens
	}
	if n := ask("key-a"); n != 0 {
		t.Fatalf("key A's first request: %d cached, want 0", n)
	}
	if n := ask("key-a"); n < 900 {
		t.Fatalf("key A's second request: %d cached, want P's cache of A's own prompt (≥ 900)", n)
	}
	if n := ask("key-b"); n != 0 {
		t.Fatalf("key B sending A's prompt: told %d tokens cached, want 0: B sent none of it before", n)
	}
	if n := ask("key-b"); n < 900 {
		t.Fatalf("key B's second request: %d cached, want its own earlier prompt's (≥ 900)", n)
	}
}
