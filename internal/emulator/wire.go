package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The /generate body, as SGLang's GenerateReqInput
// (python/sglang/srt/managers/io_struct.py) names its fields. Only what the
// emulator uses is read; unknown fields are ignored, as SGLang's dataclass
// parsing ignores them. Batches (a list of prompts) are refused.

// DefaultMaxNewTokens is SGLang's SamplingParams default.
const DefaultMaxNewTokens = 128

// FakeBootstrapHost is SGLang's FAKE_BOOTSTRAP_HOST
// (disaggregation/utils.py): a PD request with this host runs without a
// peer (the health probe and warmup use it).
const FakeBootstrapHost = "2.2.2.2"

// DefaultBootstrapPort is SGLang's --disaggregation-bootstrap-port default.
const DefaultBootstrapPort = 8998

// maxBootstrapRoom is the largest room SGLang's routers draw (2^63 − 1).
const maxBootstrapRoom = math.MaxInt64

// GenerateReq is a decoded /generate body.
type GenerateReq struct {
	RID       string // "" when the client gave none
	Tokens    []int  // input_ids, or text by TextTokens
	FromText  bool
	MaxNew    int // sampling_params.max_new_tokens (default 128)
	Stream    bool
	Session   *SessionParams
	SessionID string // top-level session_id: the session a request belongs to on a session-aware decoder
	// LocalPrefill is do_local_prefill (draft PR #34773): a decode worker
	// with --disaggregation-decode-enable-conditional-agg prefills the
	// request itself, no bootstrap room.
	LocalPrefill bool

	BootstrapHost string
	BootstrapPort int // 0: not given
	BootstrapRoom uint64
	HasRoom       bool
	DPRank        *int // data_parallel_rank (or routed_dp_rank)
}

// SessionParams is SGLang's session_params.
type SessionParams struct {
	ID                 string `json:"id"`
	RID                string `json:"rid"`
	Offset             *int   `json:"offset"`
	Replace            bool   `json:"replace"`
	DropPreviousOutput bool   `json:"drop_previous_output"`
}

// requestError is a refused request: its HTTP status and the message as
// SGLang words it. Validation errors (a field of the wrong type) come back
// in FastAPI's shape, the others as {"error": {"message": ...}}.
type requestError struct {
	status     int
	msg        string
	validation bool
}

func (e *requestError) Error() string { return e.msg }

func badValue(format string, a ...any) error {
	return &requestError{status: 400, msg: fmt.Sprintf(format, a...)}
}

func badField(format string, a ...any) error {
	return &requestError{status: 400, msg: fmt.Sprintf(format, a...), validation: true}
}

type rawGenerate struct {
	Text                json.RawMessage `json:"text"`
	InputIDs            json.RawMessage `json:"input_ids"`
	InputEmbeds         json.RawMessage `json:"input_embeds"`
	RID                 json.RawMessage `json:"rid"`
	SamplingParams      json.RawMessage `json:"sampling_params"`
	Stream              *bool           `json:"stream"`
	SessionParams       json.RawMessage `json:"session_params"`
	SessionID           *string         `json:"session_id"`
	DoLocalPrefill      *bool           `json:"do_local_prefill"`
	BootstrapHost       *string         `json:"bootstrap_host"`
	BootstrapPort       *int64          `json:"bootstrap_port"`
	BootstrapRoom       json.RawMessage `json:"bootstrap_room"`
	DataParallelRank    *int64          `json:"data_parallel_rank"`
	RoutedDPRank        *int64          `json:"routed_dp_rank"`
	DisaggPrefillDPRank *int64          `json:"disagg_prefill_dp_rank"`
}

func isNull(m json.RawMessage) bool {
	return len(m) == 0 || bytes.Equal(bytes.TrimSpace(m), []byte("null"))
}

// DecodeGenerate parses a /generate body. It never panics; every refusal is
// a *requestError with SGLang's status and wording where SGLang has one.
func DecodeGenerate(body []byte) (*GenerateReq, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, badField("request body must be a JSON object")
	}
	var raw rawGenerate
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return nil, badField("invalid /generate body: %s", jsonMsg(err))
	}
	g := &GenerateReq{MaxNew: DefaultMaxNewTokens}
	hasText, hasIDs, hasEmbeds := !isNull(raw.Text), !isNull(raw.InputIDs), !isNull(raw.InputEmbeds)
	n := 0
	for _, b := range []bool{hasText, hasIDs, hasEmbeds} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nil, badValue("Either text, input_ids or input_embeds should be provided.")
	}
	switch {
	case hasEmbeds:
		return nil, badValue("input_embeds are not supported by the emulated worker; send input_ids or text")
	case hasText:
		var s string
		if err := json.Unmarshal(raw.Text, &s); err != nil {
			var batch []string
			if json.Unmarshal(raw.Text, &batch) == nil {
				return nil, badValue("batch requests (a list of prompts) are not supported by the emulated worker")
			}
			return nil, badField("text: want a string")
		}
		g.Tokens, g.FromText = TextTokens(s), true
	default:
		var ids []int64
		if err := json.Unmarshal(raw.InputIDs, &ids); err != nil {
			var batch [][]int64
			if json.Unmarshal(raw.InputIDs, &batch) == nil {
				return nil, badValue("batch requests (a list of prompts) are not supported by the emulated worker")
			}
			return nil, badField("input_ids: want a list of token ids (integers)")
		}
		g.Tokens = make([]int, len(ids))
		for i, id := range ids {
			if id < 0 || id > math.MaxInt32 {
				return nil, badValue("input_ids[%d] = %d: want a token id in [0, %d]", i, id, math.MaxInt32)
			}
			g.Tokens[i] = int(id)
		}
	}
	if !isNull(raw.RID) {
		if err := json.Unmarshal(raw.RID, &g.RID); err != nil {
			return nil, badField("rid: want a string")
		}
	}
	if !isNull(raw.SamplingParams) {
		var sp struct {
			MaxNew *int64 `json:"max_new_tokens"`
		}
		if err := json.Unmarshal(raw.SamplingParams, &sp); err != nil {
			return nil, badField("sampling_params: %s", jsonMsg(err))
		}
		if sp.MaxNew != nil {
			if *sp.MaxNew < 0 {
				return nil, badValue("max_new_tokens must be at least 0, got %d.", *sp.MaxNew)
			}
			if *sp.MaxNew > 1<<30 {
				return nil, badValue("max_new_tokens %d: want at most %d", *sp.MaxNew, 1<<30)
			}
			g.MaxNew = int(*sp.MaxNew)
		}
	}
	if raw.Stream != nil {
		g.Stream = *raw.Stream
	}
	if !isNull(raw.SessionParams) {
		var sp SessionParams
		if err := json.Unmarshal(raw.SessionParams, &sp); err != nil {
			return nil, badField("session_params: %s", jsonMsg(err))
		}
		if sp.Offset != nil && *sp.Offset < 0 {
			return nil, badValue("session_params.offset %d: want ≥ 0", *sp.Offset)
		}
		if sp.ID != "" {
			g.Session = &sp
		}
	}
	if raw.SessionID != nil {
		g.SessionID = *raw.SessionID
	}
	if raw.DoLocalPrefill != nil {
		g.LocalPrefill = *raw.DoLocalPrefill
	}
	if raw.BootstrapHost != nil {
		g.BootstrapHost = *raw.BootstrapHost
	}
	if raw.BootstrapPort != nil {
		if *raw.BootstrapPort < 1 || *raw.BootstrapPort > 65535 {
			return nil, badValue("bootstrap_port %d: want a TCP port in [1, 65535]", *raw.BootstrapPort)
		}
		g.BootstrapPort = int(*raw.BootstrapPort)
	}
	if !isNull(raw.BootstrapRoom) {
		var room int64
		if err := json.Unmarshal(raw.BootstrapRoom, &room); err != nil {
			return nil, badField("bootstrap_room: want an integer")
		}
		if room < 0 {
			return nil, badValue("bootstrap_room %d: want an integer in [0, 2^63-1]", room)
		}
		g.BootstrapRoom, g.HasRoom = uint64(room), true
	}
	for _, r := range []*int64{raw.DataParallelRank, raw.RoutedDPRank, raw.DisaggPrefillDPRank} {
		if r == nil {
			continue
		}
		if *r < 0 || *r > math.MaxInt32 {
			return nil, badValue("data parallel rank %d: want ≥ 0", *r)
		}
		if g.DPRank == nil {
			v := int(*r)
			g.DPRank = &v
		}
	}
	return g, nil
}

// jsonMsg shortens encoding/json's messages ("json: cannot unmarshal ...").
func jsonMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// FinishReason is meta_info.finish_reason as SGLang's FINISH_* classes
// write it (managers/schedule_batch.py).
type FinishReason struct {
	Type       string  `json:"type"`             // "length" or "abort"
	Length     *int    `json:"length,omitempty"` // length
	Message    *string `json:"message,omitempty"`
	StatusCode *int    `json:"status_code,omitempty"`
	ErrType    *string `json:"err_type,omitempty"`
}

func finishLength(n int) *FinishReason { return &FinishReason{Type: "length", Length: &n} }

func finishAbort(msg string, status int) *FinishReason {
	f := &FinishReason{Type: "abort", Message: &msg}
	if status != 0 {
		f.StatusCode = &status
	}
	return f
}

// MetaInfo is the part of SGLang's meta_info the emulator reports, plus
// its own timings under "pdhybrid".
type MetaInfo struct {
	ID               string        `json:"id"`
	FinishReason     *FinishReason `json:"finish_reason"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	CachedTokens     int           `json:"cached_tokens"`
	E2ELatency       float64       `json:"e2e_latency"`
	WeightVersion    string        `json:"weight_version"`
	Emulator         *EmulatorInfo `json:"pdhybrid,omitempty"`
}

// EmulatorInfo carries the engine model's own times for the request, in
// model seconds (wall seconds × time scale).
type EmulatorInfo struct {
	TTFT           *float64 `json:"ttft,omitempty"`
	QueueS         float64  `json:"queue"`
	FirstTokenFrom string   `json:"first_token_from,omitempty"` // decode: the prefill bootstrap address that sent it
	Role           string   `json:"role"`                       // colo, prefill or decode
}

// GenerateOut is one /generate answer (or one SSE event): text and
// output_ids are cumulative, as SGLang streams them by default.
type GenerateOut struct {
	Text      string   `json:"text"`
	OutputIDs []int    `json:"output_ids"`
	MetaInfo  MetaInfo `json:"meta_info"`
}

// errorBody is SGLang's {"error": {"message": ...}} (http_server.py
// _create_error_response).
type errorBody struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// errorResponse is SGLang's ErrorResponse (FastAPI validation errors and
// HTTPExceptions).
type errorResponse struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}
