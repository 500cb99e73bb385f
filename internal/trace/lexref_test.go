package trace

import (
	"fmt"
	"math"
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
