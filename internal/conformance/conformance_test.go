package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
)

func check(t *testing.T, url, role string) map[string]Result {
	t.Helper()
	rs, err := Run(context.Background(), url, role, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s:\n%s", role, url, String(rs))
	out := map[string]Result{}
	for _, r := range rs {
		if _, dup := out[r.Rule]; dup {
			t.Fatalf("rule %s reported twice", r.Rule)
		}
		out[r.Rule] = r
	}
	return out
}

func statuses(rs map[string]Result, st Status) []string {
	var out []string
	for k, r := range rs {
		if r.Status == st {
			out = append(out, k)
		}
	}
	return out
}

var (
	session  = func(c *emulator.Config) { c.Session = engine.SessionConfig{Enabled: true} }
	radix    = func(c *emulator.Config) { emulatortest.Stock(c); c.DecodeRadix = true }
	condAgg  = func(c *emulator.Config) { emulatortest.Stock(c); c.ConditionalAgg, c.DecodeRadix = true, true }
	kvEvents = func(c *emulator.Config) { c.Session, c.KVEvents = engine.SessionConfig{Enabled: true}, true }
)

// TestEmulatedWorkersConform: every emulated mode passes what it offers;
// the stock workers report the extension as not offered.
func TestEmulatedWorkersConform(t *testing.T) {
	for _, c := range []struct {
		name       string
		role       engine.Role
		edit       func(*emulator.Config)
		notOffered []string
	}{
		{"stock prefill", engine.RolePrefill, emulatortest.Stock, []string{"extension.snapshot-ingest.advertised"}},
		{"extended prefill", engine.RolePrefill, nil, nil},
		{"stock decode", engine.RoleDecode, emulatortest.Stock, []string{"upstream.conditional-agg", "extension.session-cache.advertised", "extension.snapshot-dump.advertised", "extension.kv-events.advertised"}},
		{"decode radix", engine.RoleDecode, radix, []string{"upstream.conditional-agg", "extension.session-cache.advertised", "extension.snapshot-dump.advertised", "extension.kv-events.advertised"}},
		{"conditional agg", engine.RoleDecode, condAgg, []string{"extension.session-cache.advertised", "extension.snapshot-dump.advertised", "extension.kv-events.advertised"}},
		{"extended decode", engine.RoleDecode, session, []string{"upstream.conditional-agg", "extension.kv-events.advertised"}},
		{"extended decode, KV events", engine.RoleDecode, kvEvents, []string{"upstream.conditional-agg"}},
		{"colocated", engine.RoleColocated, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := emulatortest.StartWith(t, "127.0.0.1:0", c.role, c.edit)
			role := map[engine.Role]string{engine.RolePrefill: RolePrefill, engine.RoleDecode: RoleDecode, engine.RoleColocated: RoleColo}[c.role]
			rs := check(t, w.URL(), role)
			if f := statuses(rs, Fail); len(f) > 0 {
				t.Fatalf("failed: %v", f)
			}
			no := statuses(rs, NotOffered)
			if strings.Join(sorted(no), ",") != strings.Join(sorted(c.notOffered), ",") {
				t.Fatalf("not offered %v, want %v", sorted(no), sorted(c.notOffered))
			}
			if c.name == "extended decode" && rs["extension.dump.resident"].Status != Pass {
				t.Fatalf("dump.resident %+v", rs["extension.dump.resident"])
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// breaker wraps an emulated worker's API with one rule broken: a path's
// answer replaced, or rewritten.
func breaker(t *testing.T, w *emulator.Server, path string, answer func(orig *httptest.ResponseRecorder, r *http.Request, body []byte) (int, string)) string {
	t.Helper()
	h := w.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			h.ServeHTTP(rw, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		rec := httptest.NewRecorder()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(rec, r)
		st, out := answer(rec, r, body)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(st)
		rw.Write([]byte(out))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// rewrite edits a JSON answer's fields.
func rewrite(rec *httptest.ResponseRecorder, edit func(map[string]any)) (int, string) {
	var v map[string]any
	json.Unmarshal(rec.Body.Bytes(), &v)
	edit(v)
	b, _ := json.Marshal(v)
	return rec.Code, string(b)
}

// TestRuleBreakersFail: a worker that breaks a rule fails that rule, named,
// with a reason that says what was wrong.
func TestRuleBreakersFail(t *testing.T) {
	for _, c := range []struct {
		name, role, path, rule, reason string
		kind                           engine.Role
		edit                           func(*emulator.Config)
		answer                         func(*httptest.ResponseRecorder, *http.Request, []byte) (int, string)
	}{
		{"extension path answers 500 instead of 404", RoleDecode, "/session_cache/admit_direct_append", "extension.session-cache.advertised", "must answer 404",
			engine.RoleDecode, emulatortest.Stock, func(*httptest.ResponseRecorder, *http.Request, []byte) (int, string) { return 500, `{"detail":"boom"}` }},
		{"advertised but absent", RoleDecode, "/session_cache/admit_direct_append", "extension.session-cache.advertised", "answers 404",
			engine.RoleDecode, session, func(*httptest.ResponseRecorder, *http.Request, []byte) (int, string) {
				return 404, `{"detail":"Not Found"}`
			}},
		{"admission mode out of the schema", RoleDecode, "/session_cache/admit_direct_append", "extension.admission.schema", "want direct_append, seed or none",
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) { v["mode"] = "direct" })
			}},
		{"storage_queue_ms not a number", RoleDecode, "/session_cache/admit_direct_append", "extension.admission.schema", `storage_queue_ms "12", want a number ≥ 0`,
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) { v["storage_queue_ms"] = "12" })
			}},
		{"storage_queue_ms below 0", RoleDecode, "/session_cache/admit_direct_append", "extension.admission.schema", "storage_queue_ms -1, want a number ≥ 0",
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) { v["storage_queue_ms"] = -1 })
			}},
		{"fresh session admitted direct", RoleDecode, "/session_cache/admit_direct_append", "extension.admission.fresh-session-not-direct", "never saw",
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) { v["mode"], v["can_admit"] = "direct_append", true })
			}},
		{"raw generate accepted on a decoder", RoleDecode, "/generate", "stock.raw-generate-refused", "want 400",
			engine.RoleDecode, emulatortest.Stock, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				return 500, `{"error":{"message":"internal"}}`
			}},
		{"release not idempotent", RolePrefill, "/_snapshot/release", "extension.release.idempotent", "no-pending-ingest",
			engine.RolePrefill, nil, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) { v["ok"] = true; delete(v, "reason") })
			}},
		{"KV events advertised but absent", RoleDecode, "/server_info", "extension.kv-events.advertised", "answers 404",
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				return rewrite(rec, func(v map[string]any) {
					kp := v["kvc_protocol"].(map[string]any)
					kp["features"] = append(kp["features"].([]any), "kv_events")
				})
			}},
		{"server_info with the wrong role", RolePrefill, "/server_info", "stock.server-info", `want "prefill"`,
			engine.RolePrefill, nil, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				return rewrite(rec, func(v map[string]any) { v["disaggregation_mode"] = "null" })
			}},
		{"direct append does not reuse the session", RoleDecode, "/generate", "extension.direct-append.cached", "was not reused",
			engine.RoleDecode, session, func(rec *httptest.ResponseRecorder, r *http.Request, b []byte) (int, string) {
				if rec.Code != 200 {
					return rec.Code, rec.Body.String()
				}
				return rewrite(rec, func(v map[string]any) {
					if mi, ok := v["meta_info"].(map[string]any); ok {
						mi["cached_tokens"] = 0
					}
				})
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := emulatortest.StartWith(t, "127.0.0.1:0", c.kind, c.edit)
			rs := check(t, breaker(t, w, c.path, c.answer), c.role)
			r := rs[c.rule]
			if r.Status != Fail || !strings.Contains(r.Reason, c.reason) {
				t.Fatalf("rule %s: %+v, want a failure saying %q", c.rule, r, c.reason)
			}
		})
	}
}
