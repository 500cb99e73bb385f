package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestSimHierarchicalCache: --enable-hierarchical-cache gives naive PD's
// prefill worker a host tier that summary.json reports; on a workload
// whose sessions outgrow a small prefill pool the tier serves prompt
// tokens from host that the run without it recomputes, and config.json
// records the tier only when it is on.
func TestSimHierarchicalCache(t *testing.T) {
	run := func(extra ...string) (map[string]any, map[string]any) {
		return simSummaryConfig(t, append([]string{"--mem-fraction-prefill", "0.45"}, extra...)...)
	}
	prefill := func(sum map[string]any) map[string]any {
		return sum["workers"].(map[string]any)["prefill-0"].(map[string]any)
	}
	offSum, offCfg := run()
	onSum, onCfg := run("--enable-hierarchical-cache", "--hicache-write-policy", "write_back")
	if _, ok := offCfg["hicache"]; ok {
		t.Fatalf("config.json without the tier has a hicache entry: %v", offCfg["hicache"])
	}
	if h, _ := onCfg["hicache"].(map[string]any); h["write_policy"] != "write_back" {
		t.Fatalf("config.json: hicache %v, want write_policy write_back", onCfg["hicache"])
	}
	if _, ok := prefill(offSum)["host"]; ok {
		t.Fatal("summary.json without the tier reports a host tier")
	}
	host, _ := prefill(onSum)["host"].(map[string]any)
	if host == nil || host["loaded_tokens"].(float64) <= 0 || host["written_tokens"].(float64) <= 0 {
		t.Fatalf("prefill-0's host tier: %v; want tokens written to host and loaded back", host)
	}
	offComputed, onComputed := prefill(offSum)["prefill_tokens"].(float64), prefill(onSum)["prefill_tokens"].(float64)
	if onComputed >= offComputed {
		t.Fatalf("prefill-0 computed %v tokens with the tier, %v without: the tier saved nothing", onComputed, offComputed)
	}
	t.Logf("prefill-0 computed %v tokens without the tier, %v with it (%v loaded from host)", offComputed, onComputed, host["loaded_tokens"])
}

// TestSweepHierarchicalCacheKnob: the tier is a sweep knob like any sim
// flag, its cells named by it, and a cell with it on records it.
func TestSweepHierarchicalCacheKnob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	args := []string{"sweep", "--mechanism", "pd-disaggregation", "--set", "enable-hierarchical-cache=false,true",
		"--out", dir, "--", "--synth-sessions", "3"}
	if _, se, err := runCLI(args...); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, se)
	}
	for cell, want := range map[string]bool{
		"pd-disaggregation_1P3D_agentic_enable-hierarchical-cache=false": false,
		"pd-disaggregation_1P3D_agentic_enable-hierarchical-cache=true":  true,
	} {
		var cfg map[string]any
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, cell, "config.json")), &cfg); err != nil {
			t.Fatalf("%s: %v", cell, err)
		}
		if _, on := cfg["hicache"]; on != want {
			t.Fatalf("%s: config.json hicache %v, want the tier %v", cell, cfg["hicache"], want)
		}
	}
}

// TestSimHiCacheStorage: --hicache-storage-backend puts a storage tier
// under naive PD's prefill worker's host tier; with a host pool barely
// larger than HBM, sessions the host drops come back from storage
// (prefetched, then loaded), so the worker computes fewer tokens than with
// host alone, and the run files name the backend and policy.
func TestSimHiCacheStorage(t *testing.T) {
	run := func(extra ...string) (map[string]any, map[string]any) {
		sum, cfg := simSummaryConfig(t, append([]string{"--mem-fraction-prefill", "0.45", "--enable-hierarchical-cache", "--hicache-ratio", "1.05"}, extra...)...)
		return sum["workers"].(map[string]any)["prefill-0"].(map[string]any), cfg
	}
	hostOnly, _ := run()
	withSt, cfg := run("--hicache-storage-backend", "mooncake", "--hicache-storage-prefetch-policy", "wait_complete")
	if h, _ := cfg["hicache"].(map[string]any); h["storage_backend"] != "mooncake" || h["storage_prefetch_policy"] != "wait_complete" {
		t.Fatalf("config.json: hicache %v, want storage_backend mooncake, storage_prefetch_policy wait_complete", cfg["hicache"])
	}
	if _, ok := hostOnly["host"].(map[string]any)["storage"]; ok {
		t.Fatal("summary.json without storage reports a storage tier")
	}
	st, _ := withSt["host"].(map[string]any)["storage"].(map[string]any)
	if st == nil || st["prefetched_tokens"].(float64) <= 0 || st["written_tokens"].(float64) <= 0 {
		t.Fatalf("prefill-0's storage tier: %v; want tokens written and prefetched", st)
	}
	if a, b := hostOnly["prefill_tokens"].(float64), withSt["prefill_tokens"].(float64); b >= a {
		t.Fatalf("prefill-0 computed %v tokens with storage, %v without: storage saved nothing", b, a)
	}
	t.Logf("prefill-0 computed %v tokens with host only, %v with storage (%v prefetched)", hostOnly["prefill_tokens"], withSt["prefill_tokens"], st["prefetched_tokens"])
}

// simSummaryConfig runs `sim` naive PD on 8 synthetic sessions of 120
// requests with the extra flags, and returns its summary.json and
// config.json.
func simSummaryConfig(t *testing.T, extra ...string) (map[string]any, map[string]any) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"sim", "--mechanism", "pd-disaggregation", "--synth-sessions", "8", "--synth-requests", "120", "--out", dir}, extra...)
	if _, se, err := runCLI(args...); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, se)
	}
	var sum, cfg map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "config.json")), &cfg); err != nil {
		t.Fatal(err)
	}
	return sum, cfg
}
