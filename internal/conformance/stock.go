package conformance

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
)

// The stock rules: what every SGLang worker of the role does, and what the
// gateway relies on from one (docs/worker-protocol.md, "Stock SGLang").

func (r *run) stock() {
	if p := r.call(http.MethodGet, "/health", nil); p.err != nil || p.status != http.StatusOK {
		r.add("stock.health", Fail, "GET /health: %s, want 200", p.short())
	} else {
		r.add("stock.health", Pass, "200")
	}
	r.serverInfo()
	if p := r.post("/conformance-no-such-path", map[string]any{}); p.err != nil || p.status != http.StatusNotFound {
		r.add("stock.unknown-path-404", Fail, "POST to a path no worker serves: %s, want 404 (the gateway reads 404 as not offered)", p.short())
	} else {
		r.add("stock.unknown-path-404", Pass, "404")
	}
	if r.role == RoleColo {
		r.generate()
	} else {
		r.rawRefused()
	}
	if p := r.post("/abort_request", map[string]any{"rid": "conformance-" + r.tag + "-none"}); p.err != nil || p.status != http.StatusOK {
		r.add("stock.abort-unknown-rid", Fail, "/abort_request of an unknown rid: %s, want 200", p.short())
	} else {
		r.add("stock.abort-unknown-rid", Pass, "200")
	}
}

// serverInfo reads /server_info (or /get_server_info) and checks the
// fields the gateway's discovery reads.
func (r *run) serverInfo() {
	p := r.call(http.MethodGet, "/server_info", nil)
	if p.err == nil && p.status == http.StatusNotFound {
		p = r.call(http.MethodGet, "/get_server_info", nil)
	}
	if p.err != nil || p.status != http.StatusOK || p.v == nil {
		r.add("stock.server-info", Fail, "/server_info: %s, want 200 and a JSON object", p.short())
		return
	}
	r.info = p.v
	want := map[string]string{RolePrefill: "prefill", RoleDecode: "decode", RoleColo: "null"}[r.role]
	mode, _ := p.v["disaggregation_mode"].(string)
	page, ok := num(p.v, "page_size")
	switch {
	case mode != want:
		r.add("stock.server-info", Fail, "disaggregation_mode %q, want %q for role %s", mode, want, r.role)
	case !ok || page < 1 || page != float64(int(page)):
		r.add("stock.server-info", Fail, "page_size %v, want a positive integer", p.v["page_size"])
	default:
		r.add("stock.server-info", Pass, "disaggregation_mode %s, page_size %d", mode, int(page))
	}
	if r.role != RoleDecode {
		return
	}
	for _, k := range []string{"disaggregation_decode_enable_radix_cache", "disaggregation_decode_enable_conditional_agg"} {
		if v, ok := p.v[k]; ok {
			if _, isBool := v.(bool); !isBool {
				r.add("stock.decode-flags", Fail, "%s is %v, want true or false", k, v)
				return
			}
		}
	}
	r.add("stock.decode-flags", Pass, "decode radix cache %v, conditional agg %v (absent: false)", p.v["disaggregation_decode_enable_radix_cache"] == true, p.v["disaggregation_decode_enable_conditional_agg"] == true)
}

func (r *run) pageSize() int {
	if p, ok := num(r.info, "page_size"); ok && p >= 1 {
		return int(p)
	}
	return 64
}

// generate checks a colocated worker's /generate, JSON and streamed.
func (r *run) generate() {
	body := map[string]any{"input_ids": prompt(1, 40), "sampling_params": map[string]any{"max_new_tokens": 4}}
	p := r.post("/generate", body)
	if why := answerProblem(p, 40, 4); why != "" {
		r.add("stock.generate", Fail, "%s", why)
	} else {
		r.add("stock.generate", Pass, "200, 4 tokens, meta_info complete")
	}
	body["stream"] = true
	p = r.post("/generate", body)
	switch events, done := sse(p.body); {
	case p.err != nil || p.status != http.StatusOK:
		r.add("stock.generate-stream", Fail, "streamed /generate: %s", p.short())
	case events == 0 || !done:
		r.add("stock.generate-stream", Fail, "%d data events, [DONE] %v: want events then data: [DONE]", events, done)
	default:
		r.add("stock.generate-stream", Pass, "%d events, then [DONE]", events)
	}
}

// answerProblem says what is wrong with a /generate answer, "" if nothing.
func answerProblem(p reply, in, out int) string {
	if p.err != nil || p.status != http.StatusOK {
		return "/generate: " + p.short() + ", want 200"
	}
	mi, _ := p.v["meta_info"].(map[string]any)
	if mi == nil {
		return "no meta_info in " + p.short()
	}
	fr, _ := mi["finish_reason"].(map[string]any)
	pt, _ := num(mi, "prompt_tokens")
	ct, _ := num(mi, "completion_tokens")
	_, hasCached := num(mi, "cached_tokens")
	switch {
	case int(pt) != in:
		return "meta_info.prompt_tokens " + jsonText(mi["prompt_tokens"]) + ", want " + itoa(in)
	case int(ct) != out:
		return "meta_info.completion_tokens " + jsonText(mi["completion_tokens"]) + ", want " + itoa(out)
	case fr == nil || fr["type"] != "length":
		return "meta_info.finish_reason " + jsonText(mi["finish_reason"]) + `, want {"type": "length", ...}`
	case !hasCached:
		return "meta_info.cached_tokens missing (the gateway reports it)"
	}
	return ""
}

// rawRefused: a prefill or decode worker refuses a request without a
// bootstrap room with SGLang's 400, the refusal the gateway re-dispatches
// on. A prefill worker with the serve_whole feature serves it instead.
func (r *run) rawRefused() {
	_, fs := r.advertised()
	body := map[string]any{"input_ids": prompt(2, 40), "sampling_params": map[string]any{"max_new_tokens": 4}}
	p := r.post("/generate", body)
	if r.role == RolePrefill && fs["serve_whole"] {
		if why := answerProblem(p, 40, 4); why != "" {
			r.add("stock.raw-generate-refused", Fail, "serve_whole is advertised, but %s", why)
		} else {
			r.add("stock.raw-generate-refused", Pass, "served whole (serve_whole advertised)")
		}
		return
	}
	if p.err != nil || p.status != http.StatusBadRequest || !strings.Contains(string(p.body), "bootstrap room") {
		r.add("stock.raw-generate-refused", Fail, "/generate without a bootstrap room: %s, want 400 \"Disaggregated request received without bootstrap room id\"", p.short())
		return
	}
	r.add("stock.raw-generate-refused", Pass, "400, no bootstrap room")
}

// sse counts an SSE body's data events and whether it ended with [DONE].
func sse(b []byte) (events int, done bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<16), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			events++
		}
	}
	return events, done
}
