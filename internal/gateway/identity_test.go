package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// The documented resolution order, source by source: each case adds a
// source that must win over (or lose to) the ones also present.
func TestIdentityOrder(t *testing.T) {
	const ccUser = "user_3f1e9ab0c_account__session_6c7e3b0e-1111-4222-8333-944455556666"
	for _, tc := range []struct {
		name      string
		cfgHeader string
		cfgField  string
		headers   map[string]string
		body      string
		want      identity
	}{
		{name: "nothing: prefix-only", body: `{}`, want: identity{}},
		{name: "OpenAI user, last resort", body: `{"user":"u1"}`, want: identity{"u1", "", "body.user"}},
		{name: "older OpenCode", headers: map[string]string{"X-Session-Affinity": "aff"}, body: `{"user":"u1"}`,
			want: identity{"aff", "", "X-Session-Affinity"}},
		{name: "OpenCode x-session-id over affinity", headers: map[string]string{"x-session-id": "oc", "X-Session-Affinity": "aff"},
			want: identity{"oc", "", "X-Session-Id"}},
		{name: "Codex session-id over x-session-id", headers: map[string]string{"session-id": "codex", "x-session-id": "oc"},
			want: identity{"codex", "", "Session-Id"}},
		{name: "Claude Code metadata over Codex", headers: map[string]string{"session-id": "codex"},
			body: `{"metadata":{"user_id":"` + ccUser + `"}}`, want: identity{"6c7e3b0e-1111-4222-8333-944455556666", "", "body.metadata.user_id"}},
		{name: "metadata.user_id in the JSON form", body: `{"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"js-1\"}"}}`,
			want: identity{"js-1", "", "body.metadata.user_id"}},
		{name: "a plain user_id is a user, not a session", body: `{"metadata":{"user_id":"alice"}}`, want: identity{}},
		{name: "Claude Code header over metadata", headers: map[string]string{"X-Claude-Code-Session-Id": "cc-h"},
			body: `{"metadata":{"user_id":"` + ccUser + `"}}`, want: identity{"cc-h", "", "X-Claude-Code-Session-Id"}},
		{name: "Dynamo over Claude Code", headers: map[string]string{"X-Claude-Code-Session-Id": "cc-h", "x-dynamo-session-id": "dyn"},
			want: identity{"dyn", "", "X-Dynamo-Session-Id"}},
		{name: "SGLang session_params.id over headers", headers: map[string]string{"x-dynamo-session-id": "dyn"},
			body: `{"session_params":{"id":"sp"}}`, want: identity{"sp", "", "body.session_params.id"}},
		{name: "body session_id over session_params", body: `{"session_id":"sid","session_params":{"id":"sp"}}`,
			want: identity{"sid", "", "body.session_id"}},
		{name: "configured field over the body's session_id", cfgField: "metadata.conversation",
			body: `{"session_id":"sid","metadata":{"conversation":"conv"}}`, want: identity{"conv", "", "body.metadata.conversation"}},
		{name: "configured header first", cfgHeader: "X-Tenant-Conv", cfgField: "metadata.conversation",
			headers: map[string]string{"X-Tenant-Conv": "tc"}, body: `{"metadata":{"conversation":"conv"}}`,
			want: identity{"tc", "", "X-Tenant-Conv"}},
		{name: "blank values are skipped", headers: map[string]string{"X-Claude-Code-Session-Id": "  ", "x-session-id": "oc"},
			body: `{"session_id":""}`, want: identity{"oc", "", "X-Session-Id"}},

		// Sub-agents.
		{name: "Claude Code sub-agent", headers: map[string]string{"X-Claude-Code-Session-Id": "root", "X-Claude-Code-Agent-Id": "a1"},
			want: identity{"root/agent/a1", "root", "X-Claude-Code-Session-Id"}},
		{name: "Claude Code nested sub-agent", headers: map[string]string{"X-Claude-Code-Session-Id": "root",
			"X-Claude-Code-Agent-Id": "a2", "X-Claude-Code-Parent-Agent-Id": "a1"},
			want: identity{"root/agent/a2", "root/agent/a1", "X-Claude-Code-Session-Id"}},
		{name: "Claude Code sub-agent by metadata", headers: map[string]string{"X-Claude-Code-Agent-Id": "a1"},
			body: `{"metadata":{"user_id":"` + ccUser + `"}}`,
			want: identity{"6c7e3b0e-1111-4222-8333-944455556666/agent/a1", "6c7e3b0e-1111-4222-8333-944455556666", "body.metadata.user_id"}},
		{name: "Claude Code side request: prefix only", headers: map[string]string{"X-Claude-Code-Session-Id": "root",
			"X-Claude-Code-Request-Class": "auxiliary"}, want: identity{"", "", "X-Claude-Code-Session-Id (auxiliary)"}},
		{name: "Claude Code main and compaction requests stay in the session", headers: map[string]string{"X-Claude-Code-Session-Id": "root",
			"X-Claude-Code-Request-Class": "compaction"}, want: identity{"root", "", "X-Claude-Code-Session-Id"}},
		{name: "agent id without a Claude Code session is ignored", headers: map[string]string{"x-session-id": "oc", "X-Claude-Code-Agent-Id": "a1"},
			want: identity{"oc", "", "X-Session-Id"}},
		{name: "OpenCode child session", headers: map[string]string{"x-session-id": "child", "X-Parent-Session-Id": "par"},
			want: identity{"child", "par", "X-Session-Id"}},
		{name: "Dynamo parent over OpenCode's", headers: map[string]string{"x-dynamo-session-id": "child",
			"x-dynamo-parent-session-id": "dpar", "X-Parent-Session-Id": "par"}, want: identity{"child", "dpar", "X-Dynamo-Session-Id"}},
		{name: "body parent_session_id first", headers: map[string]string{"x-dynamo-parent-session-id": "dpar"},
			body: `{"session_id":"child","parent_session_id":"bpar"}`, want: identity{"child", "bpar", "body.session_id"}},
		{name: "parent in the metadata JSON", body: `{"metadata":{"user_id":"{\"session_id\":\"c\",\"parent_session_id\":\"p\"}"}}`,
			want: identity{"c", "p", "body.metadata.user_id"}},
		{name: "a parent without a session says nothing", headers: map[string]string{"X-Parent-Session-Id": "par"}, want: identity{}},
		{name: "a session is not its own parent", headers: map[string]string{"x-session-id": "s", "X-Parent-Session-Id": "s"},
			want: identity{"s", "", "X-Session-Id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{SessionHeader: tc.cfgHeader, SessionField: tc.cfgField, MaxBodyBytes: 1 << 20}}
			body := tc.body
			if body == "" {
				body = "{}"
			}
			r := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			m, err := s.readJSON(r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.identify(r, m)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestIdentityTooLong(t *testing.T) {
	s := &Server{cfg: Config{MaxBodyBytes: 1 << 20}}
	r := httptest.NewRequest("POST", "/generate", strings.NewReader(`{}`))
	r.Header.Set("X-Session-Id", strings.Repeat("x", maxSessionID+1))
	_, err := s.identify(r, map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "X-Session-Id") || !strings.Contains(err.Error(), "at most 512") {
		t.Fatalf("err %v, want one naming the header and the limit", err)
	}
}
