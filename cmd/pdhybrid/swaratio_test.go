package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const gptOSSConfig = "../../internal/model/testdata/hf/gpt-oss-120b.json"

// --swa-full-tokens-ratio sizes SGLang's sliding pool for GPT-OSS-120B:
// at 0.5 a pool token costs the 18 full layers' 36,864 bytes plus half of
// the 18 sliding layers', 18,432: 55,296 (66,355 at the default 0.8). The
// value reaches the run files through the recorded profile, on sim, and
// bench, sweep, floor and worker validate it the same way: a bad value
// names the flag and its range.
func TestSWARatioFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, se, err := runCLI("sim", "--model-config", gptOSSConfig, "--hardware", "h200", "--swa-full-tokens-ratio", "0.5",
		"--synth-sessions", "2", "--synth-requests", "12", "--out", dir); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pool_bytes_per_token": 55296`, "--swa-full-tokens-ratio 0.5 of them"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	def := filepath.Join(t.TempDir(), "p.json")
	if _, se, err := runCLI("sim", "--model-config", gptOSSConfig, "--hardware", "h200", "--dump-profile", def); err != nil {
		t.Fatalf("%v\n%s", err, se)
	}
	if b, _ := os.ReadFile(def); !strings.Contains(string(b), `"pool_bytes_per_token": 66355`) {
		t.Errorf("default ratio: the profile lacks SGLang's 0.8 (66,355 bytes a pool token)")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--model-config", gptOSSConfig, "--swa-full-tokens-ratio", "1.5"}, "--swa-full-tokens-ratio 1.5"},
		{[]string{"sim", "--model-config", gptOSSConfig, "--swa-full-tokens-ratio", "0"}, "--swa-full-tokens-ratio 0"},
		{[]string{"bench", "--model-config", gptOSSConfig, "--swa-full-tokens-ratio", "-1"}, "--swa-full-tokens-ratio -1"},
		{[]string{"floor", "--model-config", gptOSSConfig, "--swa-full-tokens-ratio", "2"}, "--swa-full-tokens-ratio 2"},
		{[]string{"worker", "--role", "colo", "--model-config", gptOSSConfig, "--swa-full-tokens-ratio", "2"}, "--swa-full-tokens-ratio 2"},
		{[]string{"sweep", "--out", filepath.Join(t.TempDir(), "sweep"), "--set", "swa-full-tokens-ratio=0.5,3", "--", "--model-config", gptOSSConfig}, "--swa-full-tokens-ratio 3"},
		{[]string{"sim", "--swa-full-tokens-ratio", "0.5"}, "with --model-config"},
	} {
		_, se, err := runCLI(c.args...)
		if err == nil || !strings.Contains(se, c.want) || (c.want != "with --model-config" && !strings.Contains(se, "(0, 1]")) {
			t.Errorf("%v: %v\n%s\nwant an error naming %q and the range", c.args, err, se, c.want)
		}
	}
}
