package emulator

import "testing"

// TestPyRepr: each want is what CPython 3 prints for repr() of the input,
// so an id in an error text reads as SGLang's f-string would write it.
func TestPyRepr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `''`},
		{"raw-1", `'raw-1'`},
		{"it's", `"it's"`},
		{`say "hi"`, `'say "hi"'`},
		{`a'b"c`, `'a\'b"c'`},
		{`back\slash`, `'back\\slash'`},
		{"tab\tnl\nret\r", `'tab\tnl\nret\r'`},
		{"\x00\x1b\x1f\x7f", `'\x00\x1b\x1f\x7f'`},
		{"é中ß", `'é中ß'`},
		{"\u00a0", `'\xa0'`},           // no-break space (Zs)
		{"\u0085", `'\x85'`},           // C1 control
		{"\u00ad", `'\xad'`},           // soft hyphen (Cf)
		{"\u200b", `'\u200b'`},         // zero-width space (Cf)
		{"\u2028", `'\u2028'`},         // line separator (Zl)
		{"\U0001F600", `'😀'`},          // emoji (So), printable
		{"\U000E0001", `'\U000e0001'`}, // language tag (Cf)
	} {
		if got := pyRepr(c.in); got != c.want {
			t.Errorf("pyRepr(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
