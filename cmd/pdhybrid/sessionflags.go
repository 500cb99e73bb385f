package main

import (
	"strings"

	"github.com/spf13/pflag"
)

// The gateway's session-identity flags, shared by serve and up: an
// operator's own header or body field naming a request's session, tried
// before every built-in source (internal/gateway/identity.go).

// sessionOrderHelp is the resolution order as `serve --help` states it;
// TestSessionOrderHelp keeps it equal to gateway.SessionOrder.
const sessionOrderHelp = `The session a request continues is the first non-empty of: --session-header;
--session-field; the body's session_id, session_params.id; the headers
X-Dynamo-Session-Id, X-Claude-Code-Session-Id; the session part of the body's
metadata.user_id (Claude Code: user_<hash>_account_<id>_session_<uuid>, or
its JSON form); the headers Session-Id (Codex), Session_id, X-Session-Id
(OpenCode), X-Session-Affinity; the body's user (OpenAI). None, or a Claude
Code request of X-Claude-Code-Request-Class auxiliary: routed by prefix
only. A Claude Code sub-agent (X-Claude-Code-Agent-Id) is session
<session>/agent/<id>, its parent the session (or
<session>/agent/<X-Claude-Code-Parent-Agent-Id>); elsewhere the parent is
the body's parent_session_id, X-Dynamo-Parent-Session-Id or
X-Parent-Session-Id. A sub-agent with no decoder of its own prefers its
parent's.`

func addSessionFlags(fs *pflag.FlagSet, header, field *string) {
	fs.StringVar(header, "session-header", "", "a request `header` naming its session, tried before every built-in source (default none)")
	fs.StringVar(field, "session-field", "", "a body `field` naming the session (dotted path into the JSON, e.g. metadata.conversation_id), tried after --session-header (default none)")
}

// checkSessionFlags checks the two flags' syntax.
func checkSessionFlags(ck *checks, header, field string) {
	if header != "" && !isToken(header) {
		ck.fail("--session-header %q: want an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", header)
	}
	if field != "" {
		for _, seg := range strings.Split(field, ".") {
			if seg == "" || strings.ContainsFunc(seg, func(r rune) bool {
				return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			}) {
				ck.fail("--session-field %q: want a dotted path of field names (letters, digits, _ and -), e.g. metadata.conversation_id", field)
				return
			}
		}
	}
}

func isToken(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}
