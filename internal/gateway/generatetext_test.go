package gateway

import (
	"strings"
	"testing"
)

// A batch of prompts (text as a list) is named as what it is, not as a
// body without any prompt.
func TestGenerateBatchText(t *testing.T) {
	s := &Server{}
	_, err := s.newRequest(map[string]any{"text": []any{"a", "b"}}, identity{})
	if err == nil || !strings.Contains(err.Error(), "a list of prompts (a batch) is not supported") {
		t.Errorf("batch text: %v", err)
	}
	if _, err := s.newRequest(map[string]any{"rid": "x"}, identity{}); err == nil || !strings.Contains(err.Error(), "either text or input_ids") {
		t.Errorf("no prompt: %v", err)
	}
}
