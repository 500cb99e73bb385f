package trace

// The JSON lexing half of the hand-rolled canonical line decoder: strings,
// numbers, arrays of block ids, and skipping unknown values.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// decoder walks one line. i is the read position.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) syntax(msg string) error {
	return &Error{Msg: fmt.Sprintf("malformed JSON at byte %d: %s", d.i+1, msg)}
}

func (d *decoder) ws() {
	// One comparison for the usual case (canonical lines have no spaces).
	for d.i < len(d.b) && d.b[d.i] <= ' ' {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *decoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// str reads a JSON string and returns its contents. Strings without escapes
// are returned as a sub-slice of the line; escaped ones are decoded into a
// fresh slice.
func (d *decoder) str() ([]byte, error) {
	if !d.eat('"') {
		return nil, errNotString
	}
	start := d.i
	for d.i < len(d.b) && strPlain[d.b[d.i]] {
		d.i++
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '"':
			s := d.b[start:d.i]
			d.i++
			return s, nil
		case '\\':
			return d.strSlow(start)
		}
	}
	return nil, errNotString // a control character, or no closing quote
}

// strPlain marks the bytes a JSON string holds as they are: all but the
// quote, the backslash and control characters.
var strPlain = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

var errNotString = fmt.Errorf("not a string")

// strSlow finishes a string that contains escapes. Escaped strings are rare
// in traces, so this hands the literal to encoding/json for exact JSON
// semantics (surrogate pairs included) instead of duplicating them.
func (d *decoder) strSlow(start int) ([]byte, error) {
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '\\':
			d.i += 2
			continue
		case c == '"':
			lit := d.b[start-1 : d.i+1]
			d.i++
			var s string
			if err := json.Unmarshal(lit, &s); err != nil {
				return nil, errNotString
			}
			return []byte(s), nil
		case c < 0x20:
			return nil, errNotString
		}
		d.i++
	}
	d.i = len(d.b)
	return nil, errNotString
}

func (d *decoder) typeErr(field string) error {
	got := "invalid JSON"
	if d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			got = "a string"
		case c == '[':
			got = "an array"
		case c == '{':
			got = "an object"
		case c == 't' || c == 'f':
			got = "a boolean"
		case c == 'n':
			got = "null"
		case c == '-' || (c >= '0' && c <= '9'):
			end := d.i
			for end < len(d.b) && isNumByte(d.b[end]) {
				end++
			}
			got = "number " + string(d.b[d.i:end])
		}
	}
	return &Error{Field: field, Msg: "got " + got + ", expected " + fieldExpect[field]}
}

func (d *decoder) strField(field string) (s []byte, null bool, err error) {
	if d.null() {
		return nil, true, nil
	}
	at := d.i
	s, err = d.str()
	if err != nil {
		d.i = at
		return nil, false, d.typeErr(field)
	}
	return s, false, nil
}

func isNumByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// number returns the extent of a JSON number at the read position and whether
// it is a plain integer (no fraction or exponent).
func (d *decoder) number() (lit []byte, integer bool, ok bool) {
	start, i := d.i, d.i
	if i < len(d.b) && d.b[i] == '-' {
		i++
	}
	digits := i
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		i++
	}
	if i == digits || (d.b[digits] == '0' && i-digits > 1) {
		return nil, false, false
	}
	integer = true
	if i < len(d.b) && d.b[i] == '.' {
		integer = false
		i++
		f := i
		for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
			i++
		}
		if i == f {
			return nil, false, false
		}
	}
	if i < len(d.b) && (d.b[i] == 'e' || d.b[i] == 'E') {
		integer = false
		i++
		if i < len(d.b) && (d.b[i] == '+' || d.b[i] == '-') {
			i++
		}
		e := i
		for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
			i++
		}
		if i == e {
			return nil, false, false
		}
	}
	d.i = i
	return d.b[start:i], integer, true
}

// plainInt reads, at the read position, the usual number of a line: an
// optional minus, then up to maxDigits digits with no leading zero, and
// after them neither a digit, a fraction nor an exponent. It returns the
// value's magnitude and the position after it; ok false, moving nothing,
// for anything else, which the general path (number) then reads.
func (d *decoder) plainInt(maxDigits int) (v int64, neg bool, end int, ok bool) {
	i := d.i
	if i < len(d.b) && d.b[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(d.b) && i-start < maxDigits && d.b[i]-'0' <= 9 {
		v = v*10 + int64(d.b[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || (n > 1 && d.b[start] == '0') {
		return 0, false, 0, false
	}
	if i < len(d.b) {
		if c := d.b[i]; c-'0' <= 9 || c == '.' || c == 'e' || c == 'E' {
			return 0, false, 0, false
		}
	}
	return v, neg, i, true
}

func (d *decoder) intField(field string) (int64, error) {
	if v, neg, end, ok := d.plainInt(10); ok && v <= math.MaxInt32 {
		d.i = end // what the general path reads, with no range to check
		if neg {
			v = -v
		}
		return v, nil
	}
	at := d.i
	lit, integer, ok := d.number()
	if !ok || !integer {
		d.i = at
		return 0, d.typeErr(field)
	}
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var v uint64
	for _, c := range lit {
		if v > (math.MaxInt64-uint64(c-'0'))/10 {
			return 0, &Error{Field: field, Msg: "got " + string(lit) + ", out of the 64-bit integer range"}
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		return -int64(v), nil
	}
	if field != "chat_id" && field != "parent_chat_id" && v > math.MaxInt32 {
		return 0, &Error{Field: field, Msg: "got " + string(lit) + ", expected at most 2147483647"}
	}
	return int64(v), nil
}

func (d *decoder) floatField(field string) (v float64, null bool, err error) {
	if d.null() {
		return 0, true, nil
	}
	if v, neg, end, ok := d.plainInt(15); ok && end-d.i < 16 {
		d.i = end // an integer of under 16 characters, as below
		if neg {
			v = -v
		}
		return float64(v), false, nil
	}
	at := d.i
	lit, integer, ok := d.number()
	if !ok {
		d.i = at
		return 0, false, d.typeErr(field)
	}
	if integer && len(lit) < 16 {
		neg := lit[0] == '-'
		if neg {
			lit = lit[1:]
		}
		var n int64
		for _, c := range lit {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return float64(n), false, nil
	}
	v, err = strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, &Error{Field: field, Msg: "got " + string(lit) + ", out of the float64 range"}
	}
	return v, false, nil
}

// hashes reads the hash_ids array, appending to dst.
func (d *decoder) hashes(dst []uint64) ([]uint64, error) {
	if !d.eat('[') {
		return dst, d.typeErr("hash_ids")
	}
	d.ws()
	if d.eat(']') {
		return dst, nil
	}
	for {
		d.ws()
		i := d.i
		var v uint64
		if i+8 <= len(d.b) {
			// The usual element: under eight digits, no leading zero, then
			// the comma or the bracket, all in the eight bytes at hand.
			x := binary.LittleEndian.Uint64(d.b[i:])
			var n int
			v, n = leadingDigits(x)
			if n > 0 && n < 8 && (n == 1 || byte(x) != '0') {
				switch byte(x >> (8 * n)) {
				case ',':
					d.i = i + n + 1
					dst = append(dst, v)
					continue
				case ']':
					d.i = i + n + 1
					return append(dst, v), nil
				}
			}
			i += n // anything else: on as for any element
		}
		// 19 digits cannot overflow a uint64: those need no check.
		for end := min(len(d.b), d.i+19); i < end; i++ {
			c := d.b[i] - '0'
			if c > 9 {
				break
			}
			v = v*10 + uint64(c)
		}
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
		if i < len(d.b) && d.b[i] == ',' { // the usual case: no space
			d.i++
			continue
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat(']') {
			return dst, nil
		}
		return dst, d.syntax("expected ',' or ']' in hash_ids")
	}
}

// leadingDigits reads the ASCII digits that begin x, eight bytes of a line
// in order (the first in the lowest byte), eight at a time rather than one:
// n is how many there are (up to 8), v their value. A trace's hash ids are
// most of its bytes, a few digits each.
func leadingDigits(x uint64) (v uint64, n int) {
	const lo, hi = 0x0F0F0F0F0F0F0F0F, 0xF0F0F0F0F0F0F0F0
	// A byte is a digit when its high nibble is 3 and its low nibble
	// plus 6 stays under 16; a byte of notDigit is 0 just for those.
	notDigit := (x&hi ^ 0x3030303030303030) | ((x&lo + 0x0606060606060606) & hi)
	n = bits.TrailingZeros64(notDigit) / 8
	if n == 0 {
		return 0, 0
	}
	d := (x & lo) << (64 - 8*n) // the n digits in the top bytes, zeros before them
	d = (d*10 + d>>8) & 0x00FF00FF00FF00FF
	d = (d*100 + d>>16) & 0x0000FFFF0000FFFF
	d = (d*10000 + d>>32) & 0xFFFFFFFF
	return d, n
}

// skip passes over one JSON value of a field this reader does not know.
func (d *decoder) skip(depth int) error {
	if depth > 64 {
		return d.syntax("nesting too deep")
	}
	d.ws()
	if d.i >= len(d.b) {
		return d.syntax("expected a value")
	}
	switch c := d.b[d.i]; {
	case c == '"':
		if _, err := d.str(); err != nil {
			return d.syntax("malformed string")
		}
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.ws()
		if d.eat(end) {
			return nil
		}
		for {
			if c == '{' {
				d.ws()
				if _, err := d.str(); err != nil {
					return d.syntax("expected a quoted field name")
				}
				d.ws()
				if !d.eat(':') {
					return d.syntax("expected ':' after field name")
				}
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
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
