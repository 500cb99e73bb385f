package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
)

// unsupportedTokenizer names what in a tokenizer.json the Go library
// (github.com/sugarme/tokenizer v0.3.0) would not do as Hugging Face's
// tokenizers do, or "" when nothing: loading such a file would give ids
// that differ from the model's, and a gateway hashing those ids would
// believe blocks no worker caches, so it is refused at start instead. It
// is asked after the pre-tokenizers the gateway builds itself
// (ownPreTokenizer: Qwen2/3's) are taken out of the file.
//
//   - A Split pattern with a lookaround ((?!…), (?=…), (?<…)): Go's RE2
//     cannot compile it. The one Qwen2/3 use, a trailing \s+(?!\S)|\s+,
//     is built in pretok.go.
//   - A ByteLevel pre-tokenizer with use_regex false that the gateway does
//     not build (one adding a prefix space): the library's ByteLevel reads
//     only add_prefix_space and trim_offsets and always splits again with
//     its own GPT-2 pattern, which cuts pieces a Split kept whole (".\n").
//
// (BPE's ignore_merges, Llama 3's, which the library does not read either,
// is applied by the gateway: wholeWords in pretok.go.)
func unsupportedTokenizer(raw []byte) string {
	var cfg struct {
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return "" // the library's own parse reports it
	}
	var pre any
	if json.Unmarshal(cfg.PreTokenizer, &pre) != nil {
		return ""
	}
	return unsupportedPreTokenizer(pre)
}

// unsupportedPreTokenizer walks a pre_tokenizer (a Sequence's members
// too) for what unsupportedTokenizer refuses.
func unsupportedPreTokenizer(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	switch m["type"] {
	case "Sequence":
		list, _ := m["pretokenizers"].([]any)
		for _, p := range list {
			if why := unsupportedPreTokenizer(p); why != "" {
				return why
			}
		}
	case "Split":
		pat, _ := m["pattern"].(map[string]any)
		if re, ok := pat["Regex"].(string); ok {
			if _, ok := newWSLookahead(re); ok && m["behavior"] == "Isolated" && m["invert"] != true {
				break // rebuilt (pretok.go); what stopped that lies elsewhere
			}
			for _, look := range []string{"(?!", "(?=", "(?<"} {
				if strings.Contains(re, look) {
					return fmt.Sprintf("pre_tokenizer Split pattern %q has a lookaround %s…), which Go's regexp cannot compile (only a trailing \\s+(?!\\S)|\\s+, as in Qwen2/3's, is rebuilt)", re, look)
				}
			}
		}
	case "ByteLevel":
		if u, ok := m["use_regex"].(bool); ok && !u {
			return "pre_tokenizer ByteLevel with use_regex false: the Go tokenizer's ByteLevel always splits again with GPT-2's pattern, so its ids would differ from the model's"
		}
	}
	return ""
}
