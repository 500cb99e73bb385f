package gateway

// The body of a /generate request: read once, what routing needs taken
// from it, and re-sent to each worker leg with a long prompt's input_ids
// left as the client's bytes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// readJSON reads a request body as a JSON object (numbers kept exact),
// within the size limit. input_ids stays raw JSON (json.RawMessage): a
// long prompt is re-sent to a worker or two byte for byte instead of being
// decoded into an []any and encoded again per leg (BenchmarkGenerateBody).
func (s *Server) readJSON(r *http.Request) (map[string]any, error) {
	b, err := s.readBytes(r)
	if err != nil {
		return nil, err
	}
	return decodeObject(b)
}

// readGenerate reads a /generate body: by the scanner (bodyscan.go),
// which keeps the objects and lists the gateway does not read as the
// client's bytes, or, for anything it does not take, as readJSON does.
func (s *Server) readGenerate(r *http.Request) (map[string]any, error) {
	b, err := s.readBytes(r)
	if err != nil {
		return nil, err
	}
	field, _, _ := strings.Cut(s.cfg.SessionField, ".")
	if body, ok := scanGenerate(b, field); ok {
		return body, nil
	}
	return decodeObject(b)
}

// readBytes is a request's body, within the size limit.
func (s *Server) readBytes(r *http.Request) ([]byte, error) {
	if rb, ok := r.Body.(*readBody); ok {
		// Read by the limits (budget.go): no second copy. Parsed into
		// its fields: the request need not keep the reader too.
		r.Body = http.NoBody
		return rb.b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %v", err)
	}
	return b, nil
}

// decodeObject decodes a JSON object by encoding/json, input_ids kept raw.
func decodeObject(b []byte) (map[string]any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("body is not a JSON object: %v", err)
	}
	body := make(map[string]any, len(fields)+4)
	for k, raw := range fields {
		if k == "input_ids" && len(raw) > 0 && raw[0] == '[' {
			body[k] = raw
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("body is not a JSON object: field %q: %v", k, err)
		}
		body[k] = v
	}
	return body, nil
}

// tokenIDs reads a raw input_ids list; an entry that is not an integer
// is named by its index, as the []any path names it.
func tokenIDs(raw json.RawMessage) ([]int, error) {
	toks, ok := plainInts(raw)
	if !ok && json.Unmarshal(raw, &toks) == nil {
		ok = true
	}
	if ok {
		for i, t := range toks {
			if err := checkTokenID(i, int64(t)); err != nil {
				return nil, err
			}
		}
		return toks, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("input_ids must be a list of token ids")
	}
	for i, it := range items {
		var n int
		if json.Unmarshal(it, &n) != nil {
			return nil, fmt.Errorf("input_ids[%d]: %s is not a token id", i, it)
		}
	}
	return nil, errors.New("input_ids must be a list of token ids")
}

// plainInts reads a JSON list of non-negative integers in one pass, the
// shape every tokenizer's output has; anything else (signs, exponents,
// nesting) reports !ok and goes to encoding/json.
func plainInts(b []byte) ([]int, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	out := make([]int, 0, len(b)/6)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		start, n := i, 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			n = n*10 + int(b[i]-'0')
			i++
		}
		if i == start || i-start > 18 || (b[start] == '0' && i-start > 1) {
			return nil, false
		}
		out = append(out, n)
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return out, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonReader encodes a body (jsonBody without its length).
func jsonReader(v any) io.Reader {
	r, _ := jsonBody(v)
	return r
}

// jsonBody encodes a body and says its length; a map's raw input_ids is
// spliced in as it came, not re-validated and compacted by json.Marshal
// (the bulk of a long prompt's cost at the gateway), and a long one not
// copied: each worker leg reads the client's bytes. The rest of a map is
// encoded in one pass (bodyenc.go).
func jsonBody(v any) (io.Reader, int64) {
	m, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(v)
		return bytes.NewReader(b), int64(len(b))
	}
	raw, isRaw := m["input_ids"].(json.RawMessage)
	if !isRaw {
		b, ok := appendBody(make([]byte, 0, 512), m, "")
		if !ok {
			b, _ = json.Marshal(v)
		}
		return bytes.NewReader(b), int64(len(b))
	}
	const idsKey = `{"input_ids":`
	if len(raw) <= splicedIDs {
		// One buffer for the whole body (the rest of the keys rarely
		// pass 256 bytes): the head, the ids, then the other members
		// encoded in place, their object's '{' turned into the ids' ','.
		b := make([]byte, 0, len(idsKey)+len(raw)+256)
		b = append(append(b, idsKey...), raw...)
		at := len(b)
		b, ok := appendBody(b, m, "input_ids")
		if !ok {
			b, _ = json.Marshal(v)
			return bytes.NewReader(b), int64(len(b))
		}
		if len(b)-at > 2 {
			b[at] = ','
		} else {
			b = append(b[:at], '}')
		}
		return bytes.NewReader(b), int64(len(b))
	}
	tail, ok := appendBody(make([]byte, 0, 256), m, "input_ids")
	if !ok {
		b, _ := json.Marshal(v)
		return bytes.NewReader(b), int64(len(b))
	}
	if len(tail) > 2 {
		tail[0] = ','
	} else {
		tail = tail[1:] // "}"
	}
	head := []byte(idsKey)
	return io.MultiReader(bytes.NewReader(head), bytes.NewReader(raw), bytes.NewReader(tail)), int64(len(head) + len(raw) + len(tail))
}

// splicedIDs is the longest raw input_ids copied into a body's one
// buffer; a longer list is read from the client's bytes in place.
const splicedIDs = 16 << 10
