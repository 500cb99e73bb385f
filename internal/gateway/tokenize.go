package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/pretrained"
)

// Tokenizer turns a prompt's text into the model's token ids, so that the
// gateway hashes what the worker will cache: its prefix blocks, its
// belief, count_tokens and the cached_tokens it expects then agree with
// SGLang's radix cache page for page. Without one (serve without
// --tokenizer) the gateway estimates 4 bytes a token (textTokens) and says
// so where it reports a count.
type Tokenizer interface {
	Encode(text string) ([]int, error)
}

// hfTokenizer is a Hugging Face tokenizer.json loaded by
// github.com/sugarme/tokenizer (pure Go: BPE, WordPiece, WordLevel and
// Unigram models, the normalizers, pre-tokenizers and post-processors of
// the format).
type hfTokenizer struct{ tk *tokenizer.Tokenizer }

// LoadTokenizer reads a Hugging Face tokenizer.json. What the library
// cannot build or does not read of Qwen2/3's and Llama 3's files (their
// Split pattern's `\s+(?!\S)`, ByteLevel with use_regex false, BPE's
// ignore_merges) the gateway builds itself (pretok.go); any other file the
// library would tokenize otherwise than the model's own tokenizer
// (unsupportedTokenizer) is an error naming the file and the reason, never
// a panic nor ids that differ from the workers'.
func LoadTokenizer(path string) (t Tokenizer, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("tokenizer %s: cannot build it: %v", path, r)
		}
	}()
	// Qwen2/3's and Llama 3's pre-tokenizer, which the library cannot
	// build, is built here (pretok.go), the rest of the file by the library.
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	pre, own := ownPreTokenizer(doc["pre_tokenizer"], pretrained.CreatePreTokenizer)
	if own {
		doc["pre_tokenizer"] = nil
		if raw, err = json.Marshal(doc); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", path, err)
		}
	}
	if why := unsupportedTokenizer(raw); why != "" {
		return nil, fmt.Errorf("tokenizer %s: not supported: %s", path, why)
	}
	tk, err := pretrained.FromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	if own {
		tk.WithPreTokenizer(pre)
	}
	if m, _ := doc["model"].(map[string]any); m["type"] == "BPE" && m["ignore_merges"] == true {
		tk.WithModel(wholeWords{tk.GetModel()}) // Llama 3's (pretok.go)
	}
	return hfTokenizer{tk}, nil
}

// Encode tokenizes text as SGLang's tokenizer manager does for /generate
// text: without adding special tokens (the chat template, rendered before,
// carries them as text).
func (h hfTokenizer) Encode(text string) (ids []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			ids, err = nil, fmt.Errorf("tokenizer: %v", r)
		}
	}()
	en, err := h.tk.EncodeSingle(text, false)
	if err != nil {
		return nil, err
	}
	return en.Ids, nil
}

// promptTokens is text's token ids and whether they are the model's
// (false: the 4-bytes-a-token estimate).
func (s *Server) promptTokens(text string) ([]int, bool, error) {
	if s.cfg.Tokenizer == nil {
		return textTokens(text), false, nil
	}
	ids, err := s.cfg.Tokenizer.Encode(text)
	if err != nil {
		return nil, false, err
	}
	return ids, true, nil
}
