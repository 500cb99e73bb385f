package gateway

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodedRaw is v with every json.RawMessage but input_ids decoded as
// encoding/json decodes it (numbers as json.Number): what the scanner's
// body means.
func decodedRaw(t testing.TB, m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if raw, ok := v.(json.RawMessage); ok && k != "input_ids" {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err != nil {
				t.Fatalf("field %q kept raw is not JSON: %q: %v", k, raw, err)
			}
			v = x
		}
		out[k] = v
	}
	return out
}

// checkScan holds the scanner to encoding/json on b: what it takes means
// what encoding/json reads, it refuses what encoding/json refuses, and a
// worker body built from it decodes to what json.Marshal's does.
func checkScan(t testing.TB, b []byte) {
	got, ok := scanGenerate(b, "")
	want, err := decodeObject(b)
	if !ok {
		if err == nil && utf8.Valid(b) && !strings.Contains(string(b), strings.Repeat("[", 64)) && !strings.Contains(string(b), strings.Repeat("{", 64)) {
			t.Fatalf("%q: encoding/json reads it, the scanner did not take it", b)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: the scanner took what encoding/json refuses: %v", b, err)
	}
	if g := decodedRaw(t, got); !reflect.DeepEqual(g, want) {
		t.Fatalf("%q:\nscanner       %#v\nencoding/json %#v", b, g, want)
	}
	for _, m := range []map[string]any{got, want} {
		m["rid"] = "0123abcd"
		enc, _ := jsonBody(m)
		var buf bytes.Buffer
		buf.ReadFrom(enc)
		var back map[string]any
		dec := json.NewDecoder(&buf)
		dec.UseNumber()
		if err := dec.Decode(&back); err != nil {
			t.Fatalf("%q: the worker's body is not JSON: %v", b, err)
		}
		ref, _ := json.Marshal(decodedRaw(t, m))
		var wantBack map[string]any
		dec = json.NewDecoder(bytes.NewReader(ref))
		dec.UseNumber()
		dec.Decode(&wantBack)
		if ids, ok := back["input_ids"]; ok {
			// The raw list as the client sent it, decoded both ways alike.
			wantBack["input_ids"] = ids
		}
		if !reflect.DeepEqual(back, wantBack) {
			t.Fatalf("%q: worker body decodes to\n%#v\nwant\n%#v", b, back, wantBack)
		}
	}
}

func TestScanGenerateAsEncodingJSON(t *testing.T) {
	for _, b := range scanCases {
		checkScan(t, []byte(b))
	}
}

var scanCases = []string{
	`{}`, ` { } `, `{"input_ids": [1, 2, 3], "stream": true, "sampling_params": {"max_new_tokens": 32, "ignore_eos": true}}`,
	`{"text": "hi", "stream": false, "rid": "x", "bootstrap_host": "10.0.0.1", "bootstrap_port": 8998}`,
	`{"text": ["a", "b"]}`, `{"text": "\u00e9\n\"q\" <b> & \ud83d\ude00"}`, `{"t\u0065xt": "key escaped"}`,
	`{"a": 1, "a": 2}`, `{"image_data": [{"url": "x", "n": [1.5e3, -0, 0.25]}], "lora_path": null}`,
	`{"metadata": {"user_id": "u"}, "session_params": {"id": "s", "x": [1]}}`,
	`{"return_logprob": true, "top_logprobs_num": 5, "logprob_start_len": -1, "custom": {"deep": {"er": [[[]]]}}}`,
	`{"n": 1E+2, "m": 1e-2, "o": 12345678901234567890123}`,
	// Refused by both.
	``, `null`, `[]`, `"x"`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":.5}`,
	`{"a":"\x01"}`, `{"a":"\q"}`, `{"a":"\u12"}`, `{"a":[1,]}`, `{"a":{"b":1,}}`, `{"a":tru}`, `{"a":nul}`, `{a:1}`,
	`{"a":[1}`, `{"a":{]}`, `{"a":"x`, "{\"a\":1}\x00",
	// Left to encoding/json: invalid UTF-8, deep nesting.
	"{\"a\":\"\xff\"}", `{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
}

func FuzzScanGenerate(f *testing.F) {
	for _, b := range scanCases {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}

// A body of plain fields encodes to json.Marshal's exact bytes; kept raw,
// a client's list goes out as its bytes.
func TestBodyEncodingAsJSONMarshal(t *testing.T) {
	m := map[string]any{"text": "a <b> & \"c\"\n\u2028é", "stream": true, "n": json.Number("1.50"), "z": nil, "ids": []int{1, 2},
		"sp": map[string]any{"max_new_tokens": json.Number("8"), "stop": []any{"x", json.Number("2")}}, "port": 8998, "room": int64(1) << 62,
		"f": 0.5, "empty": json.Number("")}
	got, ok := appendBody(nil, m, "")
	want, _ := json.Marshal(m)
	if !ok || string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, ok := appendBody(nil, map[string]any{"n": json.Number("1x")}, ""); ok {
		t.Fatal("an invalid json.Number encoded; encoding/json refuses it")
	}
	body, _ := scanGenerate([]byte(`{"input_ids": [1,  2], "extra": {"k" : [1 , 2]}, "stream": true}`), "")
	body["rid"] = "r"
	rd, n := jsonBody(body)
	var buf bytes.Buffer
	buf.ReadFrom(rd)
	if w := `{"input_ids":[1,  2],"extra":{"k" : [1 , 2]},"rid":"r","stream":true}`; buf.String() != w || n != int64(len(w)) {
		t.Fatalf("got %s (%d), want %s", buf.String(), n, w)
	}
}

// completionByJSON is recorder.parse's encoding/json reading.
func completionByJSON(b []byte) (int, bool) {
	var ans struct {
		MetaInfo struct {
			CompletionTokens int `json:"completion_tokens"`
			FinishReason     *struct {
				Type string `json:"type"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	if json.Unmarshal(bytes.TrimSpace(b), &ans) != nil || ans.MetaInfo.FinishReason == nil || ans.MetaInfo.FinishReason.Type == "abort" {
		return 0, false
	}
	return ans.MetaInfo.CompletionTokens, true
}

var completionCases = []string{
	`{"text": "a", "meta_info": {"id": "x", "completion_tokens": 32, "finish_reason": {"type": "length", "length": 32}}}`,
	`{"meta_info": {"completion_tokens": 3, "finish_reason": null}}`,
	`{"meta_info": {"completion_tokens": 3, "finish_reason": {"type": "abort", "message": "x"}}}`,
	`{"meta_info": {"finish_reason": {"type": "stop", "matched": [1, {"a": "}"}]}, "completion_tokens": 0}}`,
	`{"meta_info": {"completion_tokens": 7, "finish_reason": {}}}`, ` {"meta_info": {"completion_tokens": 7, "finish_reason": {"type": "stop"}}} `,
	`{"Meta_Info": {"completion_tokens": 7, "finish_reason": {"type": "stop"}}}`,
	`{"meta_info": {"Completion_Tokens": 7, "finish_reason": {"TYPE": "abort"}}}`,
	`{"meta_info": {"completion_tokens": 7, "completion_tokens": 8, "finish_reason": {"type": "stop"}}}`,
	`{"meta_info": {"completion_tokens": -7, "finish_reason": {"type": "stop"}}}`,
	`{"meta_info": {"completion_tokens": 7.5, "finish_reason": {"type": "stop"}}}`,
	`{"meta_info": {"completion_tokens": 07, "finish_reason": {"type": "stop"}}}`,
	`{"meta_info": null}`, `{"meta_info": {"completion_tokens": 1, "finish_reason": {"type": 5}}}`, `{"meta_info": {}} x`, `{`, ``,
	`{"meta_info": {"completion_tokens": 12345678901, "finish_reason": {"type": "stop"}}}`,
	"{\"meta_info\": {\"completion_tokens\": 2, \"finish_reason\": {\"type\": \"stop\"}}}\u00a0",
}

func TestScanCompletionAsEncodingJSON(t *testing.T) {
	for _, c := range completionCases {
		checkCompletion(t, []byte(c))
	}
}

func checkCompletion(t *testing.T, b []byte) {
	n, ok, sure := scanCompletion(b)
	if !sure {
		return
	}
	if wn, wok := completionByJSON(b); n != wn && ok || ok != wok {
		t.Fatalf("%q: scanner %d %v, encoding/json %d %v", b, n, ok, wn, wok)
	}
}

func FuzzScanCompletion(f *testing.F) {
	for _, c := range completionCases {
		f.Add([]byte(c))
	}
	f.Fuzz(checkCompletion)
}

// The scanners against encoding/json on mutated bodies (the fuzz targets'
// checks, run in every go test): seeds with bytes flipped, dropped,
// doubled and spliced from JSON's own punctuation.
func TestScannersOnMutatedBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 9))
	punct := []byte(`{}[]:,"\ 0123456789.eE+-tfnul` + "\x00\x1f\xc3\xa9")
	mutate := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		for range 1 + rng.IntN(3) {
			if len(b) == 0 {
				b = append(b, punct[rng.IntN(len(punct))])
				continue
			}
			i := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0:
				b[i] = punct[rng.IntN(len(punct))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			case 2:
				b = append(b[:i], append([]byte{b[i]}, b[i:]...)...)
			default:
				b = append(b[:i], append([]byte{punct[rng.IntN(len(punct))]}, b[i:]...)...)
			}
		}
		return b
	}
	for range 20000 {
		checkScan(t, mutate([]byte(scanCases[rng.IntN(len(scanCases))])))
		checkCompletion(t, mutate([]byte(completionCases[rng.IntN(len(completionCases))])))
	}
}

// knownKey hands back each name it knows as itself, and any other as a
// copy of its bytes.
func TestKnownKeyIsTheName(t *testing.T) {
	for _, k := range []string{"input_ids", "text", "stream", "sampling_params", "max_new_tokens", "ignore_eos", "temperature",
		"top_p", "top_k", "stop", "session_id", "session_params", "rid", "meta_info", "completion_tokens", "prompt_tokens",
		"cached_tokens", "finish_reason", "type", "id", "output_ids", "", "unknown", "Stream", "input_ids "} {
		b := []byte(k)
		got := knownKey(b)
		if len(b) > 0 {
			b[0] = '#' // the result must not share b's bytes
		}
		if got != k {
			t.Errorf("knownKey(%q) = %q", k, got)
		}
	}
}

// TestJSONBodySplicesIDs: a body with the client's raw input_ids is
// json.Marshal's encoding of it (for compact ids), alone or with other
// members, short (one buffer) or past splicedIDs (read in pieces).
func TestJSONBodySplicesIDs(t *testing.T) {
	long := make([]int, splicedIDs/4)
	for i := range long {
		long[i] = 1000 + i
	}
	longRaw, _ := json.Marshal(long)
	for _, raw := range []json.RawMessage{json.RawMessage(`[1,2,3]`), json.RawMessage(`[]`), json.RawMessage(longRaw)} {
		for _, rest := range []map[string]any{{}, {"rid": "r"}, {"stream": true, "rid": "abc", "sampling_params": map[string]any{"max_new_tokens": json.Number("8")}}} {
			m := map[string]any{"input_ids": raw}
			for k, v := range rest {
				m[k] = v
			}
			rd, n := jsonBody(m)
			var got bytes.Buffer
			got.ReadFrom(rd)
			want, _ := json.Marshal(m)
			if got.String() != string(want) || n != int64(len(want)) {
				t.Fatalf("ids %d bytes, %d other keys: got %.200s (%d), want %.200s", len(raw), len(rest), got.String(), n, want)
			}
		}
	}
}
