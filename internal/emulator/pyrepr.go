package emulator

import (
	"fmt"
	"strings"
	"unicode"
)

// pyRepr formats s as Python 3's repr(str) does, because SGLang puts ids
// into its error texts with f-string "=" specifiers ({req.rid=} is
// "req.rid=" + repr(req.rid), scheduler.py:2781 at 0003215): a client or
// router that matches SGLang's text byte for byte must see the same quotes
// and escapes from the emulator. The rules are CPython's unicode_repr:
// single quotes unless s holds a ' and no ", the chosen quote and the
// backslash escaped, \t \n \r by name, other ASCII controls and DEL as
// \xhh, and non-ASCII characters kept unless unprintable, then \xhh,
// \uhhhh or \Uhhhhhhhh. Python's "printable" (not in categories C* or Z*,
// bar the space) is Go's unicode.IsPrint. A byte that is not UTF-8 (a Go
// string can hold one, a Python str cannot) is written as U+FFFD would be.
func pyRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}
