package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// The extension rules (docs/worker-protocol.md, "The KVC extension"), each
// checked where the worker offers the part it belongs to.

func itoa(n int) string { return strconv.Itoa(n) }

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// decodeModes checks upstream SGLang's conditional aggregation: with the
// flag a do_local_prefill request is served on the decoder; without it the
// request is refused like any raw one.
func (r *run) decodeModes() {
	on := r.info["disaggregation_decode_enable_conditional_agg"] == true
	body := map[string]any{"input_ids": prompt(3, 40), "do_local_prefill": true, "sampling_params": map[string]any{"max_new_tokens": 4}}
	p := r.post("/generate", body)
	switch {
	case on:
		if why := answerProblem(p, 40, 4); why != "" {
			r.add("upstream.conditional-agg", Fail, "advertised, but do_local_prefill: %s", why)
		} else {
			r.add("upstream.conditional-agg", Pass, "do_local_prefill served on the decoder")
		}
	case p.err == nil && p.status == http.StatusBadRequest:
		r.add("upstream.conditional-agg", NotOffered, "not advertised; do_local_prefill refused 400 like any raw request")
	default:
		r.add("upstream.conditional-agg", Fail, "not advertised, but do_local_prefill answered %s, want 400 (no bootstrap room)", p.short())
	}
}

// admit is one admission RPC.
func (r *run) admit(session string, ids []int) reply {
	return r.post("/session_cache/admit_direct_append", map[string]any{"session_id": session, "input_ids": ids, "max_new_tokens": 4})
}

// admissionProblem checks an admission answer's schema.
func admissionProblem(p reply) string {
	if p.err != nil || p.status != http.StatusOK || p.v == nil {
		return "admission: " + p.short() + ", want 200 and a JSON object"
	}
	if _, ok := p.v["can_admit"].(bool); !ok {
		return "can_admit " + jsonText(p.v["can_admit"]) + ", want true or false"
	}
	switch p.v["mode"] {
	case "direct_append", "seed", "none":
	default:
		return "mode " + jsonText(p.v["mode"]) + ", want direct_append, seed or none"
	}
	if _, ok := p.v["reason"].(string); !ok {
		return "reason " + jsonText(p.v["reason"]) + ", want a string"
	}
	for _, k := range []string{"cached_tokens", "recommended_pause_ms"} {
		if v, ok := num(p.v, k); !ok || v < 0 {
			return k + " " + jsonText(p.v[k]) + ", want a number ≥ 0"
		}
	}
	if p.v["can_admit"] == true && p.v["mode"] == "none" {
		return `can_admit true with mode "none"`
	}
	if q, in := p.v["storage_queue_ms"]; in {
		// Revision 1.4, optional: left out when nothing is booked. The
		// gateway reads a bad one as absent; a conformant worker sends none.
		if v, ok := q.(float64); !ok || v < 0 {
			return "storage_queue_ms " + jsonText(q) + ", want a number ≥ 0 (milliseconds), or the field left out"
		}
	}
	return ""
}

// sessionCache checks the admission RPC, lookup and direct appends; it
// leaves r.resident set to a session it made resident (for the dump).
func (r *run) sessionCache() {
	if !r.offered("extension.session-cache.advertised", "session_cache", "/session_cache/admit_direct_append") {
		return
	}
	if v, _ := r.advertised(); v != 1 {
		r.add("extension.version", Fail, "kvc_protocol.version %v, want 1", v)
	} else {
		r.add("extension.version", Pass, "1")
	}
	fresh := r.session()
	bs := r.pageSize()
	p1 := prompt(4, 3*bs)
	a1, a2 := r.admit(fresh, p1), r.admit(fresh, p1)
	if why := admissionProblem(a1); why != "" {
		r.add("extension.admission.schema", Fail, "%s", why)
		return
	}
	r.add("extension.admission.schema", Pass, "can_admit, mode, reason, cached_tokens, recommended_pause_ms")
	if a1.v["mode"] == "direct_append" {
		r.add("extension.admission.fresh-session-not-direct", Fail, "a session this worker never saw was admitted direct_append (it holds none of its KV)")
	} else {
		r.add("extension.admission.fresh-session-not-direct", Pass, "mode %v", a1.v["mode"])
	}
	if a2.v["mode"] != a1.v["mode"] || a2.v["can_admit"] != a1.v["can_admit"] {
		r.add("extension.admission.query-only", Fail, "the same admission twice answered mode %v then %v: an admission must not change what it answers", a1.v["mode"], a2.v["mode"])
	} else {
		r.add("extension.admission.query-only", Pass, "same answer twice")
	}
	if p := r.post("/session_cache/admit_direct_append", map[string]any{"input_ids": p1}); p.err != nil || p.status != http.StatusBadRequest {
		r.add("extension.admission.validation", Fail, "an admission without session_id: %s, want 400", p.short())
	} else {
		r.add("extension.admission.validation", Pass, "400 without session_id")
	}
	if p := r.post("/session_cache/lookup", map[string]any{"session_id": fresh, "input_ids": p1}); p.err != nil || p.status != http.StatusOK || p.v["resident"] != false {
		r.add("extension.lookup.fresh", Fail, "lookup of a session never seen: %s, want 200 and resident false", p.short())
	} else {
		r.add("extension.lookup.fresh", Pass, "resident false")
	}
	// A direct append makes the session resident; its next turn finds the
	// first's whole blocks.
	sess := r.session()
	d1 := r.post("/generate", map[string]any{"input_ids": p1, "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 4}})
	if why := answerProblem(d1, len(p1), 4); why != "" {
		r.add("extension.direct-append", Fail, "a /generate naming a session and no room: %s", why)
		return
	}
	r.add("extension.direct-append", Pass, "served on the decoder")
	outIDs, _ := d1.v["output_ids"].([]any)
	next := append([]int{}, p1...)
	for _, x := range outIDs {
		if f, ok := x.(float64); ok {
			next = append(next, int(f))
		}
	}
	next = append(next, prompt(5, 20)...)
	if p := r.post("/session_cache/lookup", map[string]any{"session_id": sess, "input_ids": next}); p.err != nil || p.status != http.StatusOK || p.v["resident"] != true {
		r.add("extension.lookup.resident", Fail, "lookup after a finished direct append: %s, want resident true", p.short())
	} else if c, _ := num(p.v, "cached_tokens"); int(c) < len(p1) {
		r.add("extension.lookup.resident", Fail, "cached_tokens %d, want ≥ %d (the first turn's whole blocks)", int(c), len(p1))
	} else {
		r.add("extension.lookup.resident", Pass, "resident, %d cached", int(c))
	}
	if a := r.admit(sess, next); admissionProblem(a) != "" || a.v["mode"] != "direct_append" || a.v["can_admit"] != true {
		r.add("extension.admission.resident-direct", Fail, "admission of the resident session's next turn: %s, want can_admit true, mode direct_append", a.short())
	} else {
		r.add("extension.admission.resident-direct", Pass, "direct_append")
	}
	d2 := r.post("/generate", map[string]any{"input_ids": next, "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 4}})
	if why := answerProblem(d2, len(next), 4); why != "" {
		r.add("extension.direct-append.cached", Fail, "second direct append: %s", why)
	} else if mi, _ := d2.v["meta_info"].(map[string]any); int(mustNum(mi, "cached_tokens")) < len(p1) {
		r.add("extension.direct-append.cached", Fail, "cached_tokens %v, want ≥ %d: the session's KV was not reused", mi["cached_tokens"], len(p1))
	} else {
		r.add("extension.direct-append.cached", Pass, "cached_tokens %v", mi["cached_tokens"])
	}
	r.resident = sess
}

func mustNum(v map[string]any, k string) float64 {
	f, _ := num(v, k)
	return f
}

// snapshotDump checks a decoder's /_snapshot/dump.
func (r *run) snapshotDump() {
	if !r.offered("extension.snapshot-dump.advertised", "snapshot_dump", "/_snapshot/dump") {
		return
	}
	if p := r.post("/_snapshot/dump", map[string]any{"session_id": r.session()}); p.err != nil || p.status != http.StatusOK || p.v["ok"] != false || p.v["reason"] != "session-not-resident" {
		r.add("extension.dump.not-resident", Fail, "dump of a session not held: %s, want 200 ok false reason session-not-resident", p.short())
	} else {
		r.add("extension.dump.not-resident", Pass, "session-not-resident")
	}
	if r.resident == "" {
		r.add("extension.dump.resident", NotOffered, "no resident session to dump (the session cache's checks did not make one)")
		return
	}
	p := r.post("/_snapshot/dump", map[string]any{"session_id": r.resident, "target": "conformance"})
	n, _ := num(p.v, "num_tokens")
	blocks, _ := p.v["blocks"].([]any)
	toks, _ := p.v["token_ids"].([]any)
	switch {
	case p.err != nil || p.status != http.StatusOK || p.v["ok"] != true:
		r.add("extension.dump.resident", Fail, "dump of a resident session: %s, want ok true", p.short())
	case n < 1 || len(blocks)+len(toks) == 0:
		r.add("extension.dump.resident", Fail, "num_tokens %v with %d blocks and %d token_ids: want the session's KV named", p.v["num_tokens"], len(blocks), len(toks))
	default:
		r.add("extension.dump.resident", Pass, "%d tokens", int(n))
	}
}

// snap is one prefill-side snapshot RPC.
func (r *run) snap(rpc string, body map[string]any) reply { return r.post("/_snapshot/"+rpc, body) }

// snapshotIngest checks a prefill worker's prepare_receive,
// finalize_ingest and release.
func (r *run) snapshotIngest() {
	if !r.offered("extension.snapshot-ingest.advertised", "snapshot_ingest", "/_snapshot/release") {
		return
	}
	s := r.session()
	if p := r.snap("prepare_receive", map[string]any{"session_id": s, "num_tokens": 0}); p.err != nil || p.status != http.StatusBadRequest {
		r.add("extension.prepare.validation", Fail, "prepare_receive of 0 tokens: %s, want 400", p.short())
	} else {
		r.add("extension.prepare.validation", Pass, "400 for num_tokens 0")
	}
	bs := r.pageSize()
	p := r.snap("prepare_receive", map[string]any{"session_id": s, "num_tokens": 2 * bs})
	if p.err != nil || p.status != http.StatusOK || p.v["ok"] != true {
		r.add("extension.prepare.reserve", Fail, "prepare_receive of %d tokens: %s, want ok true", 2*bs, p.short())
		return
	}
	r.add("extension.prepare.reserve", Pass, "reserved %v tokens", p.v["num_tokens"])
	first, second := r.snap("release", map[string]any{"session_id": s}), r.snap("release", map[string]any{"session_id": s})
	switch {
	case first.err != nil || first.status != http.StatusOK || first.v["ok"] != true:
		r.add("extension.release.idempotent", Fail, "release of a reservation: %s, want ok true", first.short())
	case second.err != nil || second.status != http.StatusOK || second.v["ok"] != false || second.v["reason"] != "no-pending-ingest":
		r.add("extension.release.idempotent", Fail, "release twice: %s, want 200 ok false reason no-pending-ingest", second.short())
	default:
		r.add("extension.release.idempotent", Pass, "ok, then no-pending-ingest")
	}
	if f := r.snap("finalize_ingest", map[string]any{"session_id": r.session(), "token_ids": prompt(6, bs)}); f.err != nil || f.status != http.StatusOK || f.v["ok"] != false || f.v["reason"] != "no-pending-ingest" {
		r.add("extension.finalize.no-reservation", Fail, "finalize_ingest without a reservation: %s, want 200 ok false reason no-pending-ingest", f.short())
	} else {
		r.add("extension.finalize.no-reservation", Pass, "no-pending-ingest")
	}
	s2 := r.session()
	toks := prompt(7, 2*bs)
	if p := r.snap("prepare_receive", map[string]any{"session_id": s2, "num_tokens": len(toks)}); p.v["ok"] != true {
		r.add("extension.finalize.ingest", Fail, "prepare_receive before the ingest: %s", p.short())
		return
	}
	f := r.snap("finalize_ingest", map[string]any{"session_id": s2, "token_ids": toks})
	if n, ok := num(f.v, "inserted_prefix_len"); f.err != nil || f.status != http.StatusOK || f.v["ok"] != true || !ok || n < 0 || int(n) > len(toks) {
		r.add("extension.finalize.ingest", Fail, "finalize_ingest with token_ids: %s, want ok true and inserted_prefix_len in [0, %d]", f.short(), len(toks))
		return
	}
	// The ingested tokens are now P's prefix cache: a PD leg would find
	// them; that needs a decoder, so only the answer is checked here.
	r.add("extension.finalize.ingest", Pass, "inserted_prefix_len %v", f.v["inserted_prefix_len"])
}

// String renders results as a table.
func String(rs []Result) string {
	w := 0
	for _, x := range rs {
		w = max(w, len(x.Rule))
	}
	out := fmt.Sprintf("%-*s  %-11s  %s\n", w, "RULE", "RESULT", "REASON")
	for _, x := range rs {
		out += fmt.Sprintf("%-*s  %-11s  %s\n", w, x.Rule, x.Status, x.Reason)
	}
	return out
}
