package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// agentTurns checks what a coding agent's streamed turns must show through
// a live KVC stack: the first is seeded through P onto one of the decoders, every
// later one goes direct to that same decoder, and the cached prefix the
// worker reports grows turn over turn.
// agentTurns holds KVC v2's path through an agent's turns: a seed
// through P to a decoder, then direct appends there. The up tests that use
// it run --kvc-preset v2, whose labels are fixed; TestUpStack runs the
// default, v3.
type agentTurns struct {
	t          *testing.T
	decoders   []string // the decoders' URLs, as up named them
	home       string
	lastCached int64
}

func (c *agentTurns) turn(n int, resp *http.Response, cached, uncached int64) {
	c.t.Helper()
	if resp == nil {
		c.t.Fatalf("turn %d: no response captured", n)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		c.t.Fatalf("turn %d answered %q, want a stream", n, ct)
	}
	mode, w := resp.Header.Get("X-PDHybrid-Mode"), resp.Header.Get("X-PDHybrid-Worker")
	c.t.Logf("turn %d: %s on %s (replica %q), %d cached and %d uncached prompt tokens", n, mode, w, resp.Header.Get("X-PDHybrid-Replica"), cached, uncached)
	if n == 1 {
		if mode != "pd-router-turn1-seed" || !slices.Contains(c.decoders, w) || cached != 0 {
			c.t.Fatalf("turn 1 went %q on %s with %d cached tokens, want a seed on one of %v from nothing cached", mode, w, cached, c.decoders)
		}
		c.home = w
		return
	}
	if mode != "kvcache-direct-to-d-session" || w != c.home {
		c.t.Fatalf("turn %d went %q on %s, want kvcache-direct-to-d-session on %s", n, mode, w, c.home)
	}
	if cached <= c.lastCached || uncached >= cached {
		c.t.Fatalf("turn %d read %d cached tokens (%d uncached), turn %d %d: want the reuse to grow and cover most of the prompt",
			n, cached, uncached, n-1, c.lastCached)
	}
	c.lastCached = cached
}

// stopUp interrupts up and waits for it, so its stderr (the children's
// logs included) is complete.
func stopUp(t *testing.T, c *exec.Cmd, exited chan error) {
	t.Helper()
	c.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err // for startUp's cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Fatalf("up exited with %v after SIGINT, want %d", err, exitInterrupted)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("up did not stop on SIGINT")
	}
}

// The official OpenAI Go client streams a coding agent's chat — system
// prompt, tools, assistant tool_calls, tool results — through `pdhybrid
// up` (child processes, KVC over 1 prefill and 2 decoders), the session in
// OpenCode's x-session-id header: turn 1 is seeded, every later turn goes
// direct to the same decoder, and usage.prompt_tokens_details.cached_tokens
// grows. The gateway runs with --log-prompts, so the prompt reaches up's
// stderr as the gateway's request log.
func TestUpOpenAIClientToolLoop(t *testing.T) {
	gw, children, c, exited, stderr := startUp(t, "--mechanism", "kvcache-centric", "--kvc-preset", "v2", "--prefill", "1", "--decode", "2", "--port", "0",
		"--time-scale", "20", "--gateway-arg=--log-prompts")
	client := openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second), option.WithHeader("x-session-id", "ses_oc_41f2"))
	ctx := context.Background()
	const secret = "parser-bug-ticket-5fe1c9"
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(strings.Repeat("You are a careful coding agent. ", 40)),
		openai.UserMessage("Fix " + secret + ": the failing test in parser.go."),
	}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "read_file",
		Description: openai.String("Read a file"),
		Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}})}
	check := &agentTurns{t: t, decoders: children[1:]}
	for turn := 1; turn <= 4; turn++ {
		var resp *http.Response
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "qwen3-30b-a3b", Messages: msgs,
			Tools: tools, MaxTokens: openai.Int(12), StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}},
			option.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens != 12 || chunks < 3 {
			t.Fatalf("turn %d (%d chunks): %+v", turn, chunks, acc.ChatCompletion)
		}
		cached := acc.Usage.PromptTokensDetails.CachedTokens
		check.turn(turn, resp, cached, acc.Usage.PromptTokens-cached)
		// The agent's loop: the model's answer with the tool call it
		// "made", then the tool's result.
		id := fmt.Sprintf("call_%d", turn)
		msgs = append(msgs,
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(acc.Choices[0].Message.Content)},
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read_file", Arguments: `{"path": "parser.go"}`}}}},
			}},
			openai.ToolMessage(strings.Repeat("func parse() {}\n", 20), id))
	}
	stopUp(t, c, exited)
	if n := strings.Count(stderr.String(), secret); n != 4 {
		t.Fatalf("with --log-prompts the prompt is in up's stderr %d times, want once a turn (4):\n%s", n, stderr.String())
	}
}

// The official Anthropic Go SDK through `up --gateways 3`: three stateless
// replicas behind the round-robin front, so consecutive turns land on
// different replicas. Every turn streams, with a system prompt, tools and
// the tool_use / tool_result history, the session in Claude Code's own
// x-claude-code-session-id header. Another agent's session came first and
// sits on one decoder, so ours is placed on the other, which is not the
// one a replica that never saw our session would try first: each such
// replica still sends it direct to its decoder (the residency probe), the
// same one each turn, and usage.cache_read_input_tokens grows. No prompt
// reaches the logs by default.
func TestUpAnthropicSDKReplicas(t *testing.T) {
	gw, children, c, exited, stderr := startUp(t, "--mechanism", "kvcache-centric", "--kvc-preset", "v2", "--prefill", "1", "--decode", "2",
		"--gateways", "3", "--port", "0", "--time-scale", "20")
	client := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(gw), aoption.WithAPIKey("unused"),
		aoption.WithMaxRetries(0), aoption.WithRequestTimeout(20*time.Second))
	ctx := context.Background()
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "bash", Description: anthropic.String("Run a shell command"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"cmd": map[string]any{"type": "string"}}}}}}
	// turn streams one turn of the session and returns the answer and the
	// replica that served it.
	turn := func(session string, n int, system []anthropic.TextBlockParam, msgs []anthropic.MessageParam) (anthropic.Message, *http.Response) {
		t.Helper()
		var resp *http.Response
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 12,
			System: system, Tools: tools, Messages: msgs},
			aoption.WithHeader("x-claude-code-session-id", session), aoption.WithResponseInto(&resp))
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatalf("session %s turn %d: %v", session, n, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("session %s turn %d: %v", session, n, err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Usage.OutputTokens != 12 || msg.StopReason != "max_tokens" {
			t.Fatalf("session %s turn %d: %+v", session, n, msg)
		}
		return msg, resp
	}
	// The other agent (a prompt of its own) takes a decoder through the
	// first replica; then two count_tokens calls (they route nothing) move
	// the front on, so our first turn goes through that replica too, which
	// places it on the other decoder. The next two replicas never saw
	// either session: without a word from the decoders they would try the
	// first decoder, the tie break.
	otherSystem := []anthropic.TextBlockParam{{Text: strings.Repeat("You summarize documents in plain words. ", 30)}}
	_, resp := turn("9e0c7a51-other", 1, otherSystem, []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarize README.md."))})
	otherDecoder, placedBy := resp.Header.Get("X-PDHybrid-Worker"), resp.Header.Get("X-PDHybrid-Replica")
	t.Logf("the other session: %s on %s through %s (decoders %v)", resp.Header.Get("X-PDHybrid-Mode"), otherDecoder, placedBy, children[1:])
	for range 2 {
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "qwen3-30b-a3b", System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: otherSystem},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarize README.md."))}})
		if err != nil || n.InputTokens < 100 {
			t.Fatalf("count_tokens: %+v, %v", n, err)
		}
	}

	system := []anthropic.TextBlockParam{{Text: strings.Repeat("You are Claude Code, a careful coding agent. ", 30)}}
	const secret = "lexer-regression-ticket-93ab0d"
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Fix " + secret + " in lexer.go."))}
	check := &agentTurns{t: t, decoders: children[1:]}
	replicas := map[string]bool{}
	last := ""
	for n := 1; n <= 4; n++ {
		msg, resp := turn("4b1d9c2e-0f6a-4e57-9a3b-7d2c8e1f5a60", n, system, msgs)
		rep := resp.Header.Get("X-PDHybrid-Replica")
		if rep == "" || rep == last {
			t.Fatalf("turn %d served by replica %q after %q: want the front to move every turn to another replica", n, rep, last)
		}
		replicas[rep], last = true, rep
		check.turn(n, resp, msg.Usage.CacheReadInputTokens, msg.Usage.InputTokens)
		if n == 1 && (rep != placedBy || check.home == otherDecoder) {
			t.Fatalf("turn 1 went through %s to %s; the other session is on %s, placed by %s: want ours on the other decoder",
				rep, check.home, otherDecoder, placedBy)
		}
		id := fmt.Sprintf("toolu_%02d", n)
		answer := msg.ToParam()
		answer.OfAssistant.Content = append(answer.OfAssistant.Content, anthropic.NewToolUseBlock(id, map[string]any{"cmd": "go test ./..."}, "bash"))
		// A result of more than a cache block (64 tokens), so the cached
		// prefix, counted in whole blocks, grows every turn.
		msgs = append(msgs, answer, anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, strings.Repeat("--- FAIL: TestLexer (0.00s)\n", 12), false)))
	}
	if len(replicas) != 3 {
		t.Fatalf("4 turns served by replicas %v, want all 3", replicas)
	}
	stopUp(t, c, exited)
	if strings.Contains(stderr.String(), secret) {
		t.Fatalf("the prompt reached up's stderr without --log-prompts:\n%s", stderr.String())
	}
}
