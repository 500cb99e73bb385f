package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
)

// BenchmarkGenerateBody (body.go) is the gateway's own cost per /generate request of
// a 69k-token prompt (the agentic workload's mean): reading the body, what
// routing needs of it, and encoding it for a prefill and a decode leg.
func BenchmarkGenerateBody(b *testing.B) {
	ids := make([]int, 69000)
	for i := range ids {
		ids[i] = (i * 7919) % 151936
	}
	raw, _ := json.Marshal(map[string]any{"input_ids": ids, "stream": true, "session_id": "s1",
		"sampling_params": map[string]any{"max_new_tokens": 400, "temperature": 0}})
	s := &Server{cfg: Config{MaxBodyBytes: 64 << 20, BlockSize: 64}}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/generate", bytes.NewReader(raw))
		q, err := s.parseGenerate(r)
		if err != nil {
			b.Fatal(err)
		}
		for leg := 0; leg < 2; leg++ {
			body := clone(q.body)
			body["rid"] = "x"
			io.Copy(io.Discard, jsonReader(body))
		}
	}
}
