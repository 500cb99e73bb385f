package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// serve --model-config: the front door's context comes from the config
// (Qwen2.5-32B: 32,768 positions stretched 4× by YaRN), --context-tokens
// overrides it, and a file that is not a config is a usage error naming
// the flag.
func TestServeModelConfigContext(t *testing.T) {
	qwen := filepath.Join("..", "..", "internal", "model", "testdata", "hf", "qwen2.5-32b-instruct.json")
	for _, c := range []struct {
		o    opsFlags
		want int
	}{
		{opsFlags{modelConfig: qwen}, 131072},
		{opsFlags{modelConfig: qwen, contextTokens: 4096}, 4096},
		{opsFlags{contextTokens: 2048}, 2048},
		{opsFlags{}, 0},
	} {
		if got, err := c.o.servedContext(); err != nil || got != c.want {
			t.Errorf("%+v: context %d (%v), want %d", c.o, got, err, c.want)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"num_hidden_layers": 0}`), 0o644)
	_, stderr, err := runCLI("serve", "--mechanism", "pd-colo", "--colo", "http://127.0.0.1:1", "--port", "0", "--model-config", bad)
	if first, _, _ := strings.Cut(stderr, "\n"); exitCode(err) != exitUsage || !strings.Contains(first, "--model-config") || !strings.Contains(first, "num_hidden_layers") {
		t.Errorf("bad config: exit %d, %q; want a usage error naming --model-config and the field", exitCode(err), first)
	}
}

// The gateway holds prompts to the config's context before any worker sees
// them: with 64 positions, 60 prompt tokens and 10 new ones are a 400, and
// 60 + 2 are served.
func TestServeModelConfigHoldsTheContext(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
		"num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 64}`), 0o644)
	w := emulatortest.Start(t, engine.RoleColocated, false, emulator.Faults{})
	gw, _ := startServe(t, "serve", "--mechanism", "pd-colo", "--colo", w.URL(), "--port", "0", "--model-config", cfg)
	ids := make([]int, 60)
	for i := range ids {
		ids[i] = i + 1
	}
	for _, c := range []struct{ newTokens, status int }{{10, http.StatusBadRequest}, {2, http.StatusOK}} {
		body, _ := json.Marshal(map[string]any{"input_ids": ids, "sampling_params": map[string]any{"max_new_tokens": c.newTokens}})
		resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("60 + %d tokens against a 64-token context: %d %s, want %d", c.newTokens, resp.StatusCode, b, c.status)
		}
	}
}
