package gateway

// A worker's request body encoded in one pass: the client's fields the
// scanner kept raw (bodyscan.go) go out as the client's bytes, the
// gateway's own (rid, session_id, the bootstrap fields) and the decoded
// ones as encoding/json writes them — keys sorted, strings escaped alike
// (HTML characters included) — so a body differs from json.Marshal's only
// where a raw value kept the client's spacing. Values of other types, and
// strings needing escapes, are encoded by encoding/json itself.

import (
	"encoding/json"
	"slices"
	"strconv"
)

// appendBody appends m's JSON encoding to dst, less the key skip ("":
// none); ok is false where encoding/json would fail (then the caller asks
// it).
func appendBody(dst []byte, m map[string]any, skip string) ([]byte, bool) {
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		if skip == "" || k != skip {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

func appendValue(dst []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case string:
		return appendString(dst, x), true
	case json.Number:
		if x == "" {
			return append(dst, '0'), true // as encoding/json writes it
		}
		if s := (scanner{b: []byte(x)}); !s.number() || s.i != len(x) {
			return dst, false // encoding/json refuses it
		}
		return append(dst, x...), true
	case json.RawMessage:
		return append(dst, x...), true // checked by the scanner as it came
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case []int:
		dst = append(dst, '[')
		for i, n := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(n), 10)
		}
		return append(dst, ']'), true
	case map[string]any:
		return appendBody(dst, x, "")
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return dst, false
		}
		return append(dst, b...), true
	}
}

// appendString quotes s as encoding/json does; a string with anything to
// escape is left to encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
