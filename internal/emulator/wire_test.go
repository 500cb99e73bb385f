package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

func TestDecodeGenerate(t *testing.T) {
	for _, c := range []struct {
		body string
		want string // "" accepted; else a piece of the error
		val  bool   // a validation error (FastAPI's shape)
	}{
		{`{"input_ids":[1,2,3]}`, "", false},
		{`{"text":"hello"}`, "", false},
		{`{"text":"hi","input_ids":[1]}`, "Either text, input_ids or input_embeds should be provided.", false},
		{`{}`, "Either text, input_ids or input_embeds should be provided.", false},
		{`{"input_embeds":[[0.1]]}`, "input_embeds are not supported", false},
		{`{"text":["a","b"]}`, "batch requests", false},
		{`{"input_ids":[[1],[2]]}`, "batch requests", false},
		{`{"input_ids":"12"}`, "input_ids: want a list", true},
		{`{"input_ids":[1.5]}`, "input_ids: want a list", true},
		{`{"input_ids":[-1]}`, "want a token id", false},
		{`{"input_ids":[1],"sampling_params":{"max_new_tokens":-1}}`, "max_new_tokens must be at least 0, got -1.", false},
		{`{"input_ids":[1],"sampling_params":{"max_new_tokens":"x"}}`, "sampling_params", true},
		{`{"input_ids":[1],"sampling_params":[]}`, "sampling_params", true},
		{`{"input_ids":[1],"rid":5}`, "rid: want a string", true},
		{`{"input_ids":[1],"rid":["a"]}`, "rid: want a string", true},
		{`{"input_ids":[1],"bootstrap_room":-3}`, "bootstrap_room -3", false},
		{`{"input_ids":[1],"bootstrap_room":"x"}`, "bootstrap_room: want an integer", true},
		{`{"input_ids":[1],"bootstrap_port":70000}`, "bootstrap_port 70000", false},
		{`{"input_ids":[1],"session_params":{"offset":-1,"id":"s"}}`, "offset -1", false},
		{`{"input_ids":[1],"stream":"yes"}`, "stream", true},
		{`[1,2]`, "JSON object", true},
		{`null`, "JSON object", true},
		{`{"input_ids":[1]} x`, "invalid", true},
		{``, "JSON object", true},
	} {
		g, err := DecodeGenerate([]byte(c.body))
		if c.want == "" {
			if err != nil || g == nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		var re *requestError
		if !errors.As(err, &re) || !strings.Contains(re.msg, c.want) || re.validation != c.val || re.status != 400 {
			t.Errorf("%s: %v (validation %v), want %q (validation %v)", c.body, err, re != nil && re.validation, c.want, c.val)
		}
	}
	g, err := DecodeGenerate([]byte(`{"rid":"r","input_ids":[5,6],"stream":true,"sampling_params":{"max_new_tokens":7,"temperature":0},
		"session_params":{"id":"s","rid":"p","offset":3,"drop_previous_output":true},"session_id":"S",
		"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":9223372036854775807,"data_parallel_rank":0,"unknown":1}`))
	if err != nil {
		t.Fatal(err)
	}
	off := 3
	want := &GenerateReq{RID: "r", Tokens: []int{5, 6}, MaxNew: 7, Stream: true,
		Session: &SessionParams{ID: "s", RID: "p", Offset: &off, DropPreviousOutput: true}, SessionID: "S",
		BootstrapHost: "h", BootstrapPort: 8998, BootstrapRoom: math.MaxInt64, HasRoom: true, DPRank: new(int)}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("decoded %+v\nwant %+v", g, want)
	}
	if g, _ := DecodeGenerate([]byte(`{"input_ids":[1],"sampling_params":null,"rid":null,"bootstrap_room":null}`)); g.MaxNew != DefaultMaxNewTokens || g.HasRoom || g.RID != "" {
		t.Fatalf("nulls: %+v", g)
	}
}

// FuzzDecodeGenerate: any body either decodes to a request within the
// documented bounds or is refused with a 400 requestError; the decoder
// never panics, and what it accepts survives a round trip.
func FuzzDecodeGenerate(f *testing.F) {
	for _, s := range []string{
		`{"input_ids":[1,2,3],"rid":"a","sampling_params":{"max_new_tokens":4}}`,
		`{"text":"hello world","stream":true}`,
		`{"input_ids":[1],"bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":12345}`,
		`{"input_ids":[1],"session_params":{"id":"s","rid":"r","offset":2,"replace":true}}`,
		`{"text":["a"]}`, `{"input_ids":[[1]]}`, `{}`, `[]`, `{"input_ids":[1e3]}`, `{"input_ids":[2147483648]}`,
		`{"input_ids":[1],"data_parallel_rank":-1}`, "{\"text\":\"\\ud800\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := DecodeGenerate(body)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status != 400 || re.msg == "" {
				t.Fatalf("refusal %v is not a 400 requestError", err)
			}
			return
		}
		if g.MaxNew < 0 || g.MaxNew > 1<<30 || (g.BootstrapPort != 0 && (g.BootstrapPort < 1 || g.BootstrapPort > 65535)) ||
			g.BootstrapRoom > math.MaxInt64 || (g.DPRank != nil && *g.DPRank < 0) || (g.Session != nil && g.Session.ID == "") {
			t.Fatalf("accepted out of bounds: %+v", g)
		}
		for _, id := range g.Tokens {
			if id < 0 || id > math.MaxInt32 {
				t.Fatalf("token id %d", id)
			}
		}
		// Re-encode what was understood; it decodes to the same request.
		m := map[string]any{"input_ids": g.Tokens, "sampling_params": map[string]any{"max_new_tokens": g.MaxNew}, "stream": g.Stream}
		if g.Tokens == nil {
			m["input_ids"] = []int{}
		}
		if g.RID != "" {
			m["rid"] = g.RID
		}
		if g.HasRoom {
			m["bootstrap_room"] = g.BootstrapRoom
		}
		b, _ := json.Marshal(m)
		g2, err := DecodeGenerate(b)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", b, err)
		}
		if len(g2.Tokens) != len(g.Tokens) || g2.MaxNew != g.MaxNew || g2.RID != g.RID || g2.BootstrapRoom != g.BootstrapRoom || g2.Stream != g.Stream {
			t.Fatalf("round trip %+v → %+v", g, g2)
		}
	})
}

func TestTokens(t *testing.T) {
	a, b := TextTokens("abcdefgh"), TextTokens("abcdefghij")
	if len(a) != 2 || len(b) != 3 || a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("text tokens %v %v", a, b)
	}
	x := BlockHashes(ids(1, 200), 64)
	y := BlockHashes(append(ids(1, 192), 5, 6), 64)
	if len(x) != 4 || len(y) != 4 || x[0] != y[0] || x[2] != y[2] || x[3] == y[3] {
		t.Fatalf("block hashes %v %v", x, y)
	}
	// An id names its whole prefix: the same block after a different prefix differs.
	z := BlockHashes(append(ids(2, 64), ids(1, 200)[64:128]...), 64)
	if z[1] == x[1] {
		t.Fatal("block 2 ids equal under different prefixes")
	}
	if OutputToken("r", 3) != OutputToken("r", 3) || OutputToken("r", 3) == OutputToken("r", 4) || OutputToken("r", 0) >= VocabSize {
		t.Fatal("output tokens")
	}
	if TokenText(0) != "aaaa" || len(TokenText(VocabSize-1)) != 4 {
		t.Fatal(TokenText(0))
	}
}

// FuzzHandlers: the other endpoints' bodies, on a session-aware decoder
// (it has every endpoint): no body makes a handler panic or answer 5xx,
// and the worker stays healthy.
func FuzzHandlers(f *testing.F) {
	paths := []string{"/open_session", "/close_session", "/abort_request", "/session_cache/admit_direct_append", "/_pd/kv",
		"/session_cache/lookup", "/_snapshot/dump", "/_snapshot/prepare_receive", "/_snapshot/finalize_ingest", "/_snapshot/release"}
	for _, s := range []string{
		`{"capacity_of_str_len":10,"session_id":"a"}`, `{"session_id":"a"}`, `{"rid":"x","abort_all":true}`,
		`{"session_id":"s","input_ids":[1,2,3],"max_new_tokens":4,"max_append_tokens":2,"force_seed":true}`,
		`{"bootstrap_room":1,"rid":"r","tokens":3,"done":true,"first_token":5}`, `[]`, `{"session_id":5}`, ``,
		`{"session_id":"s","num_tokens":10,"blocks":[1,2,18446744073709551615]}`, `{"session_id":"s","blocks":[-1]}`,
	} {
		for p := range paths {
			f.Add(uint8(p), []byte(s))
		}
	}
	s, err := New(Config{Profile: testProfile(f), Role: engine.RoleDecode, Session: engine.SessionConfig{Enabled: true}, TimeScale: 1000})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0", ""); err != nil {
		f.Fatal(err)
	}
	defer s.Kill()
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		rec = httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
		if rec.Code != 200 {
			t.Fatalf("unhealthy after %s %q", path, body)
		}
	})
}
