package trace

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The lexer's string, whitespace and hash-id readers were rewritten for
// speed; these are the versions before, kept to fuzz the new ones against:
// the same value, error text and read position for any input.

func refWs(d *decoder) {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func refStr(d *decoder) ([]byte, error) {
	if !d.eat('"') {
		return nil, errNotString
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, nil
		case c == '\\':
			return d.strSlow(start)
		case c < 0x20:
			return nil, errNotString
		}
		d.i++
	}
	return nil, errNotString
}

func refHashes(d *decoder, dst []uint64) ([]uint64, error) {
	if !d.eat('[') {
		return dst, d.typeErr("hash_ids")
	}
	refWs(d)
	if d.eat(']') {
		return dst, nil
	}
	for {
		refWs(d)
		i := d.i
		var v uint64
		for i < len(d.b) {
			c := d.b[i] - '0'
			if c > 9 {
				break
			}
			if v > (math.MaxUint64-uint64(c))/10 {
				return dst, &Error{Field: "hash_ids", Msg: fmt.Sprintf("element %d is out of the 64-bit unsigned range", len(dst))}
			}
			v = v*10 + uint64(c)
			i++
		}
		if i == d.i || (d.b[d.i] == '0' && i-d.i > 1) || (i < len(d.b) && (d.b[i] == '.' || d.b[i] == 'e' || d.b[i] == 'E')) {
			e := d.typeErr("hash_ids").(*Error)
			e.Msg = fmt.Sprintf("element %d: %s", len(dst), e.Msg)
			return dst, e
		}
		d.i = i
		dst = append(dst, v)
		refWs(d)
		if d.eat(',') {
			continue
		}
		if d.eat(']') {
			return dst, nil
		}
		return dst, d.syntax("expected ',' or ']' in hash_ids")
	}
}

// refDecodeRequest is decodeRequest before the canonical-key fast path.
func refDecodeRequest(line []byte, req *Request) error {
	d := decoder{b: line}
	hashes := req.HashIDs[:0]
	prevSession, prevType := req.SessionID, req.Type
	var r Request
	var seen uint8
	const (
		sChat = 1 << iota
		sParent
		sTS
		sIn
		sOut
		sHash
	)
	refWs(&d)
	if !d.eat('{') {
		return d.syntax("expected '{' at the start of a request object")
	}
	refWs(&d)
	if d.eat('}') {
		return missing("chat_id")
	}
	for {
		refWs(&d)
		key, err := refStr(&d)
		if err != nil {
			return d.syntax("expected a quoted field name")
		}
		refWs(&d)
		if !d.eat(':') {
			return d.syntax("expected ':' after field name")
		}
		refWs(&d)
		switch string(key) {
		case "session_id":
			s, null, err := refStrField(&d, "session_id")
			if err != nil {
				return err
			}
			if !null {
				r.SessionID = intern(s, prevSession)
			}
		case "parent_session_id":
			s, null, err := refStrField(&d, "parent_session_id")
			if err != nil {
				return err
			}
			if !null {
				r.ParentSessionID = string(s)
			}
		case "type":
			s, null, err := refStrField(&d, "type")
			if err != nil {
				return err
			}
			if !null {
				r.Type = intern(s, prevType)
			}
		case "chat_id":
			v, err := d.intField("chat_id")
			if err != nil {
				return err
			}
			r.ChatID, seen = v, seen|sChat
		case "parent_chat_id":
			v, err := d.intField("parent_chat_id")
			if err != nil {
				return err
			}
			r.ParentChatID, seen = v, seen|sParent
		case "turn":
			v, err := d.intField("turn")
			if err != nil {
				return err
			}
			r.Turn = int(v)
		case "input_length":
			v, err := d.intField("input_length")
			if err != nil {
				return err
			}
			r.InputLength, seen = int(v), seen|sIn
		case "output_length":
			v, err := d.intField("output_length")
			if err != nil {
				return err
			}
			r.OutputLength, seen = int(v), seen|sOut
		case "timestamp":
			v, null, err := d.floatField("timestamp")
			if err != nil {
				return err
			}
			if null {
				return &Error{Field: "timestamp", Msg: "got null, expected " + fieldExpect["timestamp"]}
			}
			r.Timestamp, seen = v, seen|sTS
		case "think_time_s":
			v, null, err := d.floatField("think_time_s")
			if err != nil {
				return err
			}
			if !null {
				r.ThinkTimeS = &v
			}
		case "hash_ids":
			if hashes, err = refHashes(&d, hashes); err != nil {
				return err
			}
			if hashes == nil {
				hashes = []uint64{} // present but empty, as encoding/json has it
			}
			seen |= sHash
		default:
			if err := refSkip(&d, 0); err != nil {
				return err
			}
		}
		refWs(&d)
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			break
		}
		return d.syntax("expected ',' or '}' after a value")
	}
	refWs(&d)
	if d.i != len(d.b) {
		return d.syntax("unexpected data after the request object")
	}
	switch {
	case seen&sChat == 0:
		return missing("chat_id")
	case seen&sParent == 0:
		return missing("parent_chat_id")
	case seen&sTS == 0:
		return missing("timestamp")
	case seen&sIn == 0:
		return missing("input_length")
	case seen&sOut == 0:
		return missing("output_length")
	case seen&sHash == 0:
		return missing("hash_ids")
	}
	r.HashIDs = hashes
	*req = r
	return nil
}

func refStrField(d *decoder, field string) (s []byte, null bool, err error) {
	if d.null() {
		return nil, true, nil
	}
	at := d.i
	s, err = refStr(d)
	if err != nil {
		d.i = at
		return nil, false, d.typeErr(field)
	}
	return s, false, nil
}

func refSkip(d *decoder, depth int) error {
	if depth > 64 {
		return d.syntax("nesting too deep")
	}
	refWs(d)
	if d.i >= len(d.b) {
		return d.syntax("expected a value")
	}
	switch c := d.b[d.i]; {
	case c == '"':
		if _, err := refStr(d); err != nil {
			return d.syntax("malformed string")
		}
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		refWs(d)
		if d.eat(end) {
			return nil
		}
		for {
			if c == '{' {
				refWs(d)
				if _, err := refStr(d); err != nil {
					return d.syntax("expected a quoted field name")
				}
				refWs(d)
				if !d.eat(':') {
					return d.syntax("expected ':' after field name")
				}
			}
			if err := refSkip(d, depth+1); err != nil {
				return err
			}
			refWs(d)
			if d.eat(',') {
				continue
			}
			if d.eat(end) {
				return nil
			}
			return d.syntax("expected ',' or a closing bracket")
		}
	case c == 't' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
	case c == 'f' && len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
	case d.null():
	default:
		if _, _, ok := d.number(); !ok {
			return d.syntax("expected a value")
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func FuzzLexerMatchesReference(f *testing.F) {
	for _, s := range []string{
		`[0,1,2]`, `[ 1 , 2 ]`, `[]`, `[ ]`, `[18446744073709551615]`, `[18446744073709551616]`,
		`[99999999999999999999]`, `[1234567890123456789,12345678901234567890]`, `[01]`, `[1.5]`, `[1e3]`, `[-1]`,
		`[1,]`, `[1 2]`, `[1,2`, `"abc"`, `"a\"b"`, `"a\u00e9"`, "\"a\x01b\"", `"unterminated`, `  "x"`, "\t\r\n [3]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := &decoder{b: in}, &decoder{b: in}
		a.ws()
		refWs(b)
		if a.i != b.i {
			t.Fatalf("ws: at %d, want %d", a.i, b.i)
		}
		a, b = &decoder{b: in}, &decoder{b: in}
		sa, ea := a.str()
		sb, eb := refStr(b)
		if string(sa) != string(sb) || errText(ea) != errText(eb) || a.i != b.i {
			t.Fatalf("str: %q %v at %d, want %q %v at %d", sa, ea, a.i, sb, eb, b.i)
		}
		a, b = &decoder{b: in}, &decoder{b: in}
		ha, ea := a.hashes(nil)
		hb, eb := refHashes(b, nil)
		if !reflect.DeepEqual(ha, hb) || errText(ea) != errText(eb) || a.i != b.i {
			t.Fatalf("hashes: %v %v at %d, want %v %v at %d", ha, ea, a.i, hb, eb, b.i)
		}
	})
}

// FuzzDecodeMatchesReference: the line decoder gives the request and error
// text the decoder before its rewrite gave, for any line, after a line of
// the same session (the session id is shared then) or of another.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"session_id":"mc1","chat_id":1,"parent_chat_id":-1,"turn":1,"timestamp":0.5,"input_length":600,"output_length":9,"type":"text","hash_ids":[0,1]}`,
		`{"session_id":"a","parent_session_id":"p","chat_id":2,"parent_chat_id":1,"turn":2,"timestamp":1,"input_length":1,"output_length":1,"type":"text","think_time_s":2.5,"hash_ids":[3]}`,
		`{"chat_id":1,"parent_chat_id":-1,"timestamp":3,"input_length":0,"output_length":0,"hash_ids":[],"x":{"a":[1,{"b":null}]}}`,
		`{"session_id":"a","session_id":"b","chat_id":1,"chat_id":2,"parent_chat_id":-1,"turn":1,"timestamp":0,"input_length":0,"output_length":0,"type":"","hash_ids":[]}`,
		`{ "session_id" : "a" , "chat_id" : 1 }`, `{"session_id":"a\u00e9"}`, `{"session_idx":1}`, `{"chat_id":1,`, `{}`, `{"type":null,"hash_ids":null}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, line []byte, sameSession bool) {
		prev := Request{SessionID: "mc1", Type: "text", HashIDs: make([]uint64, 0, 4)}
		if !sameSession {
			prev.SessionID = "other"
		}
		a, b := prev, prev
		a.HashIDs, b.HashIDs = make([]uint64, 0, 4), make([]uint64, 0, 4)
		ea, eb := decodeRequest(line, &a), refDecodeRequest(line, &b)
		if errText(ea) != errText(eb) {
			t.Fatalf("error %q, want %q", errText(ea), errText(eb))
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("request\n%+v, want\n%+v", a, b)
		}
	})
}

// leadingDigits agrees with a byte-at-a-time reading on words mixing
// digits with the bytes a nibble test could take for them.
func TestLeadingDigits(t *testing.T) {
	alphabet := []byte("0123456789:;<=>?/ ,]\x00\x30\xb0\xb9\x3a\x20\x29\xf0\xff")
	rng := rand.New(rand.NewPCG(9, 9))
	var w [8]byte
	for range 300000 {
		for i := range w {
			w[i] = alphabet[rng.IntN(len(alphabet))]
			if rng.IntN(3) > 0 {
				w[i] = '0' + byte(rng.IntN(10))
			}
		}
		var want uint64
		n := 0
		for n < 8 && w[n] >= '0' && w[n] <= '9' {
			want = want*10 + uint64(w[n]-'0')
			n++
		}
		v, got := leadingDigits(binary.LittleEndian.Uint64(w[:]))
		if got != n || v != want {
			t.Fatalf("%q: %d digits = %d, want %d = %d", w, got, v, n, want)
		}
	}
}
