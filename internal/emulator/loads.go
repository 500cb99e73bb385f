package emulator

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// /v1/loads and the /get_load shim, from a snapshot of the worker
// (metrics.go).

// loadSections are /v1/loads' include options.
var loadSections = []string{"all", "core", "disagg", "lora", "memory", "queues", "spec"}

func (s *Server) handleLoads(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	q := r.URL.Query()
	inc := map[string]bool{"all": true}
	if v := q.Get("include"); v != "" {
		inc = map[string]bool{}
		var bad []string
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if !contains(loadSections, p) {
				bad = append(bad, "'"+p+"'")
			}
			inc[p] = true
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("Invalid include sections: {%s}. Valid options: ['%s']", strings.Join(bad, ", "), strings.Join(loadSections, "', '")))
			return
		}
	}
	has := func(sec string) bool { return inc["all"] || inc[sec] }
	rank := -1
	if v := q.Get("dp_rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeValidation(w, fmt.Sprintf("dp_rank %q: want an integer", v))
			return
		}
		rank = n
	}
	l, ok := s.snapshotOr503(w)
	if !ok {
		return
	}
	load := map[string]any{}
	if has("core") {
		for k, v := range map[string]any{
			"dp_rank": 0, "num_running_reqs": l.running, "num_waiting_reqs": l.waiting,
			"num_used_tokens": l.used - l.cached, "num_total_tokens": l.used - l.cached + l.pendingPrefill,
			"max_total_num_tokens": l.capacity, "token_usage": round(l.tokenUsage, 4),
			"gen_throughput": round(l.genTput, 2), "cache_hit_rate": round(l.hitRate, 4),
			"utilization": round(l.util, 4), "max_running_requests": l.maxRunning,
			"num_total_reqs": l.running + l.waiting,
		} {
			load[k] = v
		}
		if s.cfg.Session.Enabled {
			// Extension: SGLang reports no session count. The KVC decoder
			// reports the sessions it holds (pinned, or with a request
			// here), the ones its --session-cap counts.
			load["num_resident_sessions"] = l.sessions
		}
	} else {
		load["dp_rank"] = 0
	}
	if has("memory") {
		m := s.cfg.Profile.Model
		load["memory"] = map[string]any{
			"weight_gb": round(float64(m.WeightBytes)/(1<<30), 2), "kv_cache_gb": round(float64(l.capacity*s.kvBytes)/(1<<30), 2),
			"graph_gb": 0, "token_capacity": l.capacity,
		}
	}
	if has("disagg") && s.cfg.Role != engine.RoleColocated {
		load["disaggregation"] = map[string]any{
			"mode": s.disaggMode(), "prefill_prealloc_queue_reqs": l.prefillPrealloc, "prefill_inflight_queue_reqs": l.prefillInflight,
			"decode_prealloc_queue_reqs": l.decodePrealloc, "decode_transfer_queue_reqs": l.decodeTransfer,
			"decode_retracted_queue_reqs": 0, "kv_transfer_speed_gb_s": round(l.kv.speedGBs(), 3),
			"kv_transfer_latency_ms": round(l.kv.lastLatency*1e3, 3),
		}
	}
	if has("queues") {
		load["queues"] = map[string]any{"waiting": l.waiting, "grammar": 0, "paused": 0, "retracted": 0}
	}
	loads := []map[string]any{load}
	if rank > 0 {
		loads = nil
	}
	if q.Get("format") == "prometheus" {
		writeLoadsPrometheus(w, loads)
		return
	}
	agg := map[string]any{"total_running_reqs": 0, "total_waiting_reqs": 0, "total_reqs": 0, "avg_token_usage": 0.0, "avg_throughput": 0.0, "avg_utilization": 0.0}
	if len(loads) > 0 && has("core") {
		agg = map[string]any{
			"total_running_reqs": l.running, "total_waiting_reqs": l.waiting, "total_reqs": l.running + l.waiting,
			"avg_token_usage": round(l.tokenUsage, 4), "avg_throughput": round(l.genTput, 2), "avg_utilization": round(l.util, 4),
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"timestamp": s.cfg.Clock.Now().UTC().Format(time.RFC3339Nano), "version": Version,
		"dp_rank_count": len(loads), "loads": loads, "aggregate": agg,
	})
}

// writeLoadsPrometheus is /v1/loads?format=prometheus: sglang_<field>
// gauges labelled by dp_rank, sections as sglang_<section>_<field>.
func writeLoadsPrometheus(w http.ResponseWriter, loads []map[string]any) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var lines []string
	for _, l := range loads {
		var keys []string
		for k := range l {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := l[k].(type) {
			case map[string]any:
				prefix := map[string]string{"disaggregation": "disagg"}[k]
				if prefix == "" {
					prefix = k
				}
				var sub []string
				for sk := range v {
					sub = append(sub, sk)
				}
				sort.Strings(sub)
				for _, sk := range sub {
					if num, ok := number(v[sk]); ok {
						lines = append(lines, fmt.Sprintf("# TYPE sglang_%s_%s gauge", prefix, sk), fmt.Sprintf(`sglang_%s_%s{dp_rank="0"} %v`, prefix, sk, num))
					}
				}
			default:
				if k == "dp_rank" {
					continue
				}
				if num, ok := number(v); ok {
					lines = append(lines, fmt.Sprintf("# TYPE sglang_%s gauge", k), fmt.Sprintf(`sglang_%s{dp_rank="0"} %v`, k, num))
				}
			}
		}
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// handleGetLoad is the deprecated /get_load: one GetLoadReqOutput per DP
// rank.
func (s *Server) handleGetLoad(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	l, ok := s.snapshotOr503(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"dp_rank": 0, "num_reqs": l.running + l.waiting, "num_waiting_reqs": l.waiting, "num_tokens": l.used - l.cached,
	}})
}
