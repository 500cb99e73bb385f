package gateway

import (
	"slices"
	"strings"
	"testing"
)

// qwenPattern is Qwen2/3's Split pattern, as in their tokenizer.json.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// writeQwenTokenizer is a small tokenizer.json laid out as Qwen2/3's: NFC,
// the Split above, ByteLevel without its regex, byte-level BPE. Its merges
// make the pieces visible in the ids: runs of spaces, line breaks, ".\n"
// (one piece for Qwen, two for GPT-2's regex) and "$h" (one piece for
// Qwen's letters with a leading symbol).
func writeQwenTokenizer(t *testing.T) string {
	t.Helper()
	return writeLayoutTokenizer(t, qwenPattern, nil)
}

// llama3Pattern is Llama 3's Split pattern: Qwen's, digits in threes.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// writeLlama3Tokenizer is writeQwenTokenizer's file as Llama 3 lays it
// out: its pattern and ignore_merges, with words in the vocabulary that
// the merges do not make ("Ġhello", "abc": the merges give "ab" "c").
func writeLlama3Tokenizer(t *testing.T) string {
	t.Helper()
	return writeLayoutTokenizer(t, llama3Pattern, func(model map[string]any) {
		vocab := model["vocab"].(map[string]int)
		vocab["Ġhello"], vocab["abc"], vocab["123"] = 400, 401, 402
		model["merges"] = append(model["merges"].([]string), "a b")
		vocab["ab"] = 256 + len(model["merges"].([]string)) - 1
		model["ignore_merges"] = true
	})
}

// writeLayoutTokenizer writes the Qwen-layout file with pattern, edit
// applied to its BPE model.
func writeLayoutTokenizer(t *testing.T, pattern string, edit func(model map[string]any)) string {
	t.Helper()
	merges := []string{"Ġ Ġ", "ĠĠ Ġ", "ĠĠ ĠĠ", "Ċ Ċ", ". Ċ", "$ h", "t h", "th e", "Ġ the", "Ġ a", "Ġ b", "Ġ 1", "a n", "an d", "Ġ and", "ã Ģ", "ãĢ Ģ", "Ġ x", "ãĢĢ b", "ãĢĢ ."}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		bl,
	}}
	return writeBPE(t, merges, pre, bl, edit)
}

// TestQwenTokenizerMatchesHF: a Qwen2/3-layout tokenizer (the Split
// pattern with \s+(?!\S), ByteLevel without its regex), which the Go
// library cannot build as written, loads and gives Hugging Face's ids. The
// wants are Hugging Face's Tokenizers.js (@huggingface/tokenizers 0.2.0)
// on this same file: whitespace runs before a word give up their last
// space to it, ".\n" and "$hello" stay one piece, digits are single, and
// Unicode spaces (U+3000, U+00A0) are spaces.
func TestQwenTokenizerMatchesHF(t *testing.T) {
	tk, err := LoadTokenizer(writeQwenTokenizer(t))
	if err != nil {
		t.Fatal(err)
	}
	// The same file with its merges as pairs, as newer files write them.
	tkPairs, err := LoadTokenizer(writeLayoutTokenizer(t, qwenPattern, func(model map[string]any) {
		var pairs [][]string
		for _, m := range model["merges"].([]string) {
			a, b, _ := strings.Cut(m, " ")
			pairs = append(pairs, []string{a, b})
		}
		model["merges"] = pairs
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []int
	}{
		{"the and the", []int{263, 265, 110, 100, 264}},
		{"a  b", []int{97, 32, 266}},
		{"a   b", []int{97, 256, 266}},
		{"a    b", []int{97, 257, 266}},
		{"x   \n\n y", []int{120, 257, 259, 32, 121}},
		{"end.\nthe", []int{101, 110, 100, 260, 263}},
		{"$hello the", []int{261, 101, 108, 108, 111, 264}},
		{"tab\there", []int{116, 97, 98, 9, 104, 101, 114, 101}},
		{"trailing  ", []int{116, 114, 97, 105, 108, 105, 110, 103, 256}},
		{"  lead", []int{32, 32, 108, 101, 97, 100}},
		{"12 1", []int{49, 50, 32, 49}},
		{"a\u3000\u3000b", []int{97, 272, 274}},
		{"a \u00a0b", []int{97, 32, 194, 160, 98}},
		{"it's THE", []int{105, 116, 39, 115, 32, 84, 72, 69}},
		{"line\r\n\r\nx", []int{108, 105, 110, 101, 13, 10, 13, 10, 120}},
		{"  \n  x", []int{256, 10, 32, 273}},
		{"x  1", []int{120, 32, 32, 49}},
		{"a  .b", []int{97, 32, 32, 46, 98}},
		{" ", []int{32}},
		{"", []int{}},
		{"the  \t the", []int{263, 256, 9, 264}},
		{"x\u3000.", []int{120, 272, 46}},
	} {
		for _, tk := range []Tokenizer{tk, tkPairs} {
			got, err := tk.Encode(c.text)
			if err != nil || !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("%q: %v %v, want %v", c.text, got, err, c.want)
			}
		}
	}
}

// TestLlama3TokenizerMatchesHF: the Llama 3 layout (digits in threes,
// ignore_merges: a piece in the vocabulary is one token) gives Hugging
// Face's ids, written by Tokenizers.js on the same file.
func TestLlama3TokenizerMatchesHF(t *testing.T) {
	tk, err := LoadTokenizer(writeLlama3Tokenizer(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []int
	}{
		{" hello", []int{400}},
		{"hello", []int{104, 101, 108, 108, 111}},
		{"say hello", []int{115, 97, 121, 400}},
		{"abc", []int{401}},
		{"abcd", []int{276, 99, 100}},
		{"xabc", []int{120, 276, 99}},
		{"12345", []int{402, 52, 53}},
		{"1234567", []int{402, 52, 53, 54, 55}},
		{"123", []int{402}},
		{"a  hello", []int{97, 32, 400}},
		{"the and the", []int{263, 270, 264}},
		{"end.\nthe", []int{101, 110, 100, 260, 263}},
		{"x  1", []int{120, 32, 32, 49}},
		{"abc abc", []int{401, 265, 98, 99}},
	} {
		got, err := tk.Encode(c.text)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.text, got, err, c.want)
		}
	}
}
