package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestKVCPreset: --kvc-preset v3 sets v3's defaults in config.json, v4
// v3's with --tpot-slo-ms and --isolation-max-p-wait, a flag
// given overrides its preset value, v2 leaves every option off, and a bad
// value names the flag and the valid ones.
func TestKVCPreset(t *testing.T) {
	v3 := func(args ...string) map[string]any {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "run")
		full := append([]string{"sim", "--synth-sessions", "2", "--synth-requests", "8", "--mechanism", "kvcache-centric", "--out", dir}, args...)
		if _, se, err := runCLI(full...); err != nil {
			t.Fatalf("%v: %v\n%s", full, err, se)
		}
		var cfg struct {
			KVC struct {
				V3 map[string]any `json:"v3"`
			} `json:"kvc"`
		}
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "config.json")), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.KVC.V3 == nil {
			t.Fatalf("%v: config.json has no kvc.v3", args)
		}
		return cfg.KVC.V3
	}
	for _, tc := range []struct {
		args []string
		key  string
		want any
	}{
		// v3 is the default preset; v2 turns every v3 option off.
		{nil, "d_prefill_budget_tokens", float64(v3Budget)},
		{nil, "whole_on_p", true},
		{[]string{"--kvc-preset", "v2"}, "d_prefill_budget_tokens", 0.0},
		{[]string{"--kvc-preset", "v2"}, "whole_on_p", false},
		{[]string{"--kvc-preset", "v3"}, "d_prefill_budget_tokens", float64(v3Budget)},
		{[]string{"--kvc-preset", "v3"}, "local_prefill_margin_tokens", float64(v3Margin)},
		{[]string{"--kvc-preset", "v3"}, "inline_admission", true},
		{[]string{"--kvc-preset", "v3"}, "whole_on_p", true},
		{[]string{"--kvc-preset", "v3"}, "p_hosts_sessions", true},
		{[]string{"--kvc-preset", "v3"}, "cold_route_inflight_tokens", float64(v3ColdInflight)},
		{[]string{"--kvc-preset", "v2"}, "p_hosts_sessions", false},
		{[]string{"--kvc-preset", "v2"}, "balance_session_starts", false},
		{[]string{"--kvc-preset", "v3"}, "balance_session_starts", true},
		{[]string{"--kvc-preset", "v3"}, "p_host_queue_tokens", float64(v3PHostQueue)},
		{[]string{"--kvc-preset", "v3"}, "balance_half_life_s", float64(v3BalanceHalfLife)},
		{[]string{"--kvc-preset", "v3"}, "prefill_bypass_tokens", float64(v3Bypass)},
		{nil, "prefill_bypass_tokens", float64(v3Bypass)},
		{[]string{"--kvc-preset", "v2"}, "prefill_bypass_tokens", 0.0},
		{[]string{"--kvc-preset", "v3"}, "prefill_order", v3Order},
		{[]string{"--kvc-preset", "v3"}, "prefill_max_wait_s", float64(v3MaxWait)},
		{[]string{"--kvc-preset", "v3", "--prefill-order", "fcfs"}, "prefill_max_wait_s", 0.0},
		{[]string{"--kvc-preset", "v3", "--balance-starts=false"}, "balance_half_life_s", 0.0},
		{[]string{"--kvc-preset", "v3", "--p-host-queue-tokens", "0"}, "p_host_queue_tokens", 0.0},
		{[]string{"--kvc-preset", "v3", "--p-hosts-sessions=false"}, "p_host_queue_tokens", 0.0},
		{[]string{"--kvc-preset", "v3", "--cold-route-inflight-tokens", "0"}, "cold_route_inflight_tokens", 0.0},
		// A preset option whose base is turned off stays off.
		{[]string{"--kvc-preset", "v3", "--whole-on-p=false"}, "p_hosts_sessions", false},
		{[]string{"--kvc-preset", "v3", "--cold-route=false"}, "cold_route_inflight_tokens", 0.0},
		{[]string{"--kvc-preset", "v3", "--d-prefill-budget", "1000"}, "d_prefill_budget_tokens", 1000.0},
		{[]string{"--kvc-preset", "v3", "--inline-admission=false"}, "inline_admission", false},
		// v4 is v3 with decode isolation (docs/kvc-v4.md).
		{[]string{"--kvc-preset", "v3"}, "tpot_slo_ms", nil},
		{[]string{"--kvc-preset", "v4"}, "tpot_slo_ms", float64(v4TPOTSLO)},
		{[]string{"--kvc-preset", "v4"}, "isolation_max_p_wait_s", float64(v4MaxPWait)},
		{[]string{"--kvc-preset", "v4"}, "isolation_ttft_slo_ms", float64(v4TTFTSLO)},
		{[]string{"--kvc-preset", "v4", "--isolation-ttft-slo-ms", "0"}, "isolation_ttft_slo_ms", nil},
		{[]string{"--kvc-preset", "v4"}, "isolation_sooner_ratio", float64(v4SoonerRatio)},
		{[]string{"--kvc-preset", "v4", "--isolation-ttft-slo-ms", "0"}, "isolation_sooner_ratio", nil},
		{[]string{"--kvc-preset", "v4", "--isolation-sooner-ratio", "0"}, "isolation_sooner_ratio", nil},
		{[]string{"--kvc-preset", "v3"}, "isolation_sooner_ratio", nil},
		{[]string{"--kvc-preset", "v4"}, "isolation_long_prefill_s", nil}, // measured, not kept
		{[]string{"--kvc-preset", "v4", "--isolation-long-prefill", "5"}, "isolation_long_prefill_s", 5.0},
		{[]string{"--kvc-preset", "v4", "--tpot-slo-ms", "0"}, "isolation_ttft_slo_ms", nil},
		{[]string{"--kvc-preset", "v4"}, "d_prefill_budget_tokens", float64(v3Budget)},
		{[]string{"--kvc-preset", "v4"}, "whole_on_p", true},
		{[]string{"--kvc-preset", "v4", "--tpot-slo-ms", "25"}, "tpot_slo_ms", 25.0},
		{[]string{"--kvc-preset", "v4", "--tpot-slo-ms", "0"}, "isolation_max_p_wait_s", nil},
		{[]string{"--kvc-preset", "v3", "--tpot-slo-ms", "12"}, "tpot_slo_ms", 12.0},
	} {
		if got := v3(tc.args...)[tc.key]; got != tc.want {
			t.Errorf("%v: kvc.v3.%s = %v, want %v", tc.args, tc.key, got, tc.want)
		}
	}
	for _, bad := range [][]string{
		{"--kvc-preset", "v5"},
		{"--d-prefill-budget", "-1"},
		{"--tpot-slo-ms", "12", "--kvc-preset", "v2"}, // without a budget (the v3 or v4 preset)
		{"--tpot-slo-ms", "-1", "--kvc-preset", "v3"},
		{"--isolation-max-p-wait", "5", "--kvc-preset", "v3"},   // without --tpot-slo-ms
		{"--isolation-sooner-ratio", "2", "--kvc-preset", "v3"}, // without --isolation-ttft-slo-ms
		{"--isolation-sooner-ratio", "-1", "--kvc-preset", "v4"},
		{"--isolation-long-prefill", "5", "--kvc-preset", "v3"}, // without --isolation-ttft-slo-ms
		{"--isolation-long-prefill", "-1", "--kvc-preset", "v4"},
		{"--local-prefill-margin", "5", "--kvc-preset", "v2"},          // without a budget
		{"--whole-on-p", "--kvc-preset", "v2"},                         // without --local-fallback
		{"--p-hosts-sessions", "--kvc-preset", "v2"},                   // without --whole-on-p
		{"--cold-route-inflight-tokens", "4096", "--kvc-preset", "v2"}, // without --cold-route
		{"--p-host-queue-tokens", "4096", "--kvc-preset", "v2"},        // without --balance-starts
		{"--balance-half-life", "30", "--kvc-preset", "v2"},            // without --balance-starts
		{"--prefill-bypass-tokens", "-5"},
		{"--prefill-order", "sjf"},
		{"--prefill-max-wait", "30", "--kvc-preset", "v2"}, // without --prefill-order shortest
		{"--balance-half-life", "-1", "--kvc-preset", "v3"},
		{"--p-host-queue-tokens", "-1", "--kvc-preset", "v3"},
	} {
		args := append([]string{"sim", "--synth-sessions", "2", "--mechanism", "kvcache-centric"}, bad...)
		_, se, err := runCLI(args...)
		if err == nil || !strings.Contains(se+err.Error(), bad[0]) {
			t.Errorf("%v: err %v, stderr %q; want an error naming %s", bad, err, se, bad[0])
		}
	}
	if _, _, err := runCLI("sim", "--synth-sessions", "2", "--mechanism", "pd-colo", "--kvc-preset", "v3"); err == nil {
		t.Error("--kvc-preset accepted for pd-colo")
	}
}
