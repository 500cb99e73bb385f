package gateway

import (
	"strings"
	"testing"
)

// errorMessage takes a worker's own message from either of SGLang's error
// shapes, else the body itself bounded to 512 bytes, else a stock line.
func TestErrorMessage(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"message":"prompt too long","code":400}}`, "prompt too long"},
		{`{"message":"bad temperature"}`, "bad temperature"},
		{`{"error":{"message":""},"message":"the outer one"}`, "the outer one"},
		{`{"error":"a string, not an object"}`, `{"error":"a string, not an object"}`},
		{`{"code":400}`, `{"code":400}`},
		{"  plain text refusal \n", "plain text refusal"},
		{long, long[:512]},
		{"", "the worker refused the request"},
		{"  \n", "the worker refused the request"},
	} {
		if got := errorMessage([]byte(tc.body)); got != tc.want {
			t.Errorf("errorMessage(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
