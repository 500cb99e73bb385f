package gateway

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestTokenIDs: the one-pass reader agrees with encoding/json on every
// shape, and what it declines still parses (or fails) as before.
func TestTokenIDs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"[]", []int{}, ""},
		{"[1,2,3]", []int{1, 2, 3}, ""},
		{" [ 151935 , 0 ,7 ] ", []int{151935, 0, 7}, ""},
		{"[-1, 2]", nil, "input_ids[0] = -1: want a token id in [0, 2147483647]"},
		{"[1, 4294967296]", nil, "input_ids[1] = 4294967296: want a token id in [0, 2147483647]"},
		{"[1e3]", []int{1000}, ""}, // not an integer to encoding/json either
		{"[1, 2.5]", nil, "input_ids[1]: 2.5 is not a token id"},
		{`[1, "a"]`, nil, `input_ids[1]: "a" is not a token id`},
		{"[1,]", nil, "input_ids must be a list of token ids"},
		{"[01]", nil, "input_ids must be a list of token ids"},
	} {
		got, err := tokenIDs(json.RawMessage(tc.in))
		if tc.in == "[1e3]" {
			// encoding/json refuses 1e3 for an int: an error names it.
			if err == nil {
				t.Errorf("%s: accepted %v", tc.in, got)
			}
			continue
		}
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: err %v; want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzPlainInts(f *testing.F) {
	for _, s := range []string{"[]", "[1,2]", " [3 ,4] ", "[01]", "[1,]", "[-1]", "[99999999999999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := plainInts([]byte(s))
		if !ok {
			return
		}
		var want []int
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("%q: plainInts read %v, encoding/json refuses: %v", s, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: plainInts %v, encoding/json %v", s, got, want)
		}
	})
}

// TestJSONReaderSplicesRawIDs: a body with raw input_ids encodes to the
// same JSON object as encoding/json would make of it.
func TestJSONReaderSplicesRawIDs(t *testing.T) {
	for _, body := range []map[string]any{
		{"input_ids": json.RawMessage("[1, 2,3]")},
		{"input_ids": json.RawMessage("[1,2]"), "rid": "x", "sampling_params": map[string]any{"max_new_tokens": json.Number("4")}},
		{"text": "hi", "stream": true},
	} {
		b, _ := io.ReadAll(jsonReader(body))
		var got, want map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		w, _ := json.Marshal(body)
		json.Unmarshal(w, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("spliced %s; want %s", b, w)
		}
	}
}

// textBlocks gives the ids and count the token path gives.
func TestTextBlocks(t *testing.T) {
	for _, text := range []string{"", "a", "abcd", "hello world, this is a prompt of some length", strings.Repeat("xyz", 1000)} {
		for _, bs := range []int{1, 3, 64} {
			toks := textTokens(text)
			want := blockHashes(toks, bs)
			got, n := textBlocks(text, bs)
			if n != len(toks) || len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Errorf("%.20q bs %d: %d tokens %v, want %d %v", text, bs, n, got, len(toks), want)
			}
		}
	}
}
