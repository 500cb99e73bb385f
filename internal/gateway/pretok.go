package gateway

// Pre-tokenizers for the byte-level BPE tokenizers of Qwen2/3 and their
// kin, which github.com/sugarme/tokenizer cannot build as the file says:
// their Split pattern ends in \s+(?!\S)|\s+ (a lookahead Go's RE2 lacks),
// and their ByteLevel step maps bytes without splitting again
// (use_regex false, which the library ignores). Both are rebuilt here on
// the library's own interfaces so that the ids are Hugging Face's.

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretokenizer"
)

// lookaheadTail is the only lookaround these patterns use: a whitespace
// run followed by a non-space gives up its last character (which then
// joins the next piece, " word"); at the end of the text, or as one
// character, it is taken whole.
const lookaheadTail = `|\s+(?!\S)|\s+`

// unicodeSpace is \s as Hugging Face's tokenizers read it (Oniguruma:
// Unicode White_Space), written as class members; Go's \s is ASCII only.
const unicodeSpace = `\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var unicodeSpaceRE = regexp.MustCompile(`^[` + unicodeSpace + `]+$`)

// wsLookahead is a Split pattern ending in lookaheadTail, matched as
// Oniguruma matches it: the pattern without the lookahead alternative,
// leftmost-first from each piece's end, a whitespace-only piece without a
// line break that is followed by more text and longer than one character
// shortened by its last character.
type wsLookahead struct{ re *regexp.Regexp }

var _ normalizer.Pattern = (*wsLookahead)(nil)

// newWSLookahead compiles pattern, or reports false when it is not of
// this form (another lookaround, \S outside the tail) or does not compile.
func newWSLookahead(pattern string) (*wsLookahead, bool) {
	if !strings.HasSuffix(pattern, lookaheadTail) {
		return nil, false
	}
	p, ok := withUnicodeSpace(strings.TrimSuffix(pattern, lookaheadTail) + `|\s+`)
	if !ok || strings.Contains(p, "(?=") || strings.Contains(p, "(?!") || strings.Contains(p, "(?<") {
		return nil, false
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, false
	}
	return &wsLookahead{re}, true
}

// withUnicodeSpace writes each \s of p as unicodeSpace (a class of its
// own outside brackets, members inside); false if p has a \S.
func withUnicodeSpace(p string) (string, bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			switch n := p[i+1]; n {
			case 's':
				if inClass {
					b.WriteString(unicodeSpace)
				} else {
					b.WriteString("[" + unicodeSpace + "]")
				}
			case 'S':
				return "", false
			default:
				b.WriteByte(c)
				b.WriteByte(n)
			}
			i++
			continue
		}
		switch {
		case c == '[' && !inClass:
			inClass = true
		case c == ']' && inClass:
			inClass = false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// FindMatches covers inside with its matches and the text between them.
func (w *wsLookahead) FindMatches(inside string) []normalizer.OffsetsMatch {
	var out []normalizer.OffsetsMatch
	pos, last := 0, 0
	for pos < len(inside) {
		loc := w.re.FindStringIndex(inside[pos:])
		if loc == nil {
			break
		}
		a, b := pos+loc[0], pos+loc[1]
		if a == b { // an empty match: step over a character
			_, n := utf8.DecodeRuneInString(inside[a:])
			pos = a + n
			continue
		}
		if m := inside[a:b]; b < len(inside) && !strings.ContainsAny(m, "\r\n") && unicodeSpaceRE.MatchString(m) && utf8.RuneCountInString(m) > 1 {
			_, n := utf8.DecodeLastRuneInString(m)
			b -= n
		}
		if a > last {
			out = append(out, normalizer.OffsetsMatch{Offsets: []int{last, a}, Match: false})
		}
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{a, b}, Match: true})
		pos, last = b, b
	}
	if last < len(inside) || len(out) == 0 {
		out = append(out, normalizer.OffsetsMatch{Offsets: []int{last, len(inside)}, Match: false})
	}
	return out
}

// byteLevelOnly is ByteLevel with use_regex false and no prefix space:
// each byte of every piece becomes its byte-level character, and nothing
// is split again.
type byteLevelOnly struct{}

var _ tokenizer.PreTokenizer = byteLevelOnly{}

func (byteLevelOnly) PreTokenize(p *tokenizer.PreTokenizedString) (*tokenizer.PreTokenizedString, error) {
	return p.Normalize(func(n *normalizer.NormalizedString) *normalizer.NormalizedString {
		var changes []normalizer.ChangeMap
		for _, r := range n.GetNormalized() {
			for i, c := range []byte(string(r)) {
				changes = append(changes, normalizer.ChangeMap{RuneVal: pretokenizer.BytesChar[c], Changes: min(i, 1)})
			}
		}
		return n.Transform(changes, 0)
	}), nil
}

// ownPreTokenizer builds cfg's pre_tokenizer here when the library cannot
// build it as written (a Split with lookaheadTail, ByteLevel with
// use_regex false), reporting false when it need not or cannot; its other
// members are the library's.
func ownPreTokenizer(cfg any, create func(map[string]any) (tokenizer.PreTokenizer, error)) (tokenizer.PreTokenizer, bool) {
	m, ok := cfg.(map[string]any)
	if !ok {
		return nil, false
	}
	switch m["type"] {
	case "Sequence":
		list, _ := m["pretokenizers"].([]any)
		var out []tokenizer.PreTokenizer
		own := false
		for _, p := range list {
			if t, ok := ownPreTokenizer(p, create); ok {
				out, own = append(out, t), true
				continue
			}
			pm, _ := p.(map[string]any)
			if unsupportedPreTokenizer(pm) != "" {
				return nil, false
			}
			t, err := create(pm)
			if err != nil {
				return nil, false
			}
			out = append(out, t)
		}
		return pretokenizer.NewSequence(out), own
	case "Split":
		pat, _ := m["pattern"].(map[string]any)
		re, _ := pat["Regex"].(string)
		if inv, _ := m["invert"].(bool); inv || m["behavior"] != "Isolated" {
			return nil, false
		}
		if w, ok := newWSLookahead(re); ok {
			return pretokenizer.NewSplit(w, normalizer.IsolatedBehavior, false), true
		}
	case "ByteLevel":
		if u, ok := m["use_regex"].(bool); ok && !u {
			if ap, _ := m["add_prefix_space"].(bool); !ap {
				return byteLevelOnly{}, true
			}
		}
	}
	return nil, false
}

// wholeWords is a BPE model with ignore_merges (Llama 3's, which the
// library does not read): a piece found whole in the vocabulary is that
// one token, whatever the merges would make of it; the others go through
// the merges.
type wholeWords struct{ tokenizer.Model }

func (w wholeWords) Tokenize(piece string) ([]tokenizer.Token, error) {
	if id, ok := w.Model.TokenToId(piece); ok {
		return []tokenizer.Token{{Id: id, Value: piece, Offsets: []int{0, len(piece)}}}, nil
	}
	return w.Model.Tokenize(piece)
}
