package emulator

import (
	"cmp"
	"net/http"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// The small endpoints: health, server and model info, cache flush, aborts.

// Version is what the worker reports as its version.
const Version = "pdhybrid-emulator"

// KVCProtocolVersion is the version of the KVC worker contract this worker
// implements (docs/worker-protocol.md), advertised in /server_info as
// kvc_protocol.version with the features it offers.
const KVCProtocolVersion = 1

// The KVC contract's features, as kvc_protocol.features names them.
const (
	FeatureSessionCache = "session_cache"   // decode: admission RPC, direct append, lookup
	FeatureSnapshotDump = "snapshot_dump"   // decode: /_snapshot/dump
	FeatureSnapshotSink = "snapshot_ingest" // prefill: prepare_receive, finalize_ingest, release
	FeatureServeWhole   = "serve_whole"     // prefill: a request without a room served whole
)

// kvcFeatures is what this worker offers of the KVC contract; nil for a
// worker that is exactly stock SGLang.
func (s *Server) kvcFeatures() []string {
	var f []string
	if s.cfg.Session.Enabled {
		f = append(f, FeatureSessionCache, FeatureSnapshotDump)
	}
	if s.kvEvents != nil {
		f = append(f, FeatureKVEvents)
	}
	if s.cfg.SnapshotSync {
		f = append(f, FeatureSnapshotSink)
	}
	if s.cfg.ServeWhole {
		f = append(f, FeatureServeWhole)
	}
	return f
}

// handleHealth is /health and /health_generate: 503 while starting or
// shutting down; otherwise 200 once the driver answers (SGLang runs a
// one-token probe; the emulator checks that its scheduler loop is alive,
// which is what the probe proves).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	if s.exiting.Load() || !s.ready.Load() || !s.d.do(func(float64) {}) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleServerInfo is /server_info (and the older /get_server_info): the
// server arguments SGLang reports, under its names, plus the emulator's own
// under "pdhybrid".
func (s *Server) handleServerInfo(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	l, ok := s.snapshotOr503(w)
	if !ok {
		return
	}
	c := s.cfg
	info := map[string]any{
		"model_path": c.Profile.Model.Name, "served_model_name": c.ServedModelName, "tokenizer_path": nil,
		"disaggregation_mode": s.disaggMode(), "disaggregation_transfer_backend": "pdhybrid-emulated",
		"page_size": c.BlockSize, "chunked_prefill_size": c.ChunkTokens, "max_running_requests": l.maxRunning,
		"max_total_num_tokens": l.capacity, "context_length": c.Profile.Model.MaxContext,
		"tp_size": 1, "dp_size": 1, "enable_mixed_chunk": c.MixedChunk,
		"enable_hierarchical_cache": c.HiCache.Enabled, "hicache_ratio": cmp.Or(c.HiCache.Ratio, engine.DefaultHiCacheRatio),
		"hicache_size": float64(c.HiCache.SizeBytes) / 1e9, "hicache_write_policy": c.HiCache.WritePolicy.String(),
		"incremental_streaming_output": c.IncrementalStream, "version": Version,
		"internal_states": []map[string]any{{
			"num_running_reqs": l.running, "num_waiting_reqs": l.waiting, "token_usage": l.tokenUsage,
			"cache_hit_rate": l.hitRate, "kv_waits": l.stats.KVWaits,
		}},
	}
	if c.Role == engine.RolePrefill {
		info["disaggregation_bootstrap_port"] = s.BootstrapPort()
	}
	if st := c.HiCache.Storage; st.Enabled {
		// The storage pool (a shared one is read through its service).
		var used, pool int64
		s.d.do(func(float64) { used, pool = s.w.StorageUsed(), s.w.StorageCapacity() })
		info["hicache_storage_backend"] = st.Backend
		info["hicache_storage_prefetch_policy"] = st.Prefetch.String()
		info["pdhybrid_storage"] = map[string]any{"pool_tokens": pool, "used_tokens": used, "shared": st.Index != nil,
			"prefetched_tokens": l.stats.StoragePrefetchedTokens}
	}
	if c.Role == engine.RoleDecode {
		// SGLang's server args under their own names (server_info dumps
		// ServerArgs); the second is draft PR #34773's.
		info["disaggregation_decode_enable_radix_cache"] = c.DecodeRadix
		info["disaggregation_decode_enable_conditional_agg"] = c.ConditionalAgg
	}
	if f := s.kvcFeatures(); len(f) > 0 {
		info["kvc_protocol"] = map[string]any{"version": KVCProtocolVersion, "features": f}
	}
	ext := map[string]any{
		"role": s.roleName(), "profile": c.Profile.Name, "time_scale": c.TimeScale,
		"bytes_per_text_token": BytesPerToken, "block_size": c.BlockSize,
		"bootstrap_timeout_s": c.BootstrapTimeout, "waiting_timeout_s": c.WaitingTimeout,
		"session_cache": c.Session.Enabled, "url": s.url,
		"tpot_slo_ms": c.SliceTPOTS * 1000, // KVC v4's decode slicing; 0 = off
	}
	if c.Role == engine.RolePrefill {
		ext["link"] = c.Link
		// KVC v4's prefill bypass (engine/pbypass.go); 0 and false = off.
		ext["prefill_bypass_tokens"], ext["prefill_bypass_ahead"] = c.PrefillBypassTokens, c.PrefillBypassAhead
	}
	info["pdhybrid"] = ext
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleModelInfo(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": s.cfg.Profile.Model.Name, "tokenizer_path": nil, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default",
	})
}

// handleModels is OpenAI's model list, as SGLang serves it.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	name := s.cfg.ServedModelName
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{{
		"id": name, "object": "model", "created": 0, "owned_by": "sglang", "root": name,
		"max_model_len": s.cfg.Profile.Model.MaxContext,
	}}})
}

// handleFlushCache is /flush_cache: the prefix cache is emptied only when
// nothing runs or waits, as SGLang does. The engine has no flush, so the
// emulator starts a fresh worker of the same configuration and keeps the
// old one's counters.
func (s *Server) handleFlushCache(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	flushed := false
	var err error
	s.d.do(func(float64) {
		if len(s.reqs) > 0 || len(s.rooms) > 0 || s.w.Running() > 0 || s.w.Queued() > 0 || (s.d.link != nil && s.d.link.Active() > 0) {
			return
		}
		var nw *engine.Worker
		if nw, err = s.newWorker(); err != nil {
			return
		}
		s.base = s.stats()
		s.w, s.d.w = nw, nw
		s.tails = tailKeys{cap: s.tails.cap}
		flushed = true
		if s.kvEvents != nil {
			s.kvEvents.publish(s.wallSeconds(), KVEvent{Type: KVEventAllBlocksCleared})
		}
	})
	if err != nil {
		writeHTTPError(w, http.StatusInternalServerError, err.Error())
		return
	}
	status := http.StatusOK
	if !flushed {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"))
}

// handleAbort is /abort_request {"rid", "abort_all"}: the request ends with
// finish_reason abort; its KV is freed at once (a step in progress still
// completes, as on a GPU).
func (s *Server) handleAbort(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		RID      *string `json:"rid"`
		AbortAll bool    `json:"abort_all"`
	}
	if err := strictJSON(body, &in); err != nil {
		writeValidation(w, "invalid /abort_request body: "+jsonMsg(err))
		return
	}
	s.d.do(func(now float64) {
		var list []*reqState
		if in.AbortAll {
			for _, st := range s.reqs {
				list = append(list, st)
			}
		} else if in.RID != nil {
			if st := s.reqs[*in.RID]; st != nil {
				list = append(list, st)
			}
		}
		for _, st := range list {
			msg := "Aborted"
			switch st.er.Stage {
			case engine.StageNew, engine.StageWaiting, engine.StageReserved:
				msg = "Abort before prefill"
			}
			s.abortReq(now, st, msg)
		}
	})
	w.WriteHeader(http.StatusOK)
}
