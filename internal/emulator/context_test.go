package emulator

import (
	"strings"
	"testing"
)

// TestContextBoundary: a prompt and its max_new_tokens that exactly fill
// the model's context are refused, as SGLang's tokenizer manager refuses
// them (`>=`, tokenizer_manager.py:650 at 0025436), with its text; one
// token fewer is served.
func TestContextBoundary(t *testing.T) {
	cfg := colo()
	cfg.Profile = testProfile(t)
	cfg.Profile.Model.MaxContext = 256
	s := start(t, cfg)
	for _, tc := range []struct {
		maxNew int
		status int
	}{{56, 400}, {55, 200}} {
		status, b := post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, 200), "sampling_params": map[string]any{"max_new_tokens": tc.maxNew}})
		if status != tc.status {
			t.Fatalf("200 + %d tokens in a 256-token context: %d %s, want %d", tc.maxNew, status, b, tc.status)
		}
		if status == 400 && !strings.Contains(string(b), "Requested token count exceeds the model's maximum context length of 256 tokens. You requested a total of 256 tokens") {
			t.Fatalf("refusal %s, want SGLang's text", b)
		}
	}
}
