package gateway

import (
	"strings"
	"testing"
)

// TestTokenizerRefusesWhatItWouldGetWrong: a tokenizer.json the Go library
// would build but tokenize otherwise than Hugging Face's (or could not
// build), and that the gateway does not build itself (pretok.go), is
// refused at load, naming the file and the reason; the GPT-2 and Qwen2/3
// layouts, and Llama 3's ignore_merges, load.
func TestTokenizerRefusesWhatItWouldGetWrong(t *testing.T) {
	bl := func(useRegex bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": useRegex}
	}
	split := func(re string) map[string]any {
		return map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false}
	}
	seq := func(ps ...any) map[string]any { return map[string]any{"type": "Sequence", "pretokenizers": ps} }
	prefixed := bl(false)
	prefixed["add_prefix_space"] = true
	qwen := `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	for _, c := range []struct {
		name string
		pre  map[string]any
		edit func(map[string]any)
		want string // "" loads
	}{
		{"GPT-2: ByteLevel with its regex", bl(true), nil, ""},
		{"a Split without lookaround, then ByteLevel splitting again", seq(split(`\p{N}{1,3}`), bl(true)), nil, ""},
		{"Qwen2/3: Split with \\s+(?!\\S), ByteLevel without regex (built here)", seq(split(qwen), bl(false)), nil, ""},
		{"ByteLevel without regex after a plain Split (built here)", seq(split(`\p{N}{1,3}`), bl(false)), nil, ""},
		{"a lookbehind", split(`(?<=a)b`), nil, "lookaround (?<"},
		{"a lookahead other than the whitespace tail", seq(split(`a(?=b)|\s+`), bl(false)), nil, "lookaround (?="},
		{"ByteLevel without regex adding a prefix space", seq(split(qwen), prefixed), nil, "use_regex false"},
		{"Llama 3's ignore_merges (applied here)", bl(true), func(m map[string]any) { m["ignore_merges"] = true }, ""},
	} {
		path := writeTokenizerWith(t, c.pre, c.edit)
		_, err := LoadTokenizer(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it loaded", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)):
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
}
