package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// A prefill worker's 4xx on the PD prefill leg (the worker judged the
// request itself: a prompt past its context, say) reaches the client as
// that 4xx in the API's shape, with the worker's message: not a 503 that
// SDKs retry as an outage.
func TestPrefillClientErrorRelayed(t *testing.T) {
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error": {"message": "the prompt is longer than the model's context length", "code": 400}}`))
	}))
	t.Cleanup(p.Close)
	d := worker(t, engine.RoleDecode, false)
	g, err := New(Config{Prefill: []Prefill{{URL: p.URL, BootstrapPort: 1}}, Decode: []string{d.URL()}, Health: HealthConfig{Interval: -1},
		Dispatch: kvc.Defaults(kvc.MechPD)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	gw := serveGateway(g)
	t.Cleanup(gw.Close)
	for _, c := range []struct {
		path, body, shape string
	}{
		{"/generate", `{"text": "hi", "sampling_params": {"max_new_tokens": 4}}`, `"code":400`},
		{"/v1/completions", `{"model": "m", "prompt": "hi", "max_tokens": 4}`, `"type":"invalid_request_error"`},
		{"/v1/messages", `{"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}`, `"type":"invalid_request_error"`},
	} {
		status, b, h := postRaw(t, gw.URL+c.path, "application/json", c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(b), c.shape) || !strings.Contains(string(b), "context length") || h.Get("Retry-After") != "" {
			t.Errorf("%s: %d %s (Retry-After %q), want 400 with the worker's message and %s", c.path, status, b, h.Get("Retry-After"), c.shape)
		}
	}
	settled(t, d.URL())
}
