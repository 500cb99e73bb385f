package gateway

import (
	"encoding/json"
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

// max_new_tokens is the request's output budget as sent, 0 included (a
// prefill-only request); a negative or missing one leaves the default.
func TestGenerateMaxNewTokens(t *testing.T) {
	s := &Server{cfg: Config{BlockSize: 64}}
	for _, tc := range []struct {
		sampling map[string]any
		want     int
	}{
		{nil, 128},
		{map[string]any{"max_new_tokens": json.Number("0")}, 0},
		{map[string]any{"max_new_tokens": json.Number("1")}, 1},
		{map[string]any{"max_new_tokens": json.Number("300")}, 300},
		{map[string]any{"max_new_tokens": json.Number("-1")}, 128},
	} {
		body := map[string]any{"input_ids": []any{json.Number("1"), json.Number("2")}}
		if tc.sampling != nil {
			body["sampling_params"] = tc.sampling
		}
		q, err := s.newRequest(body, identity{})
		if err != nil {
			t.Fatal(err)
		}
		if q.output != tc.want {
			t.Errorf("sampling_params %v: output %d, want %d", tc.sampling, q.output, tc.want)
		}
	}
}
