package gateway

// Session identity: which conversation a request continues, so the router
// keeps its turns on the decoder holding its KV. Coding agents name their
// conversations in different places (headers, a body field, Claude Code's
// metadata.user_id); every endpoint (/generate, OpenAI, Anthropic) resolves
// them in one documented order (docs/gateway.md, "Session identity"), the
// first non-empty source winning. A request with none is routed by prefix
// alone. A sub-agent gets a session of its own, linked to its parent's
// (kvc/parent.go says what the link does).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// maxSessionID bounds a session id's length (bytes): ids are map keys held
// for the gateway's lifetime.
const maxSessionID = 512

// identity is who a request belongs to.
type identity struct {
	Session string // "" = none: prefix-only routing
	Parent  string // the session a sub-agent was spawned from
	Source  string // where Session came from (tests, logs)
}

// sessionSource is one place a session id may be found.
type sessionSource struct {
	name string // as documented: a header name, or "body.<field>"
	get  func(r *http.Request, body map[string]any) string
}

func header(name string) sessionSource {
	return sessionSource{name: name, get: func(r *http.Request, _ map[string]any) string { return r.Header.Get(name) }}
}

func bodyField(path string) sessionSource {
	return sessionSource{name: "body." + path, get: func(_ *http.Request, body map[string]any) string { return fieldString(body, path) }}
}

// sessionSources is the resolution order. The operator's own header and
// field come first (they were configured for a reason); then what names a
// session explicitly in the body (SGLang's own fields); then the agents'
// headers, most specific first; OpenAI's user last (it names an end user,
// a coarse session).
func (s *Server) sessionSources() []sessionSource {
	var out []sessionSource
	if s.cfg.SessionHeader != "" {
		out = append(out, header(s.cfg.SessionHeader))
	}
	if s.cfg.SessionField != "" {
		out = append(out, bodyField(s.cfg.SessionField))
	}
	return append(out,
		bodyField("session_id"),
		bodyField("session_params.id"),
		header("X-Dynamo-Session-Id"),
		header("X-Claude-Code-Session-Id"),
		sessionSource{name: "body.metadata.user_id", get: func(_ *http.Request, body map[string]any) string {
			id, _ := claudeUserID(fieldString(body, "metadata.user_id"))
			return id
		}},
		header("Session-Id"), // Codex
		header("Session_id"), // older Codex, pi
		header("X-Session-Id"),
		header("X-Session-Affinity"), // older OpenCode
		bodyField("user"),            // OpenAI
	)
}

// identify resolves a request's session and, for a sub-agent, its parent.
func (s *Server) identify(r *http.Request, body map[string]any) (identity, error) {
	var id identity
	srcs := s.sources // New's; a bare Server's built here
	if srcs == nil {
		srcs = s.sessionSources()
	}
	for _, src := range srcs {
		if v := strings.TrimSpace(src.get(r, body)); v != "" {
			id.Session, id.Source = v, src.name
			break
		}
	}
	if id.Session == "" {
		return id, nil // a parent without a session of its own says nothing
	}
	// Claude Code sends a sub-agent's requests with its parent's session
	// header and an agent id of its own (and the spawning agent's id when
	// that is itself a sub-agent).
	claude := id.Source == "X-Claude-Code-Session-Id" || id.Source == "body.metadata.user_id"
	if claude && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Claude-Code-Request-Class")), "auxiliary") {
		// A side request (a title, a classifier, a summary) under the
		// session's id but with a prompt of its own: as a turn it would
		// replace the conversation's KV on its decoder. Prefix only.
		return identity{Source: id.Source + " (auxiliary)"}, nil
	}
	if agent := strings.TrimSpace(r.Header.Get("X-Claude-Code-Agent-Id")); claude && agent != "" {
		root := id.Session
		id.Session = root + "/agent/" + agent
		id.Parent = root
		if pa := strings.TrimSpace(r.Header.Get("X-Claude-Code-Parent-Agent-Id")); pa != "" && pa != agent {
			id.Parent = root + "/agent/" + pa
		}
	}
	if id.Parent == "" {
		_, metaParent := claudeUserID(fieldString(body, "metadata.user_id"))
		for _, v := range []string{fieldString(body, "parent_session_id"), r.Header.Get("X-Dynamo-Parent-Session-Id"),
			r.Header.Get("X-Parent-Session-Id"), metaParent} {
			if v = strings.TrimSpace(v); v != "" {
				id.Parent = v
				break
			}
		}
	}
	if id.Parent == id.Session {
		id.Parent = ""
	}
	for _, v := range []struct{ what, id string }{{"session id", id.Session}, {"parent session id", id.Parent}} {
		if len(v.id) > maxSessionID {
			return identity{}, fmt.Errorf("%s from %s is %d bytes; at most %d", v.what, id.Source, len(v.id), maxSessionID)
		}
	}
	return s.scoped(r, id), nil
}

// scoped namespaces a session by the caller's key (Ops.ClientHeader, an
// API key header): with keys in use, a client naming another's session id
// gets a session of its own, so it can neither land on the other's
// decoder nor read from cached_tokens how much of a guessed prompt that
// session holds. The key shows only as a hash.
func (s *Server) scoped(r *http.Request, id identity) identity {
	h := s.cfg.ClientHeader
	if h == "" || id.Session == "" {
		return id
	}
	key := r.Header.Get(h)
	if key == "" {
		return id
	}
	ns := "k" + shortHash(key) + ":"
	id.Session = ns + id.Session
	if id.Parent != "" {
		id.Parent = ns + id.Parent
	}
	return id
}

// claudeUserID reads the session Claude Code puts in metadata.user_id:
// "user_<hash>_account_<uuid?>_session_<uuid>" (older releases), or a JSON
// object with session_id (and parent_session_id) in newer ones. Anything
// else is a user, not a session: "".
func claudeUserID(v string) (session, parent string) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		var m struct {
			SessionID       string `json:"session_id"`
			ParentSessionID string `json:"parent_session_id"`
		}
		if json.Unmarshal([]byte(v), &m) == nil {
			return m.SessionID, m.ParentSessionID
		}
		return "", ""
	}
	if i := strings.LastIndex(v, "_session_"); i >= 0 && strings.HasPrefix(v, "user_") {
		return v[i+len("_session_"):], ""
	}
	return "", ""
}

// fieldString is the string at a dotted path of nested objects ("" when
// absent or not a string).
// An object the scanner kept raw (bodyscan.go) is decoded on the way.
func fieldString(body map[string]any, path string) string {
	var cur any = body
	for rest, more := path, true; more; {
		var k string
		k, rest, more = strings.Cut(rest, ".")
		if raw, ok := cur.(json.RawMessage); ok {
			cur = decodeRaw(raw)
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	s, _ := cur.(string)
	return s
}

// decodeRaw decodes an object the scanner kept raw (nil if it is not
// JSON). Apart from fieldString, whose own value then stays off the heap:
// a lookup of an absent field allocates nothing.
func decodeRaw(raw json.RawMessage) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.Decode(&v)
	return v
}

// SessionOrder names the sources a session id is taken from, in the order
// they are tried, for a gateway configured with header and field (either
// may be ""): what `serve --help` and docs/gateway.md list.
func SessionOrder(header, field string) []string {
	s := &Server{cfg: Config{SessionHeader: header, SessionField: field}}
	var out []string
	for _, src := range s.sessionSources() {
		out = append(out, src.name)
	}
	return out
}

// callerKey is the namespace of the caller's key (as scoped gives its
// sessions), "" without keys: what the caller's own prefixes are
// remembered under (ownprefix.go).
func (s *Server) callerKey(r *http.Request) string {
	if s.cfg.ClientHeader == "" {
		return ""
	}
	if key := r.Header.Get(s.cfg.ClientHeader); key != "" {
		return "k" + shortHash(key) + ":"
	}
	return ""
}
