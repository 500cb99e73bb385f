package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// Whatever body reaches a frontend, the gateway answers it — a 4xx for a
// body it cannot take, a 5xx naming the worker it could not reach (every
// worker here is unreachable) — and never panics or hangs.
func FuzzGatewayHandlers(f *testing.F) {
	paths := []string{"/generate", "/v1/completions", "/v1/chat/completions"}
	for _, s := range []string{
		`{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":4}}`,
		`{"text":"hello","stream":true,"session_id":"s"}`,
		`{"input_ids":[1,2,-3]}`, `{"input_ids":"x"}`, `{"text":7}`, `[]`, `{`, ``,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","prompt":"hello","max_tokens":3}`, `{"model":"m","prompt":["a","b"]}`,
		`{"input_ids":[1e400]}`, `{"session_params":{"id":5}}`,
	} {
		for i := range paths {
			f.Add(uint8(i), s)
		}
	}
	var servers []*Server
	for _, mech := range []kvc.Mechanism{kvc.MechKVC, kvc.MechPD, kvc.MechColo} {
		cfg := Config{Retries: -1, Health: HealthConfig{Interval: -1}, Dispatch: kvc.Defaults(mech)}
		cfg.LoadPoll = -1
		if mech == kvc.MechColo {
			cfg.Colo = []string{"http://127.0.0.1:1"}
		} else {
			cfg.Prefill, cfg.Decode = []Prefill{{URL: "http://127.0.0.1:1", BootstrapPort: 1}}, []string{"http://127.0.0.1:1"}
		}
		g, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(g.Close)
		servers = append(servers, g)
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := paths[int(which)%len(paths)]
		for _, g := range servers {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			g.Handler().ServeHTTP(rec, req)
			if rec.Code == http.StatusOK && !strings.Contains(rec.Body.String(), "error") {
				t.Fatalf("%s %q answered 200 with every worker down: %s", path, body, rec.Body.String())
			}
		}
	})
}
