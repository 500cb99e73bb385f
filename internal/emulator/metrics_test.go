package emulator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/pdhybrid/pdhybrid/internal/promtest"
)

// scrape parses /metrics with Prometheus' own text parser and returns each
// family's value: gauges and counters their value, histograms their count.
func scrape(t *testing.T, s *Server) map[string]float64 {
	t.Helper()
	fams := scrapeFamilies(t, s)
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out[name] += m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				out[name] += m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func scrapeFamilies(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	st, b := get(t, s.URL()+"/metrics")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	return promtest.Parse(t, bytes.NewReader(b))
}

// TestMetrics: SGLang's metric names, labels and values after a request.
func TestMetrics(t *testing.T) {
	s := start(t, Config{TimeScale: 100})
	post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, 2000), "sampling_params": map[string]any{"max_new_tokens": 10}})
	post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, 2000), "sampling_params": map[string]any{"max_new_tokens": 10}})
	fams := scrapeFamilies(t, s)
	for _, name := range []string{
		"sglang:num_running_reqs", "sglang:num_used_tokens", "sglang:token_usage", "sglang:gen_throughput",
		"sglang:num_queue_reqs", "sglang:cache_hit_rate", "sglang:max_total_num_tokens",
		"sglang:num_decode_prealloc_queue_reqs", "sglang:kv_transfer_latency_ms",
		"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total",
		"sglang:num_requests_total", "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
		"sglang:inter_token_latency_seconds", "sglang:queue_time_seconds",
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("no %s", name)
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["model_name"] != "qwen3-30b-a3b" || labels["engine_type"] != "unified" {
			t.Errorf("%s labels %v", name, labels)
		}
	}
	v := scrape(t, s)
	for name, want := range map[string]float64{
		"sglang:num_requests_total": 2, "sglang:prompt_tokens_total": 4000, "sglang:generation_tokens_total": 20,
		"sglang:time_to_first_token_seconds": 2,
		// all of the second prompt but the one token recomputed
		"sglang:cached_tokens_total":         1999,
		"sglang:inter_token_latency_seconds": 18, "sglang:num_running_reqs": 0,
		"sglang:max_total_num_tokens": float64(testProfile(t).KVPoolTokens(0)),
	} {
		if v[name] != want {
			t.Errorf("%s = %v, want %v", name, v[name], want)
		}
	}
	if r := v["sglang:cache_hit_rate"]; !(r > 0.45 && r < 0.5) {
		t.Errorf("cache_hit_rate %v, want 1999/4000", r)
	}
}

// TestLoads: /v1/loads in SGLang's shape, its include filter, the
// Prometheus format, and the /get_load shim.
func TestLoads(t *testing.T) {
	s := start(t, Config{TimeScale: 100})
	post(t, s.URL()+"/generate", map[string]any{"input_ids": ids(1, 500), "sampling_params": map[string]any{"max_new_tokens": 3}})
	st, b := get(t, s.URL()+"/v1/loads")
	var v map[string]any
	if err := json.Unmarshal(b, &v); st != 200 || err != nil {
		t.Fatalf("%d %s", st, b)
	}
	for _, k := range []string{"timestamp", "version", "dp_rank_count", "loads", "aggregate"} {
		if _, ok := v[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	l := v["loads"].([]any)[0].(map[string]any)
	for _, k := range []string{"dp_rank", "num_running_reqs", "num_waiting_reqs", "num_used_tokens", "max_total_num_tokens", "token_usage", "gen_throughput", "cache_hit_rate", "utilization", "max_running_requests", "num_total_reqs", "memory", "queues"} {
		if _, ok := l[k]; !ok {
			t.Errorf("no %q in the load", k)
		}
	}
	if _, ok := l["disaggregation"]; ok {
		t.Error("a colocated worker reports a disaggregation section")
	}
	if _, ok := l["num_resident_sessions"]; ok {
		t.Error("a worker without --session-cache reports num_resident_sessions")
	}
	if l["max_running_requests"].(float64) != 2048 || l["num_used_tokens"].(float64) != 0 {
		t.Errorf("load %v", l)
	}
	st, b = get(t, s.URL()+"/v1/loads?include=core")
	if json.Unmarshal(b, &v); st != 200 || v["loads"].([]any)[0].(map[string]any)["memory"] != nil {
		t.Errorf("include=core: %s", b)
	}
	st, b = get(t, s.URL()+"/v1/loads?include=bogus")
	if st != 400 || !strings.Contains(string(b), "Invalid include sections: {'bogus'}") {
		t.Errorf("include=bogus: %d %s", st, b)
	}
	st, b = get(t, s.URL()+"/v1/loads?format=prometheus")
	if promtest.Parse(t, bytes.NewReader(b)); st != 200 || !strings.Contains(string(b), `sglang_num_running_reqs{dp_rank="0"} 0`) {
		t.Errorf("format=prometheus: %d\n%s", st, b)
	}
	st, b = get(t, s.URL()+"/v1/models")
	if st != 200 || !strings.Contains(string(b), `"id":"qwen3-30b-a3b"`) {
		t.Errorf("/v1/models: %d %s", st, b)
	}
	if st, b = get(t, s.URL()+"/no/such/route"); st != 404 || string(b) != `{"detail":"Not Found"}` {
		t.Errorf("unknown route: %d %s", st, b)
	}
	st, b = get(t, s.URL()+"/get_load")
	var gl []map[string]float64
	if json.Unmarshal(b, &gl); st != 200 || len(gl) != 1 || gl[0]["num_reqs"] != 0 {
		t.Errorf("/get_load: %d %s", st, b)
	}
}
