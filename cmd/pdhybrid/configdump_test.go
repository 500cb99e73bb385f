package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestEveryFlagReachesTheRunFiles: each sim flag, set to a non-default
// value, changes what the run folder records (config.json, or summary.json
// for what describes the workload and the run), so no knob can be silently
// dropped on its way to the simulator — the seed ran its headline D→P
// experiment with D→P off without knowing (F24). A flag added without an
// entry here fails the test.
func TestEveryFlagReachesTheRunFiles(t *testing.T) {
	kvcFlags := []string{"--mechanism", "kvcache-centric"}
	cond := []string{"--mechanism", "pd-conditional"}
	decider := []string{"--mechanism", "pd-prefix-decider"}
	ppd := []string{"--mechanism", "pd-ppd"}
	deflect := []string{"--mechanism", "pd-deflect"}
	with := func(base []string, more ...string) []string { return append(append([]string(nil), base...), more...) }
	values := map[string][]string{
		"mechanism":                        kvcFlags,
		"help":                             nil,
		"policy":                           {"--policy", "sticky"},
		"prefill":                          {"--prefill", "2"},
		"decode":                           {"--decode", "2"},
		"colo":                             {"--mechanism", "pd-colo", "--colo", "2"},
		"name":                             {"--name", "named"},
		"block-size":                       nil, // with --trace only: TestSimFlagsAfterPositionals covers it
		"trace":                            nil, // the workload: covered by the trace tests
		"workload":                         nil, // presets take no --synth-* flags: checked at the end
		"synth-requests":                   {"--synth-requests", "30"},
		"synth-sessions":                   {"--synth-sessions", "3"},
		"synth-rate":                       {"--synth-rate", "0.5"},
		"seed":                             {"--seed", "5"},
		"model":                            nil, // one built-in model
		"hardware":                         {"--hardware", "h100-80g"},
		"profile":                          nil, // a file: covered by TestSimProfileFile
		"model-config":                     nil, // a file: TestModelConfigDumpProfile covers it and the flags below
		"tp":                               nil, // with --model-config only
		"ep":                               nil, // with --model-config only
		"dp-attention":                     nil, // with --model-config only
		"kv-dtype":                         nil, // with --model-config only
		"engine":                           nil, // with --model-config only
		"context-length":                   nil, // with --model-config only
		"swa-full-tokens-ratio":            nil, // with --model-config only: TestSWARatioFlag
		"scheduler":                        {"--scheduler", "vllm"},
		"link":                             {"--link", "nvlink"},
		"mem-fraction-prefill":             {"--mem-fraction-prefill", "0.8"},
		"mem-fraction-decode":              {"--mem-fraction-decode", "0.8"},
		"mem-fraction-colo":                {"--mechanism", "pd-colo", "--mem-fraction-colo", "0.8"},
		"chunk-tokens":                     {"--chunk-tokens", "4096"},
		"max-backlog":                      {"--max-backlog", "5000"},
		"max-running":                      {"--max-running", "64"},
		"mixed-chunk":                      {"--mixed-chunk"},
		"enable-hierarchical-cache":        {"--enable-hierarchical-cache"},
		"hicache-ratio":                    {"--enable-hierarchical-cache", "--hicache-ratio", "3"},
		"hicache-size":                     {"--enable-hierarchical-cache", "--hicache-size", "200"},
		"hicache-write-policy":             {"--enable-hierarchical-cache", "--hicache-write-policy", "write_back"},
		"hicache-demote-idle":              {"--enable-hierarchical-cache", "--hicache-demote-idle"},
		"hicache-trim-host-first":          {"--enable-hierarchical-cache", "--hicache-trim-host-first"},
		"hicache-storage-backend":          {"--enable-hierarchical-cache", "--hicache-storage-backend", "hf3fs"},
		"hicache-storage-size":             {"--enable-hierarchical-cache", "--hicache-storage-backend", "hf3fs", "--hicache-storage-size", "5000"},
		"hicache-storage-shared":           {"--enable-hierarchical-cache", "--hicache-storage-backend", "hf3fs", "--hicache-storage-shared"},
		"hicache-storage-shared-bandwidth": {"--enable-hierarchical-cache", "--hicache-storage-backend", "hf3fs", "--hicache-storage-shared", "--hicache-storage-shared-bandwidth", "40"},
		"hicache-storage-prefetch-policy":  {"--enable-hierarchical-cache", "--hicache-storage-backend", "hf3fs", "--hicache-storage-prefetch-policy", "timeout"},
		"time-scale":                       {"--time-scale", "2"},
		"concurrency":                      {"--concurrency", "3"},
		"timeout":                          {"--timeout", "50"},
		"session-idle-forget":              {"--session-idle-forget", "600"},
		"max-input-len":                    {"--max-input-len", "100000"},
		"ignore-think-time":                {"--ignore-think-time"},
		"output-reuse":                     {"--output-reuse", "sessions"},
		"alpha":                            {"--policy", "kv-aware", "--alpha", "3"},
		"floor-k":                          {"--policy", "kv-aware", "--floor-k", "100"},
		"goodput":                          {"--goodput", "ttft:500"},
		"slo-ttft":                         nil, // deprecated aliases of --goodput
		"slo-tpot":                         nil,
		"slo-e2el":                         nil,
		"sample-interval":                  {"--sample-interval", "5"},
		"direct-max-uncached-tokens":       append(kvcFlags, "--direct-max-uncached-tokens", "2048"),
		"decode-worker-kind":               append(kvcFlags, "--decode-worker-kind", "decode-radix"),
		"prefill-worker-kind":              append(kvcFlags, "--prefill-worker-kind", "stock"),
		"migration-reject-threshold":       append(kvcFlags, "--migration-reject-threshold", "5"),
		"kvc-max-attempts":                 append(kvcFlags, "--kvc-max-attempts", "1"),
		"seed-min-turn":                    append(kvcFlags, "--seed-min-turn", "2"),
		"session-cap":                      append(kvcFlags, "--session-cap", "4"),
		"admission-gate":                   append(kvcFlags, "--admission-gate", "router"),
		"reject-reset":                     append(kvcFlags, "--reject-reset", "off"),
		"residency-belief":                 append(kvcFlags, "--residency-belief", "never-shrink"),
		"trim":                             append(kvcFlags, "--trim", "any"),
		"eviction":                         append(kvcFlags, "--eviction", "block"),
		"tail-trim-max-waiting":            append(kvcFlags, "--eviction", "tail", "--tail-trim-max-waiting", "77"),
		"reject-window":                    append(kvcFlags, "--reject-window", "77"),
		"prefill-bypass-tokens":            append(kvcFlags, "--kvc-preset", "v3", "--prefill-bypass-tokens", "77"),
		"p-prefill-bypass-tokens":          append(kvcFlags, "--kvc-preset", "v4", "--p-prefill-bypass-tokens", "777"),
		"p-prefill-bypass-ahead":           append(kvcFlags, "--kvc-preset", "v4", "--p-prefill-bypass-tokens", "777", "--p-prefill-bypass-ahead"),
		"prefill-order":                    append(kvcFlags, "--kvc-preset", "v3", "--prefill-order", "fcfs"),
		"prefill-max-wait":                 append(kvcFlags, "--kvc-preset", "v3", "--prefill-max-wait", "77"),
		"low-watermark":                    append(kvcFlags, "--low-watermark", "0.1"),
		"trim-stall":                       append(kvcFlags, "--trim-stall", "0.5"),
		"trim-stall-per-token":             append(kvcFlags, "--trim-stall-per-token", "0.000001"),
		"admission-rtt":                    append(kvcFlags, "--admission-rtt", "2"),
		"seed-max-inflight-decode":         append(kvcFlags, "--seed-max-inflight-decode", "1"),
		"prefill-backup":                   append(kvcFlags, "--prefill-backup", "capacity-backup"),
		"prefill-priority-eviction":        append(kvcFlags, "--prefill-priority-eviction"),
		"home-holds":                       append(kvcFlags, "--home-holds"),
		"d-to-p-sync":                      append(kvcFlags, "--d-to-p-sync", "on-evict"),
		"d-to-p-delta-tokens":              append(kvcFlags, "--d-to-p-sync", "active", "--d-to-p-delta-tokens", "4096"),
		"snapshot-buf":                     append(kvcFlags, "--d-to-p-sync", "on-evict", "--snapshot-buf", "2"),
		"backpressure":                     append(kvcFlags, "--backpressure=false"),
		"backpressure-high-water":          append(kvcFlags, "--backpressure-high-water", "0.8"),
		"backpressure-max-pause-ms":        append(kvcFlags, "--backpressure-max-pause-ms", "100"),
		"backpressure-transfer-queue":      append(kvcFlags, "--backpressure-transfer-queue"),
		"kvc-preset":                       append(kvcFlags, "--kvc-preset", "v2"),
		"d-prefill-budget":                 append(kvcFlags, "--d-prefill-budget", "4096"),
		"local-prefill-margin":             append(kvcFlags, "--kvc-preset", "v3", "--local-prefill-margin", "77"),
		"cold-route":                       append(kvcFlags, "--kvc-preset", "v2", "--cold-route"),
		"inline-admission":                 append(kvcFlags, "--kvc-preset", "v2", "--inline-admission"),
		"local-fallback":                   append(kvcFlags, "--kvc-preset", "v3", "--local-fallback=false"),
		"typed-rejects":                    append(kvcFlags, "--kvc-preset", "v2", "--typed-rejects"),
		"whole-on-p":                       append(kvcFlags, "--kvc-preset", "v3", "--whole-on-p=false"),
		"cold-on-p":                        append(kvcFlags, "--kvc-preset", "v3", "--cold-on-p"),
		"p-hosts-sessions":                 append(kvcFlags, "--kvc-preset", "v3", "--p-hosts-sessions=false"),
		"cold-route-inflight-tokens":       append(kvcFlags, "--kvc-preset", "v3", "--cold-route-inflight-tokens", "77"),
		"balance-starts":                   append(kvcFlags, "--kvc-preset", "v3", "--balance-starts=false"),
		"p-host-queue-tokens":              append(kvcFlags, "--kvc-preset", "v3", "--p-host-queue-tokens", "77"),
		"balance-half-life":                append(kvcFlags, "--kvc-preset", "v3", "--balance-half-life", "77"),
		"count-transfer":                   append(kvcFlags, "--kvc-preset", "v3", "--count-transfer"),
		"tpot-slo-ms":                      append(kvcFlags, "--kvc-preset", "v3", "--tpot-slo-ms", "17"),
		"isolation-max-p-wait":             append(kvcFlags, "--kvc-preset", "v4", "--isolation-max-p-wait", "7"),
		"isolation-ttft-slo-ms":            append(kvcFlags, "--kvc-preset", "v4", "--isolation-ttft-slo-ms", "1500"),
		"isolation-sooner-ratio":           append(kvcFlags, "--kvc-preset", "v4", "--isolation-sooner-ratio", "3"),
		"isolation-long-prefill":           append(kvcFlags, "--kvc-preset", "v4", "--isolation-long-prefill", "5"),
		"isolation-stay-class-tokens":      append(kvcFlags, "--kvc-preset", "v4", "--isolation-stay-class-tokens", "4096"),
		"cold-route-trim-weight":           append(kvcFlags, "--kvc-preset", "v4", "--cold-route-trim-weight", "0.5"),
		"isolation-home-reseed":            append(kvcFlags, "--kvc-preset", "v4", "--isolation-home-reseed"),
		"conditional-strategy":             with(cond, "--conditional-strategy", "isl_or_load"),
		"conditional-eff-isl-threshold":    with(cond, "--conditional-eff-isl-threshold", "4096"),
		"conditional-eff-isl-ratio":        with(cond, "--conditional-eff-isl-ratio", "0.6"),
		"conditional-prefill-busy":         with(cond, "--conditional-strategy", "prefill_load", "--conditional-prefill-busy", "2"),
		"conditional-decode-busy":          with(cond, "--conditional-decode-busy", "0.9"),
		"conditional-no-kv-events":         with(cond, "--conditional-no-kv-events"),
		"conditional-session-affinity-ttl": with(cond, "--conditional-session-affinity-ttl", "300"),
		"decider-non-cached-tokens":        with(decider, "--decider-non-cached-tokens", "16"),
		"decider-prompt-tokens":            with(decider, "--decider-prompt-tokens", "1000"),
		"ppd-ttft-weight":                  with(ppd, "--ppd-ttft-weight", "2.5"),
		"ppd-tpot-weight":                  with(ppd, "--ppd-tpot-weight", "0.5"),
		"rival-ttft-slo-ms":                with(deflect, "--rival-ttft-slo-ms", "1500"),
		"rival-tpot-slo-ms":                with(deflect, "--rival-tpot-slo-ms", "40"),
		"transfer-timeout":                 {"--transfer-timeout", "30"},
		"peer-failure":                     {"--peer-failure", "hair-trigger"},
		"breaker-failures":                 {"--breaker-failures", "5"},
		"breaker-window":                   {"--breaker-window", "20"},
		"breaker-cooldown":                 {"--breaker-cooldown", "10"},
		"out":                              nil, // where the files go
		"force":                            nil,
		"dump-profile":                     nil, // writes a profile and exits
	}
	base := []string{"sim", "--synth-sessions", "2", "--synth-requests", "12"}
	record := func(args []string) map[string]any {
		dir := filepath.Join(t.TempDir(), "run")
		full := append(append(append([]string(nil), base...), args...), "--out", dir)
		if _, se, err := runCLI(full...); err != nil {
			t.Fatalf("%v: %v\n%s", full, err, se)
		}
		files := map[string]any{}
		for _, f := range []string{"config.json", "summary.json"} {
			var m map[string]any
			if err := json.Unmarshal(mustRead(t, filepath.Join(dir, f)), &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "date")
			files[f] = m
		}
		return files
	}
	root := newRoot(&env{})
	cmd, _, _ := root.Find([]string{"sim"})
	var names []string
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	plain := record(nil)
	// A flag of one mechanism is compared with that mechanism's defaults
	// (its first --mechanism and the value of a strategy flag it needs).
	bases := map[string]map[string]any{}
	baseOf := func(args []string) map[string]any {
		if args[0] != "--mechanism" || len(args) <= 2 {
			return plain
		}
		key := args[:2]
		if (args[2] == "--conditional-strategy" || args[2] == "--kvc-preset") && len(args) > 4 {
			key = args[:4]
		}
		k := strings.Join(key, " ")
		if bases[k] == nil {
			bases[k] = record(key)
		}
		return bases[k]
	}
	for _, n := range names {
		args, ok := values[n]
		if !ok {
			t.Errorf("--%s has no entry in this test: say how it reaches the run files", n)
			continue
		}
		if args == nil {
			continue
		}
		ref := baseOf(args)
		if got := record(args); reflect.DeepEqual(got, ref) {
			t.Errorf("--%s (%v) changed nothing in config.json or summary.json", n, args)
		}
	}
	dir := filepath.Join(t.TempDir(), "preset")
	if _, se, err := runCLI("sim", "--workload", "seed-inferact", "--out", dir); err != nil {
		t.Fatalf("--workload seed-inferact: %v\n%s", err, se)
	}
	var sum struct {
		Workload string `json:"workload"`
		Requests int    `json:"requests"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "summary.json")), &sum); err != nil || sum.Requests != 1285 ||
		!strings.Contains(sum.Workload, "seed-inferact") {
		t.Errorf("--workload seed-inferact recorded %+v (%v)", sum, err)
	}
}
