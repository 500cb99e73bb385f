package gateway

// A /generate body read in one pass by a scanner of JSON's own grammar,
// instead of encoding/json decoding every field into an any (and a
// decoder per field): the fields the gateway reads are decoded as
// encoding/json would decode them (numbers as json.Number), and every
// other object or list is kept as the client's bytes (json.RawMessage, a
// slice of the body, not a copy), which the worker's body then carries
// verbatim (bodyenc.go). Anything unusual — invalid UTF-8, nesting deeper
// than maxScanDepth, a body that is not valid JSON — goes to encoding/json
// (readJSON), so its errors and its decoding stay the reference.

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxScanDepth is the nesting the scanner follows; deeper bodies go to
// encoding/json (whose own limit is 10,000).
const maxScanDepth = 256

// decodedFields are the /generate fields the gateway reads whole (the
// sampling parameters, the identity sources, text's batch check); any
// other object or list is kept raw.
var decodedFields = map[string]bool{"sampling_params": true, "session_params": true, "metadata": true, "text": true}

// scanGenerate reads b as a /generate body: ok is false when b is not
// the plain shape the scanner takes (then encoding/json reads it, and
// says what is wrong). decode names a further top-level field to decode
// whole (the operator's session field, identity.go).
func scanGenerate(b []byte, decode string) (map[string]any, bool) {
	if !utf8.Valid(b) {
		return nil, false // encoding/json replaces bad bytes with U+FFFD
	}
	s := scanner{b: b}
	s.ws()
	if !s.byte('{') {
		return nil, false
	}
	body := make(map[string]any, 8)
	s.ws()
	if s.byte('}') {
		return body, s.end()
	}
	for {
		k, ok := s.key()
		if !ok {
			return nil, false
		}
		if s.i >= len(b) {
			return nil, false
		}
		var v any
		if c := b[s.i]; (c == '[' || c == '{') && !decodedFields[k] && k != decode {
			start := s.i
			if !s.skip(0) {
				return nil, false
			}
			v = json.RawMessage(b[start:s.i:s.i])
		} else if v, ok = s.value(0); !ok {
			return nil, false
		}
		body[k] = v
		s.ws()
		if s.byte('}') {
			return body, s.end()
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// scanner walks a JSON text; every method reports false on anything it
// does not take, leaving the verdict to encoding/json.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() { s.i = skipSpace(s.b, s.i) }

func (s *scanner) end() bool { s.ws(); return s.i == len(s.b) }

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// key reads an object member's name and its colon, with the spaces
// around them, leaving s at the member's value.
func (s *scanner) key() (string, bool) {
	s.ws()
	start, esc, ok := s.skipStr()
	if !ok {
		return "", false
	}
	k := ""
	if esc {
		var u string // its own variable: json.Unmarshal's pointer would move k to the heap on every key
		if json.Unmarshal(s.b[start:s.i], &u) != nil {
			return "", false
		}
		k = u
	} else {
		k = knownKey(s.b[start+1 : s.i-1])
	}
	s.ws()
	if !s.byte(':') {
		return "", false
	}
	s.ws()
	return k, true
}

// knownKey is b as a string: the names SGLang's /generate and its
// answers use most are the program's own constants, not a new string per
// request (the comparison of string(b) with a constant does not copy b).
func knownKey(b []byte) string {
	switch string(b) {
	case "input_ids":
		return "input_ids"
	case "text":
		return "text"
	case "stream":
		return "stream"
	case "sampling_params":
		return "sampling_params"
	case "max_new_tokens":
		return "max_new_tokens"
	case "ignore_eos":
		return "ignore_eos"
	case "temperature":
		return "temperature"
	case "top_p":
		return "top_p"
	case "top_k":
		return "top_k"
	case "stop":
		return "stop"
	case "session_id":
		return "session_id"
	case "session_params":
		return "session_params"
	case "rid":
		return "rid"
	case "meta_info":
		return "meta_info"
	case "completion_tokens":
		return "completion_tokens"
	case "prompt_tokens":
		return "prompt_tokens"
	case "cached_tokens":
		return "cached_tokens"
	case "finish_reason":
		return "finish_reason"
	case "type":
		return "type"
	case "id":
		return "id"
	case "output_ids":
		return "output_ids"
	}
	return string(b)
}

// str reads a string; one with escapes is unquoted by encoding/json.
func (s *scanner) str() (string, bool) {
	start, esc, ok := s.skipStr()
	if !ok {
		return "", false
	}
	if !esc {
		return string(s.b[start+1 : s.i-1]), true
	}
	var out string
	if json.Unmarshal(s.b[start:s.i], &out) != nil {
		return "", false
	}
	return out, true
}

// skipStr passes a string, checking its escapes; esc says it had any.
func (s *scanner) skipStr() (start int, esc, ok bool) {
	start = s.i
	if !s.byte('"') {
		return start, false, false
	}
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return start, esc, true
		case c < 0x20:
			return start, esc, false
		case c == '\\':
			esc = true
			if s.i+1 >= len(s.b) {
				return start, esc, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return start, esc, false
				}
				s.i += 6
			default:
				return start, esc, false
			}
		default:
			s.i++
		}
	}
	return start, esc, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number passes a number in JSON's grammar.
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	s.i = i
	return true
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// skip passes one value of any kind, checking it.
func (s *scanner) skip(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, _, ok := s.skipStr()
		return ok
	case '{', '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		s.ws()
		if s.byte(closer) {
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if _, _, ok := s.skipStr(); !ok {
					return false
				}
				s.ws()
				if !s.byte(':') {
					return false
				}
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.byte(closer) {
				return true
			}
			if !s.byte(',') {
				return false
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// value decodes one value as encoding/json decodes into an any with
// UseNumber: objects map[string]any, lists []any, numbers json.Number.
func (s *scanner) value(depth int) (any, bool) {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return nil, false
	}
	switch c := s.b[s.i]; c {
	case '"':
		return s.str()
	case '{':
		s.i++
		m := map[string]any{}
		s.ws()
		if s.byte('}') {
			return m, true
		}
		for {
			k, ok := s.key()
			if !ok {
				return nil, false
			}
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			s.ws()
			if s.byte('}') {
				return m, true
			}
			if !s.byte(',') {
				return nil, false
			}
		}
	case '[':
		s.i++
		l := []any{}
		s.ws()
		if s.byte(']') {
			return l, true
		}
		for {
			s.ws()
			v, ok := s.value(depth + 1)
			if !ok {
				return nil, false
			}
			l = append(l, v)
			s.ws()
			if s.byte(']') {
				return l, true
			}
			if !s.byte(',') {
				return nil, false
			}
		}
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return nil, s.literal("null")
	default:
		start := s.i
		if !s.number() {
			return nil, false
		}
		return json.Number(s.b[start:s.i]), true
	}
}

// scanCompletion reads an answer's meta_info.completion_tokens and
// whether its finish_reason is set and not an abort, as recorder.parse's
// encoding/json reading does; sure is false for anything it does not
// take for certain (keys matching only case-insensitively, duplicates,
// an unexpected type), which encoding/json then reads.
func scanCompletion(b []byte) (tokens int, ok, sure bool) {
	s := scanner{b: b}
	s.ws()
	found := false
	finished := false
	if !s.object(func(k string) bool {
		if !strings.EqualFold(k, "meta_info") {
			return s.skip(0)
		}
		if k != "meta_info" || found || s.i >= len(s.b) || s.b[s.i] != '{' {
			return false
		}
		found = true
		var sawTok, sawFin bool
		return s.object(func(k string) bool {
			switch {
			case k == "completion_tokens" && !sawTok:
				sawTok = true
				start := s.i
				for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
					s.i++
				}
				n, err := strconv.Atoi(string(s.b[start:s.i]))
				tokens = n
				return err == nil && s.i-start < 10 && (s.b[start] != '0' || s.i-start == 1)
			case k == "finish_reason" && !sawFin:
				sawFin = true
				if s.literal("null") {
					return true
				}
				if s.i >= len(s.b) || s.b[s.i] != '{' {
					return false
				}
				var typ string
				sawType := false
				if !s.object(func(k string) bool {
					if strings.EqualFold(k, "type") {
						if k != "type" || sawType {
							return false
						}
						sawType = true
						var ok bool
						typ, ok = s.str()
						return ok
					}
					return s.skip(0)
				}) {
					return false
				}
				finished = typ != "abort"
				return true
			case strings.EqualFold(k, "completion_tokens") || strings.EqualFold(k, "finish_reason"):
				return false
			}
			return s.skip(0)
		})
	}) || !s.end() {
		return 0, false, false
	}
	if !finished {
		return 0, false, true
	}
	return tokens, true, true
}

// object walks an object's members, f reading each value (s at its
// start); false on anything malformed or where f says so.
func (s *scanner) object(f func(key string) bool) bool {
	if !s.byte('{') {
		return false
	}
	s.ws()
	if s.byte('}') {
		return true
	}
	for {
		k, ok := s.key()
		if !ok {
			return false
		}
		if !f(k) {
			return false
		}
		s.ws()
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}
