package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// kvcStack is a KVC gateway over one prefill and two session-keeping
// decoders, all emulated on loopback.
func kvcStack(t *testing.T) string {
	t.Helper()
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	return gateway(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1}).URL
}

// turnCheck asserts what a coding agent's turn must show through KVC: the
// first is seeded through P, every later one goes direct to the decoder
// that holds the session, and the cached prefix the worker reports grows.
type turnCheck struct {
	t          *testing.T
	home       string
	lastCached int64
}

func (c *turnCheck) turn(n int, resp *http.Response, cached int64) {
	c.t.Helper()
	if resp == nil {
		c.t.Fatalf("turn %d: no response captured", n)
	}
	mode, w := resp.Header.Get("X-PDHybrid-Mode"), resp.Header.Get("X-PDHybrid-Worker")
	c.t.Logf("turn %d: %s on %s, %d cached tokens", n, mode, w, cached)
	if n == 1 {
		if mode != "pd-router-turn1-seed" {
			c.t.Fatalf("turn 1 went %q, want a seed", mode)
		}
		c.home = w
		return
	}
	if mode != "kvcache-direct-to-d-session" || w != c.home {
		c.t.Fatalf("turn %d went %q on %s, want direct to %s", n, mode, w, c.home)
	}
	if cached <= c.lastCached {
		c.t.Fatalf("turn %d read %d cached tokens, turn %d %d: want the reuse to grow", n, cached, n-1, c.lastCached)
	}
	c.lastCached = cached
}

// The official Anthropic Go SDK drives a streamed coding-agent loop —
// assistant tool_use, user tool_result, and again — through the KVC
// gateway; the session is Claude Code's header, and the system prompt
// starts with Claude Code's per-request billing nonce.
func TestAnthropicSDKToolLoop(t *testing.T) {
	gw := kvcStack(t)
	client := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(gw), aoption.WithAPIKey("unused"),
		aoption.WithMaxRetries(0), aoption.WithHeader("X-Claude-Code-Session-Id", "cc-6c7e3b0e"))
	ctx := context.Background()
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "read_file", Description: anthropic.String("Read a file"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}}}}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix the failing test in parser.go."))}
	check := &turnCheck{t: t}
	for turn := 1; turn <= 4; turn++ {
		// As Claude Code sends it: a billing line with a fresh nonce first.
		system := []anthropic.TextBlockParam{
			{Text: fmt.Sprintf("x-anthropic-billing-header: cc_version=2.1.117.48f; cc_entrypoint=cli; cch=%05x;", 7919*turn)},
			{Text: strings.Repeat("You are a careful coding agent. ", 40)}}
		var resp *http.Response
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 12,
			System: system, Tools: tools, Messages: msgs}, aoption.WithResponseInto(&resp))
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Usage.OutputTokens != 12 || msg.StopReason != "max_tokens" {
			t.Fatalf("turn %d: %+v", turn, msg)
		}
		check.turn(turn, resp, msg.Usage.CacheReadInputTokens)
		if turn == 1 && msg.Usage.CacheReadInputTokens != 0 {
			t.Fatalf("turn 1 read %d cached tokens from a fresh stack", msg.Usage.CacheReadInputTokens)
		}
		if turn > 1 && msg.Usage.InputTokens >= msg.Usage.CacheReadInputTokens {
			t.Fatalf("turn %d: %d uncached input tokens against %d cached: the conversation was not reused", turn,
				msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens)
		}
		// The agent's loop: the model's answer, then the tool call it
		// "made", then the tool's result.
		id := "toolu_" + string(rune('a'+turn))
		answer := msg.ToParam()
		answer.OfAssistant.Content = append(answer.OfAssistant.Content, anthropic.NewToolUseBlock(id, map[string]any{"path": "parser.go"}, "read_file"))
		msgs = append(msgs, answer, anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, strings.Repeat("func parse() {}\n", 20), false)))
	}
	// count_tokens renders the same prompt.
	n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "qwen3-30b-a3b", Messages: msgs})
	if err != nil || n.InputTokens < 100 {
		t.Fatalf("count_tokens: %+v, %v", n, err)
	}
	// A refusal reaches the SDK as Anthropic's error.
	_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 4, Messages: nil})
	if err == nil || !strings.Contains(err.Error(), "invalid_request_error") {
		t.Fatalf("empty messages: %v, want an invalid_request_error", err)
	}
}

// The same loop with the official OpenAI Go SDK, the session in OpenCode's
// x-session-id header.
func TestOpenAISDKToolLoop(t *testing.T) {
	gw := kvcStack(t)
	client := openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader("x-session-id", "oc-ses-1"))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(strings.Repeat("You are a careful coding agent. ", 40)),
		openai.UserMessage("Fix the failing test in parser.go."),
	}
	check := &turnCheck{t: t}
	for turn := 1; turn <= 4; turn++ {
		var resp *http.Response
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "qwen3-30b-a3b", Messages: msgs,
			Tools:     []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "read_file"})},
			MaxTokens: openai.Int(12), StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}},
			option.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens != 12 {
			t.Fatalf("turn %d: %+v", turn, acc.ChatCompletion)
		}
		check.turn(turn, resp, acc.Usage.PromptTokensDetails.CachedTokens)
		id := "call_" + string(rune('a'+turn))
		msgs = append(msgs,
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(acc.Choices[0].Message.Content)},
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read_file", Arguments: `{"path": "parser.go"}`}}}},
			}},
			openai.ToolMessage(strings.Repeat("func parse() {}\n", 20), id))
	}
}

// A Claude Code sub-agent (its parent's session header plus an agent id)
// is a session of its own, placed on its parent's decoder though its
// prompt shares nothing with the parent's and that decoder is the busiest
// (a session with no parent goes to a less loaded one), and then appended
// there directly.
func TestAnthropicSubAgentRouting(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	ds := []*emulator.Server{worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)}
	gw := gateway(t, kvc.MechKVC, []*emulator.Server{p}, ds).URL
	client := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(gw), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	ask := func(system, user string, headers ...string) (mode, worker string) {
		t.Helper()
		opts := []aoption.RequestOption{}
		for i := 0; i < len(headers); i += 2 {
			opts = append(opts, aoption.WithHeader(headers[i], headers[i+1]))
		}
		var resp *http.Response
		opts = append(opts, aoption.WithResponseInto(&resp))
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 4,
			System:   []anthropic.TextBlockParam{{Text: strings.Repeat(system, 30)}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))}}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("X-PDHybrid-Mode"), resp.Header.Get("X-PDHybrid-Worker")
	}
	_, parent := ask("You are the main agent. ", "Plan the refactor.", "X-Claude-Code-Session-Id", "root-1")
	// A second turn: the parent's decoder is now the busiest.
	if mode, w := ask("You are the main agent. ", "Plan the refactor.", "X-Claude-Code-Session-Id", "root-1"); w != parent {
		t.Fatalf("parent's second turn went %s on %s", mode, w)
	}
	_, other := ask("You answer questions. ", "What is 2+2?", "X-Claude-Code-Session-Id", "other-1")
	if other == parent {
		t.Fatalf("two fresh sessions landed on one decoder %s", parent)
	}
	_, lone := ask("You explore code. ", "Find the parser.", "X-Claude-Code-Session-Id", "lone-1")
	if lone == parent || lone == other {
		t.Fatalf("a third fresh session went to %s, want the idle decoder", lone)
	}
	sub := []string{"X-Claude-Code-Session-Id", "root-1", "X-Claude-Code-Agent-Id", "agent-7"}
	mode, w := ask("You review diffs. ", "Review the lexer.", sub...)
	if mode != "pd-router-turn1-seed" || w != parent {
		t.Fatalf("sub-agent's first turn went %s on %s, want a seed of its own session on its parent's decoder %s", mode, w, parent)
	}
	if mode, w = ask("You review diffs. ", "Review the lexer.", sub...); mode != "kvcache-direct-to-d-session" || w != parent {
		t.Fatalf("sub-agent's second turn went %s on %s, want direct on %s", mode, w, parent)
	}
}

// Through naive PD the cached tokens are the prefill worker's: a second
// request with the same long prefix reports P's prefix hit, streamed (the
// final event waits for P's leg) and not.
func TestAnthropicSDKPDCacheRead(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d := worker(t, engine.RoleDecode, false)
	gw := gateway(t, kvc.MechPD, []*emulator.Server{p}, []*emulator.Server{d}).URL
	client := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(gw), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	params := func(q string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 4,
			System:   []anthropic.TextBlockParam{{Text: strings.Repeat("Shared project context. ", 100)}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}}
	}
	first, err := client.Messages.New(ctx, params("First question?"))
	if err != nil || first.Usage.CacheReadInputTokens != 0 {
		t.Fatalf("first: %+v %v", first, err)
	}
	stream := client.Messages.NewStreaming(ctx, params("Second question?"))
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	total := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens
	if msg.Usage.CacheReadInputTokens < 512 || msg.Usage.InputTokens < 1 || total < first.Usage.InputTokens {
		t.Fatalf("second: %d cached of %d input tokens (first %d), want P's hit on the shared system prompt",
			msg.Usage.CacheReadInputTokens, total, first.Usage.InputTokens)
	}
}
