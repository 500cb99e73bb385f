package main

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// TestServeSlidingView: serve's --model-config with the decoders'
// --max-total-tokens and --swa-full-tokens-ratio gives the live router the
// sliding view the simulator's has for the same workers: GPT-OSS-120B's
// 128-token window in 64-token blocks is a run of 2; 0.05 × 1,717,392 =
// 85,869 sliding tokens are 1,341 blocks (the sim's figures for its KVC
// decoders at R = 0.05, docs/fidelity.md). A model SGLang serves from one
// pool (Mistral-7B's sliding window) and no --max-total-tokens give none.
func TestServeSlidingView(t *testing.T) {
	gptoss := "../../internal/model/testdata/hf/gpt-oss-120b.json"
	mistral := "../../internal/model/testdata/hf/mistral-7b-v0.1.json"
	for _, c := range []struct {
		config      string
		ratio       float64
		pool        int64
		run, blocks int
	}{
		{gptoss, 0.05, 1717392, 2, 1341},
		{gptoss, 0.8, 1001808, 2, 12522},
		{gptoss, 0.05, 0, 0, 0},
		{mistral, 0.05, 1717392, 0, 0},
		{"", 0.05, 1717392, 0, 0},
	} {
		f := slideFlags{swaRatio: c.ratio, poolTokens: c.pool}
		var o kvc.Options
		if err := f.view(&o, c.config, 64); err != nil {
			t.Fatal(err)
		}
		if o.SlidingRunBlocks != c.run || o.SlidingPoolBlocks != c.blocks || o.SlidingTails != (c.run > 0) {
			t.Errorf("%s at %v of %d: view %d/%d tails %v, want %d/%d", c.config, c.ratio, c.pool,
				o.SlidingRunBlocks, o.SlidingPoolBlocks, o.SlidingTails, c.run, c.blocks)
		}
	}
	f := slideFlags{swaRatio: 0.05, poolTokens: 1000}
	if err := f.view(&kvc.Options{}, "no-such-config.json", 64); err == nil || !strings.Contains(err.Error(), "--model-config") {
		t.Errorf("a missing config: %v, want an error naming --model-config", err)
	}
}

// TestServeSlidingViewFlagErrors: the new flags name themselves and their
// range, and apply only where they mean something.
func TestServeSlidingViewFlagErrors(t *testing.T) {
	gptoss := "../../internal/model/testdata/hf/gpt-oss-120b.json"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-total-tokens", "1000"}, "--max-total-tokens 1000: applies only with --model-config"},
		{[]string{"--model-config", gptoss, "--max-total-tokens", "-1"}, "--max-total-tokens -1"},
		{[]string{"--model-config", gptoss, "--swa-full-tokens-ratio", "0.05"}, "--swa-full-tokens-ratio 0.05: applies only with --model-config and --max-total-tokens"},
		{[]string{"--model-config", gptoss, "--max-total-tokens", "1000", "--swa-full-tokens-ratio", "1.5"}, "--swa-full-tokens-ratio 1.5"},
	} {
		args := append([]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2"}, tc.args...)
		_, se, err := runCLI(args...)
		if err == nil || !strings.Contains(se, tc.want) {
			t.Errorf("%v: err %v, stderr %q; want an error naming %s", tc.args, err, se, tc.want)
		}
	}
}
