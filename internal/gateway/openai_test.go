package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The official OpenAI Go SDK against the gateway: a multi-turn chat through
// KVC (streamed and not; the second turn goes direct to its decoder and
// reports the cached prefix in usage), and a completion on DP.
func TestGatewayOpenAISDK(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	gw := gateway(t, kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("unused"),
		option.WithHeader("X-Session-Id", "chat-1"))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(strings.Repeat("You are a careful coding agent. ", 40)),
		openai.UserMessage("Fix the failing test in parser.go."),
	}
	first, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "qwen3-30b-a3b", Messages: msgs, MaxTokens: openai.Int(12)})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Choices) != 1 || first.Choices[0].Message.Content == "" || first.Usage.CompletionTokens != 12 {
		t.Fatalf("first turn: %+v", first)
	}
	msgs = append(msgs, openai.AssistantMessage(first.Choices[0].Message.Content), openai.UserMessage("Now run the tests."))
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "qwen3-30b-a3b", Messages: msgs,
		MaxTokens: openai.Int(12), StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var text strings.Builder
	var cached, completion int64
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		chunks++
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
		if c.Usage.TotalTokens > 0 {
			cached, completion = c.Usage.PromptTokensDetails.CachedTokens, c.Usage.CompletionTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 2 || text.Len() == 0 || completion != 12 || cached < 100 {
		t.Fatalf("second turn streamed %d chunks, text %q, %d completion and %d cached tokens; want the cached conversation", chunks, text.String(), completion, cached)
	}

	c0 := worker(t, engine.RoleColocated, false)
	gwc := gateway(t, kvc.MechColo, nil, []*emulator.Server{c0})
	cc := openai.NewClient(option.WithBaseURL(gwc.URL+"/v1/"), option.WithAPIKey("unused"))
	comp, err := cc.Completions.New(ctx, openai.CompletionNewParams{Model: "qwen3-30b-a3b",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("def fib(n):")}, MaxTokens: openai.Int(5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 1 || comp.Choices[0].Text == "" || comp.Usage.CompletionTokens != 5 || comp.Choices[0].FinishReason != "length" {
		t.Fatalf("completion: %+v", comp)
	}
}
