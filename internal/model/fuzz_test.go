package model

import (
	"bytes"
	"testing"
)

// FuzzDecode: any input either decodes to a valid profile or fails with an
// error; it never panics, and a valid profile has a positive KV pool and no
// negative server limit.
func FuzzDecode(f *testing.F) {
	b, _ := builtin.ReadFile("profiles/qwen3-30b-a3b_h100-80g.json")
	f.Add(b)
	b2, _ := builtin.ReadFile("profiles/qwen3-30b-a3b_h200-141g.json")
	f.Add(b2)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"model":{"layers":-1}}`))
	f.Add([]byte(`{"timing":{"prefill_per_token_s":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		if p.KVPoolTokens(0) <= 0 || p.Model.KVBytesPerToken() <= 0 {
			t.Fatalf("accepted a profile with no KV pool: %+v", p)
		}
		if s := p.Server; s != nil && (s.MaxRunningRequests < 0 || s.ChunkedPrefillSize < 0 || s.CUDAGraphMaxBatch < 0) {
			t.Fatalf("accepted negative server limits: %+v", s)
		}
	})
}
