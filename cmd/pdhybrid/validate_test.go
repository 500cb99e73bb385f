package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testConfig = "../../internal/model/testdata/hf/qwen2.5-32b-instruct.json"

func TestModelConfigFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--tp", "2"}, "--tp"},
		{[]string{"sim", "--model-config", testConfig, "--model", "qwen3-30b-a3b"}, "--model"},
		{[]string{"sim", "--model-config", testConfig, "--tp", "3"}, "does not divide"},
		{[]string{"sim", "--model-config", testConfig, "--hardware", "tpu"}, "unknown GPU"},
		{[]string{"sim", "--model-config", testConfig, "--kv-dtype", "fp4"}, "--kv-dtype"},
		{[]string{"sim", "--scheduler", "trt"}, "--scheduler"},
		{[]string{"sim", "--model-config", "nope.json"}, "--model-config"},
		{[]string{"validate", "--jobs", "0"}, "--jobs"},
		{[]string{"validate", "--data", "nope"}, "--data nope"},
		{[]string{"calibrate", "realruns", "--rounds", "-1"}, "--rounds"},
	} {
		_, se, err := runCLI(c.args...)
		if exitCode(err) != exitUsage || !strings.Contains(se, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %q", c.args, exitCode(err), se, c.want)
		}
	}
}

// The profile --model-config builds: TP4 on H100, the vLLM scheduler when
// asked, the sources kept.
func TestModelConfigDumpProfile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.json")
	if _, se, err := runCLI("sim", "--model-config", testConfig, "--tp", "4", "--hardware", "h100-80g", "--scheduler", "vllm", "--dump-profile", out); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "qwen2.5-32b-instruct/h100-sxm-tp4"`, `"scheduler": "vllm"`, "roofline on the h100-sxm datasheet"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("dumped profile lacks %s", want)
		}
	}
}

// Experiment A's topology: 1P7D of TP4 workers serving a dense 32 B model
// from its config runs naive PD, DP and KVC.
func TestBenchModelConfigExperimentA(t *testing.T) {
	so, se, err := runCLI("bench", "--model-config", testConfig, "--tp", "4", "--hardware", "h100-sxm", "--gpus", "8", "--synth-sessions", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	for _, want := range []string{"naive-pd-1p7d", "dp-x8", "kvc-", "1p7d", "qwen2.5-32b-instruct"} {
		if !strings.Contains(so+se, want) {
			t.Errorf("bench output lacks %q:\n%s", want, so)
		}
	}
}

// validate on the real runs, one run only (the 7B codegen run is the
// fastest), prints real and simulated columns.
func TestTraceConvertRealRun(t *testing.T) {
	files, _ := filepath.Glob("../../../shared/realruns/runs/*llama-2-7b-tp1-codegen.csv")
	if len(files) == 0 {
		t.Skip("../shared/realruns absent (a fresh clone has no ../shared)")
	}
	out := filepath.Join(t.TempDir(), "t.jsonl")
	if _, se, err := runCLI("trace", "convert", "--from", "realrun", "--out", out, files[0]); err != nil || !strings.Contains(se, "wrote 9000 requests (block size 16)") {
		t.Fatalf("%v\n%s", err, se)
	}
	so, se, err := runCLI("sim", "--trace", out, "--mechanism", "pd-colo", "--colo", "1", "--model-config", "../../../shared/realruns/model_configs/Llama-2-7b-hf.json",
		"--hardware", "h100-sxm", "--engine", "vllm", "--max-running", "128", "--chunk-tokens", "2048", "--timeout", "300")
	if err != nil || !strings.Contains(so, "9000") {
		t.Fatalf("sim on the converted run: %v\n%s\n%s", err, so, se)
	}
}

// worker and floor take --model-config too: the emulated worker serves the
// config's model (its name, context and the pool the roofline gives 4×
// H100 for Qwen2.5-32B), and floor times the workload on it.
func TestWorkerAndFloorModelConfig(t *testing.T) {
	w := startWorker(t, "--role", "colo", "--model-config", testConfig, "--tp", "4", "--hardware", "h100-sxm")
	resp, err := http.Get(w.url + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Model   string `json:"model_path"`
		Context int    `json:"context_length"`
		Tokens  int64  `json:"max_total_num_tokens"`
		Ext     struct {
			Profile string `json:"profile"`
		} `json:"pdhybrid"`
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.Model != "qwen2.5-32b-instruct" || info.Context != 131072 || info.Ext.Profile != "qwen2.5-32b-instruct/h100-sxm-tp4" || info.Tokens < 500_000 {
		t.Errorf("/server_info %+v (%v); want Qwen2.5-32B at 131,072 tokens of context on h100-sxm-tp4 with a pool over 500K tokens", info, err)
	}
	so, se, err := runCLI("floor", "--model-config", testConfig, "--tp", "4", "--hardware", "h100-sxm", "--synth-sessions", "4")
	if err != nil || !strings.Contains(so, "TTFT floor") {
		t.Fatalf("floor --model-config: %v\n%s\n%s", err, so, se)
	}
}
