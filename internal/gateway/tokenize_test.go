package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// byteLevel is GPT-2's bytes_to_unicode: the alphabet of a byte-level BPE
// vocabulary.
func byteLevel() map[byte]rune {
	m := map[byte]rune{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[byte(b)] = rune(b)
		} else {
			m[byte(b)] = rune(256 + n)
			n++
		}
	}
	return m
}

// writeTokenizer builds a small byte-level BPE tokenizer.json, the format
// of the models' own (Qwen's, GPT-2's): 256 byte tokens and a few merges.
func writeTokenizer(t *testing.T, preTokenizer map[string]any) string {
	t.Helper()
	return writeTokenizerWith(t, preTokenizer, nil)
}

// writeTokenizerWith is writeTokenizer with edit applied to the BPE model's
// settings.
func writeTokenizerWith(t *testing.T, preTokenizer map[string]any, edit func(model map[string]any)) string {
	t.Helper()
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	if preTokenizer == nil {
		preTokenizer = bl
	}
	return writeBPE(t, []string{"t h", "th e", "Ġ the", "a n", "an d", "Ġ and", "e r", "i n", "in g", "o n"}, preTokenizer, bl, edit)
}

// writeBPE writes a byte-level BPE tokenizer.json: the 256 byte tokens,
// merges (each "a b" a token of its own after them), pre as its
// pre-tokenizer and byteLevel as its post-processor and decoder, edit
// applied to the BPE model. With PDHYBRID_DUMP_TOKENIZER=DIR the file is
// written there, named for the test (to produce reference ids elsewhere).
func writeBPE(t *testing.T, merges []string, pre, byteLevelStep map[string]any, edit func(model map[string]any)) string {
	t.Helper()
	vocab := map[string]int{}
	for b, r := range byteLevel() {
		vocab[string(r)] = int(b)
	}
	for i, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		vocab[a+b] = 256 + i
	}
	cfg := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{},
		"normalizer": map[string]any{"type": "NFC"}, "pre_tokenizer": pre, "post_processor": byteLevelStep, "decoder": byteLevelStep,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
	}
	if edit != nil {
		edit(cfg["model"].(map[string]any))
	}
	b, _ := json.Marshal(cfg)
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if d := os.Getenv("PDHYBRID_DUMP_TOKENIZER"); d != "" {
		p = filepath.Join(d, filepath.Base(t.Name())+".json")
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizerEncodes(t *testing.T) {
	tk, err := LoadTokenizer(writeTokenizer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tk.Encode("the cat and the thing")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 || ids[0] != 257 {
		t.Fatalf("ids %v: want the merge \"the\" (257) first", ids)
	}
	for _, id := range ids {
		if id < 0 || id >= 266 {
			t.Fatalf("id %d outside the vocabulary", id)
		}
	}
	// A pattern Go's regexp cannot compile is an error, not a panic.
	split := map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+(?!\S)|\s+`}, "behavior": "Isolated", "invert": false}
	if _, err := LoadTokenizer(writeTokenizer(t, split)); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("lookahead pattern: %v, want an error naming the file", err)
	}
	if _, err := LoadTokenizer(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// With a tokenizer the gateway sends input_ids: the worker's prompt_tokens
// is the tokenizer's count, and the next turn's cached tokens cover the
// first prompt's whole blocks as the router hashed them. count_tokens says
// whether it counted with the tokenizer or estimated.
func TestGatewayTokenizes(t *testing.T) {
	tk, err := LoadTokenizer(writeTokenizer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, true)
	gw := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(c *Config) { c.Tokenizer = tk })
	text := strings.Repeat("the thing and the other thing ", 40)
	ids, _ := tk.Encode(text)
	var out struct {
		Text     string `json:"text"`
		MetaInfo struct {
			PromptTokens int `json:"prompt_tokens"`
			CachedTokens int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	post := func(text string) {
		t.Helper()
		resp, b := postJSONBody(t, gw.URL+"/generate", map[string]any{"text": text, "session_id": "tok", "sampling_params": map[string]any{"max_new_tokens": 4}})
		if resp != http.StatusOK || json.Unmarshal(b, &out) != nil {
			t.Fatalf("%d %s", resp, b)
		}
	}
	post(text)
	if out.MetaInfo.PromptTokens != len(ids) || len(ids) == (len(text)+3)/4 {
		t.Fatalf("worker counted %d prompt tokens; the tokenizer %d (the estimate would be %d)", out.MetaInfo.PromptTokens, len(ids), (len(text)+3)/4)
	}
	post(text + out.Text + " and then")
	if want := len(ids) / 64 * 64; out.MetaInfo.CachedTokens < want {
		t.Fatalf("turn 2 cached %d, want ≥ %d (turn 1's whole blocks)", out.MetaInfo.CachedTokens, want)
	}
	for _, c := range []struct {
		tk   Tokenizer
		want string
	}{{tk, "tokenizer"}, {nil, "estimate"}} {
		g := gatewayWith(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d}, func(cfg *Config) { cfg.Tokenizer = c.tk })
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/messages/count_tokens", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"the thing"}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Pdhybrid-Token-Count") != c.want {
			t.Fatalf("count_tokens: %d, X-Pdhybrid-Token-Count %q, want %q", resp.StatusCode, resp.Header.Get("X-Pdhybrid-Token-Count"), c.want)
		}
	}
}

func postJSONBody(t *testing.T, u string, body any) (int, []byte) {
	t.Helper()
	j, _ := json.Marshal(body)
	resp, err := http.Post(u, "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
