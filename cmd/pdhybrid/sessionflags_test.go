package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/pdhybrid/pdhybrid/internal/gateway"
)

// serve --help states the order the gateway resolves sessions in.
func TestSessionOrderHelp(t *testing.T) {
	help := strings.Join(strings.Fields(sessionOrderHelp), " ")
	at := 0
	for _, name := range gateway.SessionOrder("H", "f") {
		switch name {
		case "H":
			name = "--session-header"
		case "body.f":
			name = "--session-field"
		default:
			name = strings.TrimPrefix(name, "body.")
		}
		i := strings.Index(help[at:], name)
		if i < 0 {
			t.Fatalf("serve --help does not list %s after position %d:\n%s", name, at, help)
		}
		at += i + len(name)
	}
	so, _, err := runCLI("serve", "--help")
	if err != nil || !strings.Contains(strings.Join(strings.Fields(so), " "), help) {
		t.Fatalf("serve --help (%v) lacks the session order:\n%s", err, so)
	}
}

func TestSessionFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--decode", "http://127.0.0.1:2", "--prefill", "http://127.0.0.1:1", "--session-header", "X Bad"}, "--session-header"},
		{[]string{"serve", "--decode", "http://127.0.0.1:2", "--prefill", "http://127.0.0.1:1", "--session-field", "metadata..id"}, "--session-field"},
		{[]string{"up", "--port", "0", "--session-field", "a.b c"}, "--session-field"},
	} {
		_, stderr, err := runCLI(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if exitCode(err) != exitUsage || !strings.Contains(first, c.want) {
			t.Errorf("%v: exit %d, first line %q; want 2 naming %s", c.args, exitCode(err), first, c.want)
		}
	}
}

// pdhybrid up as a subprocess, driven by the official Anthropic SDK with
// the session in a header configured by --session-header: the first turn
// is seeded, the later ones (a tool_use / tool_result loop, streamed and
// not) go direct to the decoder and read a growing cached prefix.
func TestUpAnthropicSDK(t *testing.T) {
	gw, _, _, _, _ := startUp(t, "--mechanism", "kvcache-centric", "--kvc-preset", "v2", "--prefill", "1", "--decode", "2", "--port", "0",
		"--time-scale", "20", "--session-header", "X-Agent-Conversation")
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(gw), option.WithAPIKey("unused"),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second), option.WithHeader("X-Agent-Conversation", "conv-1"))
	ctx := context.Background()
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("Refactor the parser. ", 60)))}
	var lastCached int64
	for turn := 1; turn <= 3; turn++ {
		var resp *http.Response
		params := anthropic.MessageNewParams{Model: "qwen3-30b-a3b", MaxTokens: 8, Messages: msgs}
		var msg anthropic.Message
		if turn == 2 {
			stream := client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
		} else {
			m, err := client.Messages.New(ctx, params, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
			msg = *m
		}
		mode := resp.Header.Get("X-PDHybrid-Mode")
		cached := msg.Usage.CacheReadInputTokens
		t.Logf("turn %d: %s, %d cached, %d uncached input tokens", turn, mode, cached, msg.Usage.InputTokens)
		want := "kvcache-direct-to-d-session"
		if turn == 1 {
			want = "pd-router-turn1-seed"
		}
		if mode != want || (turn > 1 && cached <= lastCached) || msg.Usage.OutputTokens != 8 {
			t.Fatalf("turn %d: mode %q, %d cached (previous turn %d), %d output tokens; want %s and growing reuse",
				turn, mode, cached, lastCached, msg.Usage.OutputTokens, want)
		}
		lastCached = cached
		id := "toolu_" + string(rune('a'+turn))
		answer := msg.ToParam()
		answer.OfAssistant.Content = append(answer.OfAssistant.Content, anthropic.NewToolUseBlock(id, map[string]any{"cmd": "go test ./..."}, "bash"))
		msgs = append(msgs, answer, anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, "ok\n", false)))
	}
}
